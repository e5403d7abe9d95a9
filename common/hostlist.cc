#include "common/hostlist.h"

#include <charconv>

#include "common/strings.h"

namespace rocefab {
namespace {

// Splits on commas that are not inside brackets.
absl::StatusOr<std::vector<std::string_view>> SplitTop(std::string_view text) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '[') {
      if (++depth > 1) return absl::InvalidArgumentError("nested brackets");
    } else if (text[i] == ']') {
      if (--depth < 0) return absl::InvalidArgumentError("']' without '['");
    } else if (text[i] == ',' && depth == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) return absl::InvalidArgumentError("'[' without ']'");
  parts.push_back(text.substr(start));
  return parts;
}

// A piece of a hostlist item: literal text, or a bracket group's ranges.
struct Range {
  uint64_t lo = 0, hi = 0;
  size_t width = 0;  // digits to zero-pad to, from the low bound's text
};
struct Segment {
  std::string_view literal;
  std::vector<Range> ranges;  // empty for a literal
};

// Expands one comma-free item ("z1-r[01-02]-h[1-2]"). Every group is parsed
// and the number of names counted before any name is built, so an item that
// would exceed `limit` costs nothing, and each name is built once.
absl::Status ExpandOne(std::string_view item, size_t limit, std::vector<std::string>* out) {
  if (item.empty()) return absl::InvalidArgumentError("empty host name");
  std::vector<Segment> segments;
  size_t count = 1;
  while (!item.empty()) {
    const size_t open = item.find('[');
    if (open != 0) {
      segments.push_back({item.substr(0, open), {}});
      if (open == std::string_view::npos) break;
    }
    const size_t close = item.find(']', open);
    const std::string_view ranges = item.substr(open + 1, close - open - 1);
    item.remove_prefix(close + 1);
    if (ranges.empty()) return absl::InvalidArgumentError("empty brackets");
    Segment group;
    size_t names = 0;
    for (size_t start = 0; start <= ranges.size();) {
      size_t comma = ranges.find(',', start);
      if (comma == std::string_view::npos) comma = ranges.size();
      const std::string_view range = ranges.substr(start, comma - start);
      start = comma + 1;
      const size_t dash = range.find('-');
      const std::string_view lo_text = range.substr(0, dash);
      const std::string_view hi_text = dash == std::string_view::npos ? lo_text : range.substr(dash + 1);
      Range r;
      auto parse = [](std::string_view t, uint64_t* v) {
        if (t.empty() || t.size() > 9) return false;
        auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *v);
        return ec == std::errc() && p == t.data() + t.size();
      };
      if (!parse(lo_text, &r.lo) || !parse(hi_text, &r.hi) || r.hi < r.lo)
        return absl::InvalidArgumentError(StrCat("bad range '", range, "'"));
      r.width = lo_text.size();
      names += r.hi - r.lo + 1;  // at most 1e9 per range, and ranges are few
      if (names > limit) return absl::InvalidArgumentError(StrCat("more than ", limit, " hosts"));
      group.ranges.push_back(r);
    }
    count *= names;  // both factors are at most limit, so this does not overflow
    if (count > limit)
      return absl::InvalidArgumentError(StrCat("more than ", limit, " hosts"));
    segments.push_back(std::move(group));
  }
  if (out->size() + count > limit) return absl::InvalidArgumentError(StrCat("more than ", limit, " hosts"));
  // An odometer over the groups: the first group varies slowest, as Slurm
  // orders names.
  struct Position {
    size_t range = 0;
    uint64_t value = 0;
  };
  std::vector<Position> at(segments.size());
  std::vector<size_t> groups;
  for (size_t i = 0; i < segments.size(); ++i)
    if (!segments[i].ranges.empty()) {
      groups.push_back(i);
      at[i].value = segments[i].ranges[0].lo;
    }
  for (bool more = true; more;) {
    std::string name;
    for (size_t i = 0; i < segments.size(); ++i) {
      if (segments[i].ranges.empty()) {
        name += segments[i].literal;
        continue;
      }
      const std::string number = std::to_string(at[i].value);
      const size_t width = segments[i].ranges[at[i].range].width;
      if (number.size() < width) name.append(width - number.size(), '0');
      name += number;
    }
    out->push_back(std::move(name));
    more = false;
    for (auto g = groups.rbegin(); g != groups.rend() && !more; ++g) {
      const auto& ranges = segments[*g].ranges;
      Position& p = at[*g];
      if (p.value < ranges[p.range].hi) {
        ++p.value;
        more = true;
      } else if (p.range + 1 < ranges.size()) {
        p.value = ranges[++p.range].lo;
        more = true;
      } else {
        p = {0, ranges[0].lo};  // wraps; the group before it advances
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandHostlist(std::string_view hostlist, size_t limit) {
  auto parts = SplitTop(hostlist);
  if (!parts.ok())
    return absl::InvalidArgumentError(StrCat("hostlist '", hostlist, "': ", parts.status().message()));
  std::vector<std::string> hosts;
  for (std::string_view part : *parts) {
    if (auto s = ExpandOne(part, limit, &hosts); !s.ok())
      return absl::InvalidArgumentError(StrCat("hostlist '", hostlist, "': ", s.message()));
  }
  return hosts;
}

}  // namespace rocefab
