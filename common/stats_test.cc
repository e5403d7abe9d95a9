#include "common/stats.h"

#include <gtest/gtest.h>

#include <random>

namespace rocefab {
namespace {

TEST(Stats, MedianOfOddEvenAndEmpty) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
}

TEST(Stats, ChooseCountsTheSetsOfKAmongN) {
  EXPECT_EQ(Choose(8, 1), 8);
  EXPECT_EQ(Choose(8, 2), 28);
  EXPECT_EQ(Choose(56, 3), 27720);
  EXPECT_EQ(Choose(4, 4), 1);
  EXPECT_EQ(Choose(4, 0), 1);
  EXPECT_EQ(Choose(3, 4), 0);
  EXPECT_DOUBLE_EQ(Choose(1024, 2), 523776);
}

TEST(Stats, RobustSpreadIsTheStandardDeviationOfNormalDataAndIgnoresOutliers) {
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal(100, 5);
  std::vector<double> v;
  for (int i = 0; i < 20000; ++i) v.push_back(normal(rng));
  EXPECT_NEAR(RobustSpread(v), 5, 0.15);
  for (int i = 0; i < 1000; ++i) v.push_back(1e6);  // 5% wild outliers
  EXPECT_LT(RobustSpread(v), 6);
}

}  // namespace
}  // namespace rocefab
