// Merging shard answers: a cause found by one shard leads the verdict even
// when another shard is in the worse state, the worst state wins, and
// anomaly ids from different shards never collide.
#include "cli/shards.h"

#include <gtest/gtest.h>

namespace rocefab::cli {
namespace {

v1::Finding Finding(const std::string& kind, const std::string& entity, double confidence,
                    const std::string& role) {
  v1::Finding f;
  f.set_kind(kind);
  f.set_entity(entity);
  f.set_confidence(confidence);
  f.set_role(role);
  f.set_playbook("playbooks/" + kind + ".md");
  return f;
}

TEST(Shards, ACauseFromAnyShardLeadsTheMergedVerdict) {
  v1::DiagnoseJobResponse zone1, zone2;
  zone1.set_state("degraded");
  zone1.set_verdict("DEGRADED since 10:00:01Z (busbw 80.0 GB/s now vs 140.0 GB/s baseline); no fabric "
                    "cause on its paths: check GPUs, hosts and software");
  zone1.add_degraded()->set_start_us(1);
  *zone1.add_findings() = Finding("pfc_pause", "z1-atsw01/Ethernet1", 0.2, "cause");
  zone2.set_state("degraded");
  zone2.set_verdict("DEGRADED since 10:00:02Z; most likely cause: pfc_storm on z2-r02-h1/mlx5_0 (confidence 88%)");
  *zone2.add_findings() = Finding("pfc_storm", "z2-r02-h1/mlx5_0", 0.88, "cause");
  zone2.mutable_job()->set_id("4711");
  zone2.mutable_job()->add_ranks()->set_host("z2-r02-h1");
  const auto merged = MergeDiagnoses({zone1, zone2});
  EXPECT_EQ(merged.state(), "degraded");
  ASSERT_EQ(merged.findings_size(), 2);
  EXPECT_EQ(merged.findings(0).kind(), "pfc_storm");
  EXPECT_NE(merged.verdict().find("most likely cause: pfc_storm on z2-r02-h1/mlx5_0 (confidence 88%)"),
            std::string::npos)
      << merged.verdict();
  EXPECT_EQ(merged.verdict().find("no fabric cause"), std::string::npos) << merged.verdict();
  EXPECT_EQ(merged.playbook(), "playbooks/pfc_storm.md");
  EXPECT_EQ(merged.job().id(), "4711");
}

TEST(Shards, TheWorstStateWinsAndUnknownOnlyWhenNobodyKnows) {
  v1::DiagnoseJobResponse healthy, stalled, unknown;
  healthy.set_state("healthy");
  stalled.set_state("stalled");
  stalled.set_verdict("STALLED: no collective completes; no fabric cause found");
  unknown.set_state("unknown");
  EXPECT_EQ(MergeDiagnoses({healthy, stalled, unknown}).state(), "stalled");
  EXPECT_EQ(MergeDiagnoses({unknown, healthy}).state(), "healthy");
  EXPECT_EQ(MergeDiagnoses({unknown, unknown}).state(), "unknown");
  // One shard: its answer as it is.
  EXPECT_EQ(MergeDiagnoses({stalled}).verdict(), stalled.verdict());
}

TEST(Shards, AHealthyVerdictNeverSaysNoAnomalyWhenAShardFoundOne) {
  v1::DiagnoseJobResponse quiet, noticed;
  quiet.set_state("healthy");
  quiet.set_verdict("healthy: busbw 52.2 GB/s now vs 52.2 GB/s baseline; no anomaly on its paths");
  noticed.set_state("healthy");
  noticed.set_verdict("healthy: busbw 52.0 GB/s now vs 52.2 GB/s baseline; no anomaly on its paths");
  *noticed.add_findings() = Finding("ecn_hotspot", "z2-ctsw01/Ethernet4", 0.3, "cause");
  const auto merged = MergeDiagnoses({quiet, noticed});
  EXPECT_EQ(merged.verdict().find("no anomaly"), std::string::npos) << merged.verdict();
  EXPECT_NE(merged.verdict().find("1 finding(s) on its paths did not slow it; top: ecn_hotspot"),
            std::string::npos)
      << merged.verdict();
}

TEST(Shards, AnomalyIdsAndTheirLinksStayUniqueAcrossShards) {
  v1::ListAnomaliesResponse a, b;
  auto* storm = a.add_anomalies();
  storm->set_id(1);
  auto* victim = a.add_anomalies();
  victim->set_id(2);
  victim->set_caused_by(1);
  b.add_anomalies()->set_id(1);
  const auto merged = MergeAnomalies({a, b});
  ASSERT_EQ(merged.anomalies_size(), 3);
  std::set<uint64_t> ids;
  for (const auto& x : merged.anomalies()) ids.insert(x.id());
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(merged.anomalies(1).caused_by(), merged.anomalies(0).id());
}

}  // namespace
}  // namespace rocefab::cli
