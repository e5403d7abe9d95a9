#include "collector/diagnosis.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "common/clock.h"

namespace rocefab::collector {
namespace {

const char* kDiagnosisTopology = R"yaml(
switches:
  - {name: z1-rtsw01, role: rtsw, zone: z1}
  - {name: z1-rtsw02, role: rtsw, zone: z1}
  - {name: z1-rtsw03, role: rtsw, zone: z1}
  - {name: z1-ctsw01, role: ctsw, zone: z1}
  - {name: z1-ctsw02, role: ctsw, zone: z1}
hosts:
  - {name: z1-r01-h1, zone: z1, rack: 1, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.1.1}]}
  - {name: z1-r02-h1, zone: z1, rack: 2, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.2.1}]}
  - {name: z1-r03-h1, zone: z1, rack: 3, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.3.1}]}
links:
  - {a: z1-r01-h1/mlx5_0, b: z1-rtsw01/Ethernet0, speed_gbps: 400}
  - {a: z1-r02-h1/mlx5_0, b: z1-rtsw02/Ethernet0, speed_gbps: 400}
  - {a: z1-r03-h1/mlx5_0, b: z1-rtsw03/Ethernet0, speed_gbps: 400}
  - {a: z1-rtsw01/Ethernet8, b: z1-ctsw01/Ethernet0, speed_gbps: 400}
  - {a: z1-rtsw01/Ethernet12, b: z1-ctsw02/Ethernet0, speed_gbps: 400}
  - {a: z1-rtsw02/Ethernet8, b: z1-ctsw01/Ethernet4, speed_gbps: 400}
  - {a: z1-rtsw02/Ethernet12, b: z1-ctsw02/Ethernet4, speed_gbps: 400}
  - {a: z1-rtsw03/Ethernet8, b: z1-ctsw01/Ethernet8, speed_gbps: 400}
  - {a: z1-rtsw03/Ethernet12, b: z1-ctsw02/Ethernet8, speed_gbps: 400}
)yaml";

v1::Job TwoRackJob() {
  v1::Job job;
  job.set_id("4711");
  for (int r = 0; r < 2; ++r) {
    auto* p = job.add_ranks();
    p->set_rank(static_cast<uint32_t>(r));
    p->set_host(r == 0 ? "z1-r01-h1" : "z1-r02-h1");
    p->set_nic("mlx5_0");
  }
  return job;
}

// A diagnosis of TwoRackJob over [start_us, end_us), on kDiagnosisTopology.
DiagnoseInput TwoRackJobInput(int64_t start_us, int64_t end_us) {
  auto topo = Topology::FromYaml(kDiagnosisTopology, "test");
  EXPECT_TRUE(topo.ok()) << topo.status();
  DiagnoseInput in;
  in.job = TwoRackJob();
  if (topo.ok()) in.footprint = JobFootprint(topo->get(), in.job, {});
  in.window_start_us = start_us;
  in.window_end_us = end_us;
  return in;
}

v1::Anomaly Make(uint64_t id, const std::string& kind, const std::string& entity, int64_t start,
                 v1::Severity severity = v1::SEVERITY_CRITICAL, uint64_t caused_by = 0) {
  v1::Anomaly a;
  a.set_id(id);
  a.set_kind(kind);
  a.set_entity(entity);
  a.set_start_us(start);
  a.set_severity(severity);
  a.set_caused_by(caused_by);
  a.set_magnitude(0.8);
  return a;
}

TEST(FootprintTest, JobPathsCoverItsRacksUplinksAndSpinesButNotOtherRacks) {
  auto topo = Topology::FromYaml(kDiagnosisTopology, "test");
  ASSERT_TRUE(topo.ok()) << topo.status();
  const Footprint fp = JobFootprint(topo->get(), TwoRackJob(), {});
  for (const char* port : {"z1-r01-h1/mlx5_0", "z1-rtsw01/Ethernet0", "z1-rtsw01/Ethernet8", "z1-ctsw01/Ethernet0",
                           "z1-ctsw02/Ethernet4"})
    EXPECT_TRUE(fp.ports.count(port)) << port;
  for (const char* port : {"z1-rtsw03/Ethernet0", "z1-rtsw03/Ethernet8", "z1-ctsw01/Ethernet8"})
    EXPECT_FALSE(fp.ports.count(port)) << port << " carries none of its traffic";
  EXPECT_TRUE(fp.devices.count("z1-ctsw02"));
  EXPECT_FALSE(fp.devices.count("z1-rtsw03"));
  // A drained uplink carries nothing.
  const Footprint drained = JobFootprint(topo->get(), TwoRackJob(), {"z1-rtsw01/Ethernet12"});
  EXPECT_FALSE(drained.ports.count("z1-rtsw01/Ethernet12"));
  EXPECT_FALSE(drained.ports.count("z1-ctsw02/Ethernet0"));
}

