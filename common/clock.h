#pragma once
// The one source of time for logic code. Daemons get a SystemClock from main;
// tests get tests/mocks/fake_clock.h. No logic calls now() directly.

#include <cstdint>
#include <string>

namespace rocefab {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time, microseconds since the Unix epoch. For timestamps.
  virtual int64_t NowUs() const = 0;
  // Monotonic time in microseconds. For intervals and deadlines.
  virtual int64_t MonotonicUs() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowUs() const override;
  int64_t MonotonicUs() const override;
  // A process-wide instance for main().
  static const SystemClock& Instance();
};

// "14:05:09Z": the UTC time of day of a Unix time in microseconds, for
// tables and verdicts.
std::string FormatUtcTimeOfDay(int64_t unix_us);
// "2026-11-29T18:07:59.123Z": RFC 3339 with milliseconds.
std::string FormatRfc3339(int64_t unix_us);

}  // namespace rocefab
