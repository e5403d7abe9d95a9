#include "common/clock.h"

#include <gtest/gtest.h>

#include "tests/mocks/fake_clock.h"

namespace rocefab {
namespace {

TEST(SystemClock, MonotonicNeverGoesBack) {
  const Clock& clock = SystemClock::Instance();
  int64_t previous = clock.MonotonicUs();
  for (int i = 0; i < 1000; ++i) {
    const int64_t now = clock.MonotonicUs();
    ASSERT_GE(now, previous);
    previous = now;
  }
  // Wall time is after 2020-01-01.
  EXPECT_GT(clock.NowUs(), 1'577'836'800'000'000);
}

TEST(FakeClock, AdvancesBothClocks) {
  testing::FakeClock clock(1000);
  const int64_t mono = clock.MonotonicUs();
  clock.Advance(500);
  EXPECT_EQ(clock.NowUs(), 1500);
  EXPECT_EQ(clock.MonotonicUs(), mono + 500);
}

}  // namespace
}  // namespace rocefab