// A job whose NICs all hang off one RTSW: its traffic turns there, so a
// fault on that RTSW's uplinks or on a spine is not on its paths.
TEST(FootprintTest, AJobUnderOneRackSwitchCrossesNothingAboveIt) {
  auto topo = Topology::FromYaml(kDiagnosisTopology, "test");
  ASSERT_TRUE(topo.ok()) << topo.status();
  v1::Job job;
  job.set_id("4712");
  for (uint32_t r = 0; r < 2; ++r) {
    auto* p = job.add_ranks();
    p->set_rank(r);
    p->set_host("z1-r01-h1");
    p->set_nic("mlx5_0");
    p->set_gpu(r);
  }
  const Footprint fp = JobFootprint(topo->get(), job, {});
  EXPECT_TRUE(fp.ports.count("z1-rtsw01/Ethernet0"));
  EXPECT_TRUE(fp.devices.count("z1-rtsw01"));
  EXPECT_FALSE(fp.ports.count("z1-rtsw01/Ethernet8")) << "an uplink";
  EXPECT_FALSE(fp.devices.count("z1-ctsw01"));
  v1::Anomaly spine;
  spine.set_kind("buffer_threshold_drops");
  spine.set_entity("z1-ctsw01");
  EXPECT_FALSE(Touches(fp, spine, "4712"));
}

TEST(DiagnoseTest, RanksTheCauseFirstAndIgnoresOtherJobsTrouble) {
  const int64_t t = 1'800'000'000'000'000;
  DiagnoseInput in = TwoRackJobInput(t - 600'000'000, t + 60'000'000);
  v1::Anomaly regression = Make(1, "busbw_regression", "4711", t + 1'000'000, v1::SEVERITY_WARNING);
  regression.set_job("4711");
  regression.set_magnitude(0.39);
  in.anomalies = {regression,
                  Make(2, "pfc_storm", "z1-r02-h1/mlx5_0", t),
                  Make(3, "pfc_pause", "z1-rtsw02/Ethernet8", t, v1::SEVERITY_INFO, 2),
                  Make(4, "link_errors", "z1-rtsw03/Ethernet8", t),  // another rack's link
                  Make(5, "buffer_high", "z1-rtsw01/ingress_lossless_pool", t - 300'000'000, v1::SEVERITY_WARNING)};
  const v1::DiagnoseJobResponse d = Diagnose(in);
  EXPECT_EQ(d.state(), "degraded");
  ASSERT_EQ(d.degraded_size(), 1);
  EXPECT_NEAR(d.degraded(0).busbw_ratio(), 0.61, 1e-9);
  ASSERT_EQ(d.findings_size(), 3) << "the other rack's link is not on this job's paths";
  EXPECT_EQ(d.findings(0).kind(), "pfc_storm");
  EXPECT_EQ(d.findings(0).role(), "cause");
  EXPECT_EQ(d.playbook(), "playbooks/pfc_storm.md");
  EXPECT_NE(d.verdict().find("pfc_storm on z1-r02-h1/mlx5_0"), std::string::npos) << d.verdict();
  for (const auto& f : d.findings())
    if (f.kind() == "pfc_pause") {
      EXPECT_EQ(f.role(), "symptom");
    }
  // Onset only: the buffer level that began before the window and still
  // lasts stays, marked as ongoing; one that ended before it drops out.
  in.onset_only = true;
  in.window_start_us = t - 2'000'000;
  EXPECT_EQ(Diagnose(in).findings_size(), 3);
  in.anomalies[4].set_end_us(t - 100'000'000);
  EXPECT_EQ(Diagnose(in).findings_size(), 2);
}

// Buckets of `op` at `busbw` GB/s, one per second over [from, to), with a
// small alternating wobble so the baseline has a spread.
std::vector<v1::JobTimelinePoint> Buckets(int64_t from_us, int64_t to_us, double busbw, double wobble = 0.5) {
  std::vector<v1::JobTimelinePoint> points;
  int i = 0;
  for (int64_t t = from_us; t < to_us; t += 1'000'000, ++i) {
    v1::JobTimelinePoint p;
    p.set_start_us(t);
    p.set_op("AllReduce");
    p.set_records(16);
    p.set_mean_busbw_gbs(busbw + (i % 2 ? wobble : -wobble));
    points.push_back(p);
  }
  return points;
}

struct Window {
  DiagnoseInput in;
  int64_t t = 1'800'000'000'000'000;  // the window's end
};

// A job running since 10 min before `t`, a 30 s window ending at `t`.
Window ShortWindow() {
  Window w;
  w.in.job = TwoRackJob();
  w.in.job.set_start_us(w.t - 600'000'000);
  auto topo = Topology::FromYaml(kDiagnosisTopology, "test");
  w.in.footprint = JobFootprint(topo->get(), w.in.job, {});
  w.in.window_start_us = w.t - 30'000'000;
  w.in.window_end_us = w.t;
  w.in.history = Buckets(w.t - 300'000'000, w.in.window_start_us, 109.2);
  w.in.last_record_us = w.t - 1'000'000;
  return w;
}

std::string TwoDigits(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", v);
  return buf;
}

