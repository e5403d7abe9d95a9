#include "common/duration.h"

#include <cctype>
#include <cstdio>
#include <limits>

#include "common/strings.h"

#include "absl/time/time.h"

namespace rocefab {

absl::StatusOr<int64_t> ParseDurationUs(std::string_view text) {
  const std::string original(text);
  if (text.empty()) return absl::InvalidArgumentError("empty duration");
  if (text == "0") return 0;
  int64_t total = 0;
  while (!text.empty()) {
    size_t digits = 0;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
    if (digits == 0 || digits > 15)
      return absl::InvalidArgumentError(
          StrCat("bad duration '", original, "': expected e.g. 500ms, 1s, 5m, 2h, 7d"));
    int64_t number = 0;
    for (size_t i = 0; i < digits; ++i) number = number * 10 + (text[i] - '0');
    text.remove_prefix(digits);
    size_t unit_len = 0;
    while (unit_len < text.size() && std::isalpha(static_cast<unsigned char>(text[unit_len])))
      ++unit_len;
    std::string_view unit = text.substr(0, unit_len);
    text.remove_prefix(unit_len);
    int64_t scale = 0;
    if (unit == "us") scale = 1;
    else if (unit == "ms") scale = 1000;
    else if (unit == "s") scale = 1000000;
    else if (unit == "m") scale = 60LL * 1000000;
    else if (unit == "h") scale = 3600LL * 1000000;
    else if (unit == "d") scale = 86400LL * 1000000;
    else
      return absl::InvalidArgumentError(StrCat(
          "bad duration '", original, "': unit must be one of us, ms, s, m, h, d"));
    if (number > std::numeric_limits<int64_t>::max() / scale - total)
      return absl::InvalidArgumentError(StrCat("duration '", original, "' is too long"));
    total += number * scale;
  }
  return total;
}

std::string FormatDurationUs(int64_t us) {
  struct Unit {
    int64_t scale;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{86400LL * 1000000, "d"}, {3600LL * 1000000, "h"},
                                    {60LL * 1000000, "m"},    {1000000, "s"},
                                    {1000, "ms"},             {1, "us"}};
  if (us == 0) return "0s";
  for (const Unit& unit : kUnits) {
    if (us % unit.scale == 0) return StrCat(us / unit.scale, unit.name);
  }
  return StrCat(us, "us");
}

absl::StatusOr<int64_t> ParseTimeUs(std::string_view text, int64_t now_us) {
  if (text == "now") return now_us;
  if (!text.empty() && text[0] == '-') {
    auto ago = ParseDurationUs(text.substr(1));
    if (!ago.ok())
      return absl::InvalidArgumentError(StrCat("'", text, "': a relative time is a minus and a duration, e.g. -10m"));
    return now_us - *ago;
  }
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos && text.size() <= 12) {
    int64_t seconds = 0;
    for (char c : text) seconds = seconds * 10 + (c - '0');
    return seconds * 1'000'000;
  }
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, std::string(text), &t, &error))
    return absl::InvalidArgumentError(StrCat("'", text, "' is not a time: give RFC 3339 (2026-12-01T18:04:05Z), "
                                             "a relative time (-10m) or Unix seconds"));
  return absl::ToUnixMicros(t);
}

}  // namespace rocefab
