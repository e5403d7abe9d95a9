#include "common/clock.h"

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

std::string FormatUtcTimeOfDay(int64_t unix_us) {
  const time_t t = static_cast<time_t>(unix_us / 1'000'000);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace rocefab