TEST(DiagnoseVerdictTest, AShortWindowTakesItsBaselineFromBeforeTheWindowAndQuotesTheTablesRatio) {
  Window w = ShortWindow();
  // The slowdown began 20 s before the window and fills it.
  w.in.history.resize(w.in.history.size() - 20);
  auto slow_before = Buckets(w.in.window_start_us - 20'000'000, w.in.window_start_us, 66.6);
  w.in.history.insert(w.in.history.end(), slow_before.begin(), slow_before.end());
  w.in.timeline = Buckets(w.in.window_start_us, w.t, 66.6);
  v1::Anomaly regression = Make(1, "busbw_regression", "4711", w.in.window_start_us - 16'000'000, v1::SEVERITY_WARNING);
  regression.set_job("4711");
  regression.set_magnitude(0.2);  // the detector's first, milder judgement
  w.in.anomalies = {regression};
  const v1::DiagnoseJobResponse d = Diagnose(w.in);
  EXPECT_EQ(d.state(), "degraded");
  EXPECT_NEAR(d.baseline_busbw_gbs(), 109.2, 0.6) << "the slow buckets before the window are not the baseline";
  ASSERT_EQ(d.degraded_size(), 1);
  EXPECT_NEAR(d.degraded(0).busbw_ratio(), 66.6 / 109.2, 0.01);
  EXPECT_DOUBLE_EQ(d.busbw_ratio(), d.degraded(0).busbw_ratio());
  EXPECT_NE(d.verdict().find(TwoDigits(d.degraded(0).busbw_ratio())), std::string::npos) << d.verdict();
  EXPECT_EQ(d.verdict().rfind("DEGRADED since ", 0), 0u) << d.verdict();
  EXPECT_NE(d.verdict().find("(before the window)"), std::string::npos) << d.verdict();
}

TEST(DiagnoseVerdictTest, ATwentyPercentDropTheDetectorsHaveNotCalledIsDegradedNotHealthy) {
  Window w = ShortWindow();
  w.in.timeline = Buckets(w.in.window_start_us, w.t, 87.9);
  const v1::DiagnoseJobResponse d = Diagnose(w.in);
  EXPECT_EQ(d.state(), "degraded") << d.verdict();
  ASSERT_EQ(d.degraded_size(), 1);
  EXPECT_EQ(d.degraded(0).kind(), "busbw_below_baseline");
  EXPECT_NEAR(d.busbw_ratio(), 87.9 / 109.2, 0.01);
  EXPECT_EQ(d.verdict().find("HEALTHY"), std::string::npos) << d.verdict();
  EXPECT_NE(d.verdict().find("no fabric cause on its paths"), std::string::npos) << d.verdict();
}

// A slowdown with no finding on its paths, and a switch on them that
// changed its image a second before: the verdict names the change as the
// lead before the generic advice (the latency regression detector waits
// 20 s, and a fault that begins meanwhile keeps it from judging). A change
// long before, or only after, is no lead.
TEST(DiagnoseVerdictTest, ASlowdownWithNoFindingNamesAVersionChangeNearItsOnset) {
  Window w = ShortWindow();
  w.in.timeline = Buckets(w.in.window_start_us, w.t, 87.9);
  const int64_t onset = Diagnose(w.in).degraded(0).start_us();
  auto change = [&](int64_t at_us) {
    v1::ComponentChange c;
    c.set_device("z1-ctsw01");
    c.set_component("image");
    c.set_from("4.2.0");
    c.set_to("4.3.0");
    c.set_at_us(at_us);
    return c;
  };
  w.in.component_changes = {change(onset - 1'000'000)};
  v1::DiagnoseJobResponse d = Diagnose(w.in);
  EXPECT_EQ(d.state(), "degraded") << d.verdict();
  EXPECT_NE(d.verdict().find("z1-ctsw01 changed image from 4.2.0 to 4.3.0"), std::string::npos) << d.verdict();
  EXPECT_NE(d.verdict().find("1 s before the slowdown"), std::string::npos) << d.verdict();
  EXPECT_EQ(d.verdict().find("no fabric cause"), std::string::npos) << d.verdict();
  w.in.component_changes = {change(onset + 400'000)};
  EXPECT_NE(Diagnose(w.in).verdict().find("at the slowdown's onset"), std::string::npos) << Diagnose(w.in).verdict();
  w.in.component_changes = {change(onset + 3'000'000)};
  EXPECT_NE(Diagnose(w.in).verdict().find("3 s after its onset"), std::string::npos) << Diagnose(w.in).verdict();
  // The closest to the onset is the lead.
  w.in.component_changes = {change(onset - int64_t{20} * 60'000'000), change(onset - 1'000'000)};
  EXPECT_NE(Diagnose(w.in).verdict().find("1 s before the slowdown"), std::string::npos);
  for (const int64_t at : {onset - int64_t{31} * 60'000'000, onset + 11'000'000}) {
    w.in.component_changes = {change(at)};
    d = Diagnose(w.in);
    EXPECT_NE(d.verdict().find("no fabric cause on its paths"), std::string::npos) << d.verdict();
  }
  // A finding on its paths is the cause whatever changed.
  w.in.component_changes = {change(onset - 1'000'000)};
  w.in.anomalies = {Make(1, "link_errors", "z1-rtsw01/Ethernet8", onset - 2'000'000, v1::SEVERITY_WARNING)};
  d = Diagnose(w.in);
  EXPECT_EQ(d.verdict().find("suspect that change"), std::string::npos) << d.verdict();
}

// The controlled lab's case: a job younger than the window loses 20% a
// quarter of the way in, and no detector has called it. Its own first
// buckets, before the drop, are the baseline.
TEST(DiagnoseVerdictTest, AJobYoungerThanTheWindowIsJudgedAgainstItsLevelBeforeTheDrop) {
  Window w = ShortWindow();
  w.in.history.clear();
  w.in.window_start_us = w.t - 60'000'000;
  w.in.job.set_start_us(w.in.window_start_us);
  w.in.timeline = Buckets(w.in.window_start_us, w.in.window_start_us + 15'000'000, 109.2);
  const auto slow = Buckets(w.in.window_start_us + 15'000'000, w.t, 87.9);
  w.in.timeline.insert(w.in.timeline.end(), slow.begin(), slow.end());
  const v1::DiagnoseJobResponse d = Diagnose(w.in);
  EXPECT_EQ(d.state(), "degraded") << d.verdict();
  EXPECT_NEAR(d.baseline_busbw_gbs(), 109.2, 0.6);
  EXPECT_NE(d.baseline_from().find("before a drop at"), std::string::npos) << d.baseline_from();
  ASSERT_EQ(d.degraded_size(), 1);
  EXPECT_EQ(d.degraded(0).start_us(), w.in.window_start_us + 15'000'000) << "the drop's own bucket";
}

// The slowdown began before a short window, with no detector interval to
// leave out of the history: the drop in the series still separates them.
TEST(DiagnoseVerdictTest, AnUncalledSlowdownInTheHistoryDoesNotBecomeItsBaseline) {
  Window w = ShortWindow();
  w.in.history = Buckets(w.t - 300'000'000, w.t - 45'000'000, 109.2);
  const auto slow = Buckets(w.t - 45'000'000, w.in.window_start_us, 87.9);
  w.in.history.insert(w.in.history.end(), slow.begin(), slow.end());
  w.in.timeline = Buckets(w.in.window_start_us, w.t, 87.9);
  const v1::DiagnoseJobResponse d = Diagnose(w.in);
  EXPECT_EQ(d.state(), "degraded") << d.verdict();
  EXPECT_NEAR(d.busbw_ratio(), 87.9 / 109.2, 0.01);
  EXPECT_NE(d.verdict().find("(before the window)"), std::string::npos) << d.verdict();
}

// Generated healthy runs (seeded noise of a few percent, no change): never
// a drop, never degraded.
TEST(DiagnoseVerdictTest, NoisyHealthyRunsAreNeverCalledDegraded) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    Window w = ShortWindow();
    uint64_t x = seed * 2654435761u;
    auto noisy = [&](std::vector<v1::JobTimelinePoint> points, double level, double noise) {
      for (auto& p : points) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const double u = static_cast<double>(x >> 11) / static_cast<double>(1ULL << 53);  // [0, 1)
        p.set_mean_busbw_gbs(level * (1 + noise * (2 * u - 1)));
      }
      return points;
    };
    const double level = 50 + seed * 5, noise = 0.01 * (1 + seed % 4);
    w.in.history = noisy(Buckets(w.t - 300'000'000, w.in.window_start_us, 0), level, noise);
    w.in.timeline = noisy(Buckets(w.in.window_start_us, w.t, 0), level, noise);
    const v1::DiagnoseJobResponse d = Diagnose(w.in);
    EXPECT_EQ(d.state(), "healthy") << "seed " << seed << ": " << d.verdict();
  }
}

