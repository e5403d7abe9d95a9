#pragma once
// Human durations as operators type them: "500ms", "1s", "5m", "2h", "7d",
// and combinations such as "1m30s".

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace rocefab {

// Microseconds. Rejects empty, negative, unit-less (except "0") and overflowing input.
absl::StatusOr<int64_t> ParseDurationUs(std::string_view text);
// A moment as operators type it, in Unix microseconds: RFC 3339
// ("2026-12-01T18:04:05Z", "2026-12-01T19:04:05+01:00"), a time relative
// to `now_us` ("-10m", "now"), or Unix seconds ("1764612245").
absl::StatusOr<int64_t> ParseTimeUs(std::string_view text, int64_t now_us);
// The shortest exact rendering: 1500000 -> "1.5s", 300000000 -> "5m".
std::string FormatDurationUs(int64_t us);

}  // namespace rocefab
