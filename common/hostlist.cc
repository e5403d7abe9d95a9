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

absl::Status ExpandOne(std::string_view item, size_t limit, std::vector<std::string>* out) {
  const size_t open = item.find('[');
  if (open == std::string_view::npos) {
    if (item.empty()) return absl::InvalidArgumentError("empty host name");
    out->emplace_back(item);
    return out->size() > limit ? absl::InvalidArgumentError(StrCat("more than ", limit, " hosts"))
                               : absl::OkStatus();
  }
  const size_t close = item.find(']', open);
  const std::string_view prefix = item.substr(0, open);
  const std::string_view ranges = item.substr(open + 1, close - open - 1);
  const std::string_view rest = item.substr(close + 1);
  if (ranges.empty()) return absl::InvalidArgumentError("empty brackets");
  size_t start = 0;
  while (start <= ranges.size()) {
    size_t comma = ranges.find(',', start);
    if (comma == std::string_view::npos) comma = ranges.size();
    const std::string_view range = ranges.substr(start, comma - start);
    const size_t dash = range.find('-');
    const std::string_view lo_text = range.substr(0, dash);
    const std::string_view hi_text = dash == std::string_view::npos ? lo_text : range.substr(dash + 1);
    uint64_t lo = 0, hi = 0;
    auto parse = [](std::string_view t, uint64_t* v) {
      if (t.empty() || t.size() > 9) return false;
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *v);
      return ec == std::errc() && p == t.data() + t.size();
    };
    if (!parse(lo_text, &lo) || !parse(hi_text, &hi) || hi < lo)
      return absl::InvalidArgumentError(StrCat("bad range '", range, "'"));
    if (hi - lo > limit) return absl::InvalidArgumentError(StrCat("more than ", limit, " hosts"));
    for (uint64_t n = lo; n <= hi; ++n) {
      std::string number = std::to_string(n);
      if (number.size() < lo_text.size()) number.insert(0, lo_text.size() - number.size(), '0');
      // A further bracket group in the rest expands recursively.
      if (auto s = ExpandOne(StrCat(prefix, number, rest), limit, out); !s.ok()) return s;
    }
    start = comma + 1;
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