TEST(DiagnoseVerdictTest, ALevelWithinTheBaselinesOwnSpreadIsHealthy) {
  Window w = ShortWindow();
  w.in.timeline = Buckets(w.in.window_start_us, w.t, 108.9);
  const v1::DiagnoseJobResponse d = Diagnose(w.in);
  EXPECT_EQ(d.state(), "healthy") << d.verdict();
  EXPECT_EQ(d.verdict().rfind("HEALTHY: AllReduce busbw 10", 0), 0u) << d.verdict();
}

TEST(DiagnoseVerdictTest, AJobWithNoCollectiveDataIsUnknownNeverHealthy) {
  Window w = ShortWindow();
  w.in.history.clear();
  w.in.last_record_us = 0;
  w.in.job.set_start_us(w.in.window_start_us + 1'000'000);
  v1::DiagnoseJobResponse d = Diagnose(w.in);
  EXPECT_EQ(d.state(), "unknown");
  EXPECT_EQ(d.verdict().rfind("UNKNOWN: no NCCL data since the job started at ", 0), 0u) << d.verdict();
  EXPECT_NE(d.verdict().find("rocefab agents"), std::string::npos) << d.verdict();
  // Data that stopped before the window: since when.
  w.in.history = Buckets(w.t - 300'000'000, w.t - 200'000'000, 100);
  w.in.last_record_us = w.t - 201'000'000;
  d = Diagnose(w.in);
  EXPECT_EQ(d.state(), "unknown");
  EXPECT_NE(d.verdict().find("(its last collective record)"), std::string::npos) << d.verdict();
}

