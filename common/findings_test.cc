#include "common/findings.h"

#include <gtest/gtest.h>

namespace rocefab {
namespace {

// 10:00:00Z on some day, in µs.
constexpr int64_t kTen = 1'796'464'800'000'000;

v1::DiagnoseJobResponse Degraded(const std::string& latest_kind) {
  v1::DiagnoseJobResponse d;
  d.set_state("degraded");
  d.set_window_start_us(kTen);
  d.set_busbw_op("AllGather");
  d.set_recent_busbw_gbs(105.3);
  d.set_baseline_busbw_gbs(105.2);
  d.set_busbw_ratio(1.0);
  d.set_baseline_from("its 5 healthy buckets");
  v1::DegradedInterval* i = d.add_degraded();
  i->set_kind(latest_kind);
  i->set_start_us(kTen + 15'000'000);
  i->set_end_us(kTen + 27'000'000);
  v1::Finding* f = d.add_findings();
  f->set_kind("buffer_threshold_drops");
  f->set_entity("z1-rtsw06/Ethernet44");
  f->set_role("cause");
  f->set_confidence(0.88);
  f->set_start_us(kTen + 14'000'000);
  return d;
}

// A stall that ended leaves busbw at its baseline while the job ran: the
// verdict says the job stopped, and quotes busbw only as what it did while it
// ran, never as the degradation.
TEST(ComposeVerdict, AStallThatEndedIsSaidAsAStallNotAsItsBusbw) {
  const std::string v = ComposeVerdict(Degraded("job_stalled"));
  EXPECT_EQ(v.rfind("DEGRADED from 10:00:15Z to 10:00:27Z: no collective completed (while it ran, AllGather busbw "
                    "105.3 GB/s vs 105.2 GB/s baseline",
                    0),
            0u)
      << v;
  EXPECT_NE(v.find("most likely cause: buffer_threshold_drops on z1-rtsw06/Ethernet44"), std::string::npos) << v;
}

TEST(ComposeVerdict, ARegressionQuotesItsBusbw) {
  v1::DiagnoseJobResponse d = Degraded("busbw_regression");
  d.set_recent_busbw_gbs(60.7);
  d.set_baseline_busbw_gbs(115.8);
  d.set_busbw_ratio(0.52);
  const std::string v = ComposeVerdict(d);
  EXPECT_EQ(v.rfind("DEGRADED from 10:00:15Z to 10:00:27Z: AllGather busbw 60.7 GB/s vs 115.8 GB/s baseline (0.52x", 0),
            0u)
      << v;
}

TEST(ComposeVerdict, AStallThatLastsIsStalled) {
  v1::DiagnoseJobResponse d = Degraded("job_stalled");
  d.set_state("stalled");
  d.mutable_degraded(0)->set_end_us(0);
  EXPECT_EQ(ComposeVerdict(d).rfind("STALLED since 10:00:15Z: no collective completes; most likely cause: ", 0), 0u)
      << ComposeVerdict(d);
}

}  // namespace
}  // namespace rocefab
