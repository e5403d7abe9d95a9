#include "common/counter_delta.h"

#include <gtest/gtest.h>

namespace rocefab {
namespace {

TEST(ComputeDelta, NormalIncrease) {
  DeltaResult r = ComputeDelta(100, 250, CounterWidth::k64);
  EXPECT_EQ(r.kind, DeltaKind::kDelta);
  EXPECT_EQ(r.delta, 150u);
  EXPECT_FALSE(r.wrapped);
}

TEST(ComputeDelta, Unchanged) {
  DeltaResult r = ComputeDelta(7, 7, CounterWidth::k32);
  EXPECT_EQ(r.kind, DeltaKind::kDelta);
  EXPECT_EQ(r.delta, 0u);
}

TEST(ComputeDelta, ThirtyTwoBitWrap) {
  // out_of_sequence at 4294967290 advances by 11 and wraps to 5.
  DeltaResult r = ComputeDelta(4294967290ULL, 5, CounterWidth::k32);
  EXPECT_EQ(r.kind, DeltaKind::kDelta);
  EXPECT_EQ(r.delta, 11u);
  EXPECT_TRUE(r.wrapped);
}

TEST(ComputeDelta, ThirtyTwoBitWrapToZero) {
  DeltaResult r = ComputeDelta(0xffffffffULL, 0, CounterWidth::k32);
  EXPECT_EQ(r.kind, DeltaKind::kDelta);
  EXPECT_EQ(r.delta, 1u);
}

TEST(ComputeDelta, ThirtyTwoBitDecreaseThatIsNoWrapIsAReset) {
  DeltaResult r = ComputeDelta(100, 5, CounterWidth::k32);
  EXPECT_EQ(r.kind, DeltaKind::kReset);
  EXPECT_EQ(r.delta, 5u);
}

TEST(ComputeDelta, SixtyFourBitDecreaseIsAReset) {
  DeltaResult r = ComputeDelta(5'000'000'000ULL, 12, CounterWidth::k64);
  EXPECT_EQ(r.kind, DeltaKind::kReset);
  EXPECT_EQ(r.delta, 12u);
}

TEST(ComputeDelta, SixtyFourBitWrapNearMax) {
  DeltaResult r = ComputeDelta(0xfffffffffffffff0ULL, 0x10, CounterWidth::k64);
  EXPECT_EQ(r.kind, DeltaKind::kDelta);
  EXPECT_EQ(r.delta, 0x20u);
  EXPECT_TRUE(r.wrapped);
}

TEST(ComputeDelta, ThirtyTwoBitSourceAboveRangeIsTreatedSafely) {
  // A "32-bit" file that reads above 2^32 is not wrapped around 2^32.
  DeltaResult r = ComputeDelta(10, 5'000'000'000ULL, CounterWidth::k32);
  EXPECT_EQ(r.kind, DeltaKind::kDelta);
  EXPECT_EQ(r.delta, 4'999'999'990ULL);
}

TEST(DeltaTracker, FirstSampleHasNoDelta) {
  DeltaTracker tracker;
  EXPECT_EQ(tracker.Update("a", 42, CounterWidth::k64).kind, DeltaKind::kFirst);
  DeltaResult second = tracker.Update("a", 50, CounterWidth::k64);
  EXPECT_EQ(second.kind, DeltaKind::kDelta);
  EXPECT_EQ(second.delta, 8u);
  EXPECT_EQ(tracker.Update("b", 1, CounterWidth::k64).kind, DeltaKind::kFirst);
  EXPECT_EQ(tracker.series_count(), 2u);
}

TEST(DeltaTracker, BootIdChangeResetsEverySeries) {
  DeltaTracker tracker;
  tracker.SetBootId("boot-1");
  tracker.Update("a", 1000, CounterWidth::k64);
  tracker.Update("b", 2000, CounterWidth::k64);
  tracker.SetBootId("boot-2");
  // Even an increase after a reboot is a reset: the counter restarted.
  DeltaResult a = tracker.Update("a", 1500, CounterWidth::k64);
  EXPECT_EQ(a.kind, DeltaKind::kReset);
  EXPECT_EQ(a.delta, 1500u);
  DeltaResult b = tracker.Update("b", 10, CounterWidth::k64);
  EXPECT_EQ(b.kind, DeltaKind::kReset);
  // Afterwards, normal deltas again.
  EXPECT_EQ(tracker.Update("a", 1600, CounterWidth::k64).delta, 100u);
}

TEST(DeltaTracker, SameBootIdIsNotAReset) {
  DeltaTracker tracker;
  tracker.SetBootId("boot-1");
  tracker.Update("a", 10, CounterWidth::k64);
  tracker.SetBootId("boot-1");
  EXPECT_EQ(tracker.Update("a", 11, CounterWidth::k64).kind, DeltaKind::kDelta);
}

}  // namespace
}  // namespace rocefab