TEST(DiagnoseVerdictTest, AForcedDrainOfTheJobsNicPortIsTheTopCauseWithWhoAndWhy) {
  Window w = ShortWindow();
  w.in.timeline.clear();
  v1::Anomaly stall = Make(1, "job_stalled", "4711", w.in.window_start_us + 5'000'000);
  stall.set_job("4711");
  // The storm on another rack is not on this job's paths; the drain is.
  w.in.anomalies = {stall, Make(2, "link_flap", "z1-rtsw03/Ethernet0", w.in.window_start_us)};
  v1::OperatorChange drain;
  drain.set_at_us(w.in.window_start_us + 3'000'000);
  drain.set_who("alice");
  drain.set_action("drain-forced");
  drain.set_target("z1-rtsw02/Ethernet0");  // faces z1-r02-h1/mlx5_0, a rank of the job
  drain.set_why("meant Ethernet8");
  drain.set_in_effect(true);
  v1::OperatorChange other_rack = drain;
  other_rack.set_target("z1-rtsw03/Ethernet8");
  other_rack.set_action("drain");
  other_rack.set_in_effect(true);
  w.in.changes = {drain, other_rack};
  const v1::DiagnoseJobResponse d = Diagnose(w.in);
  EXPECT_EQ(d.state(), "stalled");
  // One of its rack's uplinks drained: on its paths, a suspect, not certain.
  v1::OperatorChange uplink = drain;
  uplink.set_target("z1-rtsw01/Ethernet8");
  uplink.set_action("drain");
  w.in.changes.push_back(uplink);
  const v1::DiagnoseJobResponse with_uplink = Diagnose(w.in);
  ASSERT_EQ(with_uplink.findings_size(), 2);
  EXPECT_EQ(with_uplink.findings(0).entity(), "z1-rtsw02/Ethernet0");
  EXPECT_LE(with_uplink.findings(1).confidence(), 0.5);
  ASSERT_EQ(d.findings_size(), 1) << "the other rack's drain is not on its paths";
  EXPECT_EQ(d.findings(0).kind(), "operator_change");
  EXPECT_EQ(d.findings(0).entity(), "z1-rtsw02/Ethernet0");
  EXPECT_GT(d.findings(0).confidence(), 0.9);
  EXPECT_NE(d.findings(0).summary().find("drain-forced of z1-rtsw02/Ethernet0 by alice"), std::string::npos);
  EXPECT_NE(d.findings(0).summary().find("meant Ethernet8"), std::string::npos);
  EXPECT_EQ(d.playbook(), "playbooks/operator_change.md");
  EXPECT_NE(d.verdict().find("most likely cause: operator_change on z1-rtsw02/Ethernet0"), std::string::npos)
      << d.verdict();
}

TEST(DiagnoseVerdictTest, OnsetOnlyReportsACauseThatBeganBeforeTheWindowAsOngoing) {
  Window w = ShortWindow();
  w.in.history.resize(w.in.history.size() - 20);
  w.in.timeline = Buckets(w.in.window_start_us, w.t, 66.6);
  v1::Anomaly regression = Make(1, "busbw_regression", "4711", w.in.window_start_us - 16'000'000, v1::SEVERITY_WARNING);
  regression.set_job("4711");
  w.in.anomalies = {regression, Make(2, "pfc_storm", "z1-r02-h1/mlx5_0", w.in.window_start_us - 20'000'000)};
  w.in.onset_only = true;
  const v1::DiagnoseJobResponse d = Diagnose(w.in);
  ASSERT_EQ(d.findings_size(), 1);
  EXPECT_EQ(d.findings(0).kind(), "pfc_storm");
  EXPECT_NE(d.verdict().find("most likely cause: pfc_storm on z1-r02-h1/mlx5_0"), std::string::npos) << d.verdict();
  EXPECT_NE(d.verdict().find("ongoing since "), std::string::npos) << d.verdict();
  EXPECT_EQ(d.verdict().find("no fabric cause"), std::string::npos) << d.verdict();
}

// Three faults at once on one job's paths: every independent root cause
// comes before any consequence, even a weak-looking cause (a straggler that
// started late) before a strong-looking symptom (a link down explained by
// a flap) and before consequences nothing explains.
TEST(DiagnoseTest, WithSeveralFaultsEveryRootCauseRanksBeforeAnyConsequence) {
  const int64_t t = 1'800'000'000'000'000;
  DiagnoseInput in = TwoRackJobInput(t - 60'000'000, t + 60'000'000);
  v1::Anomaly straggler = Make(4, "straggler", "z1-r01-h1/gpu0", t + 30'000'000, v1::SEVERITY_WARNING);
  straggler.set_job("4711");
  straggler.set_magnitude(0.05);
  in.anomalies = {Make(1, "link_flap", "z1-rtsw01/Ethernet8", t),
                  Make(2, "link_down", "z1-rtsw01/Ethernet12", t, v1::SEVERITY_CRITICAL, 1),
                  Make(3, "pfc_storm", "z1-r02-h1/mlx5_0", t + 5'000'000),
                  straggler,
                  Make(5, "pfc_pause", "z1-rtsw02/Ethernet8", t, v1::SEVERITY_WARNING),  // unexplained
                  Make(6, "silent_loss", "z1-r01-h1/mlx5_0", t, v1::SEVERITY_WARNING, 1)};
  const v1::DiagnoseJobResponse d = Diagnose(in);
  ASSERT_EQ(d.findings_size(), 6);
  std::set<std::string> first_three;
  for (int i = 0; i < 3; ++i) first_three.insert(d.findings(i).kind());
  EXPECT_EQ(first_three, (std::set<std::string>{"link_flap", "pfc_storm", "straggler"}));
  EXPECT_EQ(d.findings(3).kind(), "pfc_pause") << "a consequence nothing explains, after every cause";
  for (int i = 4; i < 6; ++i) EXPECT_EQ(d.findings(i).role(), "symptom") << d.findings(i).kind();
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(d.findings(i).playbook().empty());
}

