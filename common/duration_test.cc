#include "common/duration.h"

#include <gtest/gtest.h>

namespace rocefab {
namespace {

TEST(Duration, ParsesUnits) {
  EXPECT_EQ(*ParseDurationUs("500ms"), 500'000);
  EXPECT_EQ(*ParseDurationUs("1s"), 1'000'000);
  EXPECT_EQ(*ParseDurationUs("5m"), 300'000'000);
  EXPECT_EQ(*ParseDurationUs("2h"), 7'200'000'000);
  EXPECT_EQ(*ParseDurationUs("7d"), 604'800'000'000);
  EXPECT_EQ(*ParseDurationUs("1m30s"), 90'000'000);
  EXPECT_EQ(*ParseDurationUs("250us"), 250);
  EXPECT_EQ(*ParseDurationUs("0"), 0);
}

TEST(Duration, RejectsBadInput) {
  for (const char* bad : {"", "5", "-1s", "1.5s", "s", "5 parsecs", "1y", "99999999999999999999d",
                          "1s ", "10000000000000d"}) {
    EXPECT_FALSE(ParseDurationUs(bad).ok()) << bad;
  }
}

TEST(Duration, Formats) {
  EXPECT_EQ(FormatDurationUs(0), "0s");
  EXPECT_EQ(FormatDurationUs(1'000'000), "1s");
  EXPECT_EQ(FormatDurationUs(300'000'000), "5m");
  EXPECT_EQ(FormatDurationUs(1'500'000), "1500ms");
  EXPECT_EQ(FormatDurationUs(604'800'000'000), "7d");
}

}  // namespace
}  // namespace rocefab

namespace rocefab {
namespace {

TEST(ParseTime, Rfc3339RelativeAndUnixSeconds) {
  const int64_t now = 1'764'612'245'000'000;  // 2025-12-01T18:04:05Z
  EXPECT_EQ(*ParseTimeUs("2025-12-01T18:04:05Z", 0), now);
  EXPECT_EQ(*ParseTimeUs("2025-12-01T19:04:05+01:00", 0), now);
  EXPECT_EQ(*ParseTimeUs("2025-12-01T18:04:05.5Z", 0), now + 500'000);
  EXPECT_EQ(*ParseTimeUs("-10m", now), now - 600'000'000);
  EXPECT_EQ(*ParseTimeUs("now", now), now);
  EXPECT_EQ(*ParseTimeUs("1764612245", 0), now);
  for (const char* bad : {"", "yesterday", "-", "-10", "2025-13-01T00:00:00Z", "18:04", "1764612245000000000"})
    EXPECT_FALSE(ParseTimeUs(bad, now).ok()) << bad;
}

}  // namespace
}  // namespace rocefab
