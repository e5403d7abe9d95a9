// The routing study on the demo zone (rocefab-lab study --small): the shape
// of its answer, and the orderings the schemes' designs imply. These show
// the model and the compiler agree with each other, not with the field
// (docs/routing-study.md compares with the paper).
#include "lab/study.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

namespace rocefab::lab {
namespace {

StudyOptions Small() {
  StudyOptions o;
  o.topology = TopologyParams{};  // 8 racks x 2 hosts x 8 NICs, 4 CTSWs
  o.allreduce_hosts = 8;
  o.alltoall_hosts = 6;
  o.failures = {0, 4};
  return o;
}

TEST(RoutingStudy, EveryCaseHasEveryScheme) {
  auto rows = RunStudy(Small());
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->size(), 2u * 2u * 2u * 6u);
  for (const auto& r : *rows) {
    EXPECT_GT(r.busbw_gbs, 0) << r.collective << " " << r.placement << " " << r.scheme << r.qps;
    EXPECT_LE(r.busbw_gbs, r.ideal_busbw_gbs * 1.001);
    EXPECT_GE(r.max_to_mean, 1.0 - 1e-9);
    EXPECT_LE(r.max_utilization, 1.0 + 1e-9);
  }
}

TEST(RoutingStudy, MoreQpsHelpAndTeIsMoreEvenThanHashingWithoutFailures) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    StudyOptions o = Small();
    o.seed = seed;
    o.failures = {0};
    auto rows = RunStudy(o);
    ASSERT_TRUE(rows.ok());
    std::map<std::tuple<std::string, std::string, std::string, uint32_t>, StudyRow> by;
    for (const auto& r : *rows) by[{r.collective, r.placement, r.scheme, r.qps}] = r;
    for (const char* collective : {"all_reduce", "all_to_all"})
      for (const char* placement : {"packed", "fragmented"}) {
        SCOPED_TRACE(std::string(collective) + " " + placement + " seed " + std::to_string(seed));
        const auto& e1 = by.at({collective, placement, "eecmp", 1});
        const auto& e4 = by.at({collective, placement, "eecmp", 4});
        const auto& e16 = by.at({collective, placement, "eecmp", 16});
        const auto& te = by.at({collective, placement, "te", 4});
        EXPECT_GE(e4.busbw_gbs, e1.busbw_gbs * 0.999);
        EXPECT_GE(e16.busbw_gbs, e4.busbw_gbs * 0.999);
        EXPECT_GE(te.busbw_gbs, e4.busbw_gbs * 0.999) << "TE over its own E-ECMP fallback";
        // TE places what hashing collides; path pinning can look even by
        // being slow everywhere, so it is held to its bandwidth instead.
        for (const auto& [key, r] : by)
          if (std::get<0>(key) == collective && std::get<1>(key) == placement &&
              (r.scheme == "ecmp" || r.scheme == "eecmp")) {
            EXPECT_LE(te.max_to_mean, r.max_to_mean + 1e-9) << r.scheme << r.qps;
          }
        EXPECT_GT(te.busbw_gbs, by.at({collective, placement, "path_pinning", 1}).busbw_gbs);
      }
  }
}

TEST(RoutingStudy, EcmpEntropyOfAThousandFlowsOverSixteenLinksIsAbovePointTwo) {
  // The paper: max-to-mean flows per link above 1.2 for 1,000 flows over 16.
  EXPECT_GT(EcmpMaxToMean(1000, 16, 1000, 1), 1.2);
  // More flows per link even out: the statistic falls toward 1.
  EXPECT_LT(EcmpMaxToMean(100000, 16, 200, 1), 1.05);
}

}  // namespace
}  // namespace rocefab::lab