// A flap's first down and the flap are one fault on one link: a straggler
// that overlaps it is the second root cause, not third behind the down.
TEST(DiagnoseTest, ALinkDownOfAFlappingLinkIsTheFlapsSignNotASecondCause) {
  const int64_t t = 1'800'000'000'000'000;
  DiagnoseInput in = TwoRackJobInput(t - 2'000'000, t + 20'000'000);
  v1::Anomaly straggler = Make(3, "straggler", "z1-r01-h1/gpu0", t, v1::SEVERITY_WARNING);
  straggler.set_job("4711");
  straggler.set_magnitude(0.1);
  in.anomalies = {straggler, Make(1, "link_down", "z1-rtsw01/Ethernet8", t + 7'000'000),
                  Make(2, "link_flap", "z1-rtsw01/Ethernet8", t + 7'500'000)};
  const v1::DiagnoseJobResponse d = Diagnose(in);
  ASSERT_EQ(d.findings_size(), 3);
  EXPECT_EQ((std::set<std::string>{d.findings(0).kind(), d.findings(1).kind()}),
            (std::set<std::string>{"link_flap", "straggler"}));
  EXPECT_EQ(d.findings(2).kind(), "link_down");
  EXPECT_EQ(d.findings(2).role(), "symptom");
  // A down on another link is its own cause.
  in.anomalies[1].set_entity("z1-rtsw01/Ethernet12");
  const v1::DiagnoseJobResponse other = Diagnose(in);
  for (const auto& f : other.findings()) EXPECT_EQ(f.role(), "cause") << f.kind();
}

