#include "common/clock.h"

#include <cstdio>
#include <ctime>

#include <chrono>

namespace rocefab {

int64_t SystemClock::NowUs() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t SystemClock::MonotonicUs() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const SystemClock& SystemClock::Instance() {
  static const SystemClock clock;
  return clock;
}

namespace {
std::string FormatUtc(int64_t unix_us, const char* format) {
  const time_t t = static_cast<time_t>(unix_us / 1'000'000);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[48];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}
}  // namespace

std::string FormatUtcTimeOfDay(int64_t unix_us) { return FormatUtc(unix_us, "%H:%M:%SZ"); }

std::string FormatRfc3339(int64_t unix_us) {
  char ms[8];
  std::snprintf(ms, sizeof ms, ".%03dZ", static_cast<int>((unix_us / 1000) % 1000));
  return FormatUtc(unix_us, "%Y-%m-%dT%H:%M:%S") + ms;
}

}  // namespace rocefab