// With no degraded interval, the window is the trouble asked about: what
// began in it ranks before an equal finding that was there already.
TEST(DiagnoseTest, WithNoDegradationWhatBeganInTheWindowRanksBeforeAnOldEqualFinding) {
  const int64_t t = 1'800'000'000'000'000;
  DiagnoseInput in = TwoRackJobInput(t - 2'000'000, t + 20'000'000);
  in.onset_only = true;
  v1::Anomaly old_one = Make(1, "ecmp_imbalance", "z1-rtsw02", t - 30'000'000, v1::SEVERITY_WARNING);
  old_one.set_magnitude(0.9);
  v1::Anomaly new_one = Make(2, "ecmp_imbalance", "z1-rtsw01", t + 500'000, v1::SEVERITY_WARNING);
  new_one.set_magnitude(0.3);
  in.anomalies = {old_one, new_one};
  const v1::DiagnoseJobResponse d = Diagnose(in);
  ASSERT_EQ(d.findings_size(), 2) << "the old one still lasts, so it is still listed";
  EXPECT_EQ(d.findings(0).entity(), "z1-rtsw01");
  EXPECT_EQ(d.findings(1).entity(), "z1-rtsw02");
  // An old condition of a stronger kind still outranks a new weak one.
  in.anomalies[0].set_kind("pfc_storm");
  EXPECT_EQ(Diagnose(in).findings(0).entity(), "z1-rtsw02");
}

// A collision on a switch that began while its link toward a CTSW was
// flapping is the flap's doing (a link down and back moves load), and
// ranks after a collision on another switch, which is a cause of its own.
// One there before the flap began stays a cause.
TEST(DiagnoseTest, AnImbalanceThatBeganWhileItsSwitchsLinkFlappedIsTheFlapsSign) {
  const int64_t t = 1'800'000'000'000'000;
  DiagnoseInput in = TwoRackJobInput(t - 2'000'000, t + 15'000'000);
  in.onset_only = true;
  v1::Anomaly flap = Make(1, "link_flap", "z1-rtsw01/Ethernet8", t);
  v1::Anomaly moved = Make(2, "ecmp_imbalance", "z1-rtsw01", t + 1'500'000, v1::SEVERITY_WARNING);
  v1::Anomaly skew = Make(3, "ecmp_imbalance", "z1-rtsw02", t + 2'500'000, v1::SEVERITY_WARNING);
  in.anomalies = {flap, moved, skew};
  const v1::DiagnoseJobResponse d = Diagnose(in);
  ASSERT_EQ(d.findings_size(), 3);
  EXPECT_EQ(d.findings(0).kind(), "link_flap");
  EXPECT_EQ(d.findings(1).entity(), "z1-rtsw02");
  EXPECT_EQ(d.findings(1).role(), "cause");
  EXPECT_EQ(d.findings(2).entity(), "z1-rtsw01");
  EXPECT_EQ(d.findings(2).role(), "symptom");
  EXPECT_NE(d.findings(2).summary().find("began while its link z1-rtsw01/Ethernet8 was flapping"), std::string::npos)
      << d.findings(2).summary();
  // Before the flap, the same collision is the hash's own.
  in.anomalies[1].set_start_us(t - 1'000'000);
  const v1::DiagnoseJobResponse before = Diagnose(in);
  for (const auto& f : before.findings())
    if (f.kind() == "ecmp_imbalance") EXPECT_EQ(f.role(), "cause") << f.entity();
  // A host's link that flaps moves no load between a switch's uplinks.
  in.anomalies[1].set_start_us(t + 1'500'000);
  in.anomalies[0].set_entity("z1-r01-h1/mlx5_0");
  const v1::DiagnoseJobResponse host_link = Diagnose(in);
  ASSERT_EQ(host_link.findings_size(), 3);
  for (const auto& f : host_link.findings())
    if (f.kind() == "ecmp_imbalance") EXPECT_EQ(f.role(), "cause") << f.entity();
}

// A condition there before the window that cleared inside it and came back
// did not begin in the window, however its second stretch is stamped: a
// collision on a switch whose link went down for two seconds is the old
// collision, not news beside a fault that began there.
TEST(DiagnoseTest, OnsetOnlyTakesAConditionThatClearedAndCameBackAsTheOldOne) {
  const int64_t t = 1'800'000'000'000'000;
  DiagnoseInput in = TwoRackJobInput(t - 2'000'000, t + 15'000'000);
  in.onset_only = true;
  v1::Anomaly before = Make(1, "ecmp_imbalance", "z1-rtsw02", t - 30'000'000, v1::SEVERITY_WARNING);
  before.set_end_us(t + 500'000);
  v1::Anomaly again = Make(2, "ecmp_imbalance", "z1-rtsw02", t + 2'500'000, v1::SEVERITY_WARNING);
  again.set_end_us(t + 8'000'000);
  v1::Anomaly fault = Make(3, "ecmp_imbalance", "z1-rtsw01", t + 3'500'000, v1::SEVERITY_WARNING);
  fault.set_end_us(t + 8'000'000);
  in.anomalies = {before, again, fault};
  const v1::DiagnoseJobResponse d = Diagnose(in);
  ASSERT_EQ(d.findings_size(), 1);
  EXPECT_EQ(d.findings(0).entity(), "z1-rtsw01");
  // Its second stretch alone began in the window, and is listed, first.
  in.anomalies = {again, fault};
  const v1::DiagnoseJobResponse alone = Diagnose(in);
  ASSERT_EQ(alone.findings_size(), 2);
  EXPECT_EQ(alone.findings(0).entity(), "z1-rtsw02");
  // Come back to last, it is the old condition, ongoing.
  in.anomalies = {before, again, fault};
  in.anomalies[1].set_end_us(0);
  const v1::DiagnoseJobResponse lasting = Diagnose(in);
  ASSERT_EQ(lasting.findings_size(), 2);
  for (const auto& f : lasting.findings())
    if (f.entity() == "z1-rtsw02") EXPECT_EQ(f.start_us(), t - 30'000'000) << "from its first start";
}

// The job has been slow since before the window (another fault): two
// equally likely collisions overlap the slowdown, one there all along, one
// that began in the window. The window is the question: the new one first.
TEST(DiagnoseTest, OnAJobSlowSinceBeforeTheWindowWhatBeganInItRanksBeforeAnOldEqualFinding) {
  const int64_t t = 1'800'000'000'000'000;
  DiagnoseInput in = TwoRackJobInput(t - 2'000'000, t + 15'000'000);
  in.onset_only = true;
  v1::Anomaly regression = Make(1, "busbw_regression", "4711", t - 20'000'000, v1::SEVERITY_WARNING);
  regression.set_job("4711");
  v1::Anomaly old_one = Make(2, "ecmp_imbalance", "z1-rtsw01", t - 60'000'000, v1::SEVERITY_INFO);
  v1::Anomaly new_one = Make(3, "ecmp_imbalance", "z1-rtsw02", t + 500'000, v1::SEVERITY_INFO);
  in.anomalies = {regression, old_one, new_one};
  const v1::DiagnoseJobResponse d = Diagnose(in);
  ASSERT_GE(d.degraded_size(), 1);
  ASSERT_EQ(d.findings_size(), 2);
  EXPECT_DOUBLE_EQ(d.findings(0).confidence(), d.findings(1).confidence());
  EXPECT_EQ(d.findings(0).entity(), "z1-rtsw02");
}

// A job slowed by one cause, then slowed further by a second: the second
// finding began at the further drop, an onset of its own, and is judged
// against it as the first is against the regression's. Without the drop
// the older finding, aligned with the regression's onset, would lead.
TEST(DiagnoseTest, ACauseThatBeganAtAFurtherDropIsTimedByThatDrop) {
  const int64_t t = 1'800'000'000'000'000;
  v1::Anomaly regression = Make(1, "busbw_regression", "4711", t - 20'000'000, v1::SEVERITY_WARNING);
  regression.set_job("4711");
  v1::Anomaly first = Make(2, "ecmp_imbalance", "z1-rtsw01", t - 20'500'000, v1::SEVERITY_INFO);
  first.set_magnitude(0.4);
  v1::Anomaly second = Make(3, "ecmp_imbalance", "z1-rtsw02", t + 500'000, v1::SEVERITY_INFO);
  second.set_magnitude(1.0);
  auto diagnose = [&](bool fell_again) {
    DiagnoseInput in = TwoRackJobInput(t - 2'000'000, t + 15'000'000);
    in.onset_only = true;
    v1::Anomaly r = regression;
    if (fell_again) {
      v1::Evidence* step = r.add_evidence();
      step->set_entity("4711");
      step->set_counter("busbw_step");
      step->set_total(80);
      step->set_peak_rate(60);
      step->set_at_us(t);
    }
    in.anomalies = {r, first, second};
    return Diagnose(in);
  };
  const v1::DiagnoseJobResponse once = diagnose(false);
  ASSERT_EQ(once.findings_size(), 2);
  EXPECT_EQ(once.findings(0).entity(), "z1-rtsw01") << "control: the older cause, timed by the only onset";
  ASSERT_EQ(once.degraded_size(), 1);

  const v1::DiagnoseJobResponse twice = diagnose(true);
  ASSERT_EQ(twice.degraded_size(), 2);
  EXPECT_EQ(twice.degraded(0).kind(), "busbw_regression");
  EXPECT_EQ(twice.degraded(0).start_us(), t - 20'000'000);
  EXPECT_EQ(twice.degraded(0).end_us(), t);
  EXPECT_EQ(twice.degraded(1).kind(), "busbw_further_drop");
  EXPECT_EQ(twice.degraded(1).start_us(), t);
  ASSERT_EQ(twice.findings_size(), 2);
  EXPECT_EQ(twice.findings(0).entity(), "z1-rtsw02") << "the stronger cause, timed by the further drop";
  EXPECT_NE(twice.verdict().find("since " + FormatUtcTimeOfDay(t - 20'000'000)), std::string::npos) << twice.verdict();
  EXPECT_NE(twice.verdict().find("worse since " + FormatUtcTimeOfDay(t)), std::string::npos) << twice.verdict();
}

// A CTSW's threshold drops named by one port, then by the switch as more
// of its ports dropped, are one fault: with a flap on the job's paths too,
// the two faults are the first two findings.
TEST(DiagnoseTest, ASwitchsFaultNamedByAPortAndByTheSwitchIsOneFault) {
  const int64_t t = 1'800'000'000'000'000;
  DiagnoseInput in = TwoRackJobInput(t - 2'000'000, t + 15'000'000);
  in.onset_only = true;
  in.anomalies = {Make(1, "buffer_threshold_drops", "z1-ctsw01/Ethernet0", t - 20'000'000),
                  Make(2, "buffer_threshold_drops", "z1-ctsw01", t + 1'000'000),
                  Make(3, "link_flap", "z1-rtsw01/Ethernet8", t + 500'000, v1::SEVERITY_CRITICAL)};
  in.anomalies[2].set_magnitude(0.2);
  const v1::DiagnoseJobResponse d = Diagnose(in);
  ASSERT_EQ(d.findings_size(), 3);
  std::set<std::string> first_two = {d.findings(0).entity(), d.findings(1).entity()};
  EXPECT_EQ(first_two, (std::set<std::string>{"z1-ctsw01", "z1-rtsw01/Ethernet8"}));
  EXPECT_EQ(d.findings(2).entity(), "z1-ctsw01/Ethernet0");
  EXPECT_EQ(d.findings(2).role(), "symptom");
  EXPECT_NE(d.findings(2).summary().find("part of the switch-wide buffer_threshold_drops on z1-ctsw01"),
            std::string::npos)
      << d.findings(2).summary();
}

// A finding that cleared and came back on the same entity is one fault,
// listed once from its first start to its last end.
TEST(DiagnoseTest, AFindingThatClearedAndCameBackIsListedOnce) {
  const int64_t t = 1'800'000'000'000'000;
  DiagnoseInput in = TwoRackJobInput(t - 2'000'000, t + 15'000'000);
  in.anomalies = {Make(1, "buffer_threshold_drops", "z1-ctsw01", t),
                  Make(2, "buffer_threshold_drops", "z1-ctsw01", t + 8'000'000),
                  Make(3, "link_flap", "z1-rtsw01/Ethernet8", t + 500'000, v1::SEVERITY_CRITICAL)};
  in.anomalies[0].set_end_us(t + 2'000'000);
  in.anomalies[2].set_magnitude(0.2);
  const v1::DiagnoseJobResponse d = Diagnose(in);
  ASSERT_EQ(d.findings_size(), 2);
  int drops = 0;
  for (const auto& f : d.findings())
    if (f.kind() == "buffer_threshold_drops") {
      ++drops;
      EXPECT_EQ(f.start_us(), t);
      EXPECT_EQ(f.end_us(), 0) << "the second stretch lasts";
    }
  EXPECT_EQ(drops, 1);
}

TEST(DiagnoseTest, HealthyJobWithNothingOnItsPaths) {
  DiagnoseInput in;
  in.job = TwoRackJob();
  auto topo = Topology::FromYaml(kDiagnosisTopology, "test");
  ASSERT_TRUE(topo.ok());
  in.footprint = JobFootprint(topo->get(), in.job, {});
  in.anomalies = {Make(1, "link_flap", "z1-rtsw03/Ethernet0", 0)};
  v1::JobTimelinePoint p;
  p.set_op("AllReduce");
  p.set_mean_busbw_gbs(144.3);
  p.set_records(64);
  in.timeline = {p};
  const auto d = Diagnose(in);
  EXPECT_EQ(d.state(), "healthy");
  EXPECT_EQ(d.findings_size(), 0);
  EXPECT_NE(d.verdict().find("144.3"), std::string::npos);
  EXPECT_NE(d.verdict().find("no baseline before the window"), std::string::npos) << d.verdict();
}

}  // namespace
}  // namespace rocefab::collector
