#include "lab/score.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "collector/store.h"
#include "common/topology.h"
#include "lab/topology_gen.h"
#include "tests/support/test_support.h"

namespace rocefab::lab {
namespace {

constexpr int64_t kStart = 1'800'000'000'000'000;
constexpr int64_t kSecond = 1'000'000;

const char* kTwoRacks = rocefab::testing::kTwoRacksOneSpine;

nlohmann::json Fault(const std::string& kind, const std::string& target, double start_s) {
  const int64_t at = kStart + static_cast<int64_t>(start_s * 1e6);
  return {{"kind", kind},          {"target", target},     {"start_s", start_s},
          {"end_s", nullptr},      {"start_unix_us", at},  {"end_unix_us", nullptr},
          {"happened", true},      {"observable", true},   {"observable_from_unix_us", at},
          {"victim", ""},          {"observed_until_s", 60.0}};
}

v1::Anomaly Anomaly(uint64_t id, const std::string& kind, const std::string& entity, double start_s,
                    double detected_s, v1::Severity severity) {
  v1::Anomaly a;
  a.set_id(id);
  a.set_kind(kind);
  a.set_entity(entity);
  a.set_severity(severity);
  a.set_start_us(kStart + static_cast<int64_t>(start_s * 1e6));
  a.set_detected_us(kStart + static_cast<int64_t>(detected_s * 1e6));
  a.set_updated_us(a.detected_us());
  a.set_magnitude(0.5);
  return a;
}

// Registers job `id` with one rank on mlx5_0 of each host.
void StartJob(collector::Store& store, const std::string& id, const std::vector<std::string>& hosts) {
  v1::Job job;
  job.set_id(id);
  job.set_start_us(kStart);
  for (uint32_t r = 0; r < hosts.size(); ++r) {
    auto* p = job.add_ranks();
    p->set_rank(r);
    p->set_host(hosts[r]);
    p->set_nic("mlx5_0");
  }
  ASSERT_TRUE(store.jobs().Start(job).ok());
}

// The top-1 diagnosis is the one an operator would have had at the
// horizon: a fault injected just after it, whose anomaly's start is stamped
// at the poll before (inside the horizon) but which was raised after it,
// is not in that diagnosis, and not an overlapping fault either.
TEST(ScoreTest, TopOneIsJudgedOnWhatWasRaisedByTheHorizon) {
  testing::TempDir run;
  testing::WriteFile(run / "topology.yaml", kTwoRacks);
  nlohmann::json truth = {{"scenario", "horizon"}, {"start_unix_us", kStart}, {"duration_s", 60.0},
                          {"conditions", nlohmann::json::array()}, {"jobs", nlohmann::json::array()}};
  // A straggler at 10 s; a NIC of the job goes down at 25 s, the
  // straggler's horizon (15 s on).
  truth["faults"] = {Fault("straggler", "z1-r01-h1/gpu0", 10), Fault("nic_down", "z1-r02-h1/mlx5_0", 25)};
  testing::WriteFile(run / "truth.json", truth.dump());
  {
    auto store = collector::Store::Open({.path = run / "collector.db", .relaxed_durability = true});
    ASSERT_TRUE(store.ok()) << store.status();
    StartJob(**store, "4711", {"z1-r01-h1", "z1-r02-h1"});
    v1::Anomaly straggler = Anomaly(1, "straggler", "z1-r01-h1/gpu0", 10.5, 11, v1::SEVERITY_WARNING);
    straggler.set_job("4711");
    // The down link, read at 25.9 s: its start is the poll before, 24.9 s.
    const v1::Anomaly down = Anomaly(2, "link_down", "z1-r02-h1/mlx5_0", 24.9, 25.9, v1::SEVERITY_CRITICAL);
    const std::vector<v1::Anomaly> anomalies = {straggler, down};
    ASSERT_TRUE((*store)->anomalies().Write(anomalies).ok());
  }
  auto score = ScoreRun(run.path());
  ASSERT_TRUE(score.ok()) << score.status();
  ASSERT_EQ(score->faults.size(), 2u);
  EXPECT_EQ(score->faults[0].kind, "straggler");
  EXPECT_TRUE(score->faults[0].detected);
  EXPECT_TRUE(score->faults[0].top1) << "first: " << score->faults[0].top1_kind << " " << score->faults[0].top1_entity;
  EXPECT_TRUE(score->faults[1].top1) << score->faults[1].top1_kind;
  EXPECT_TRUE(score->false_positives.empty());
}

// Two lossy-link faults on the two ends of one link, the second laid over
// the first while its finding is open: nothing new can be raised, and the
// open finding names the link with the right playbook, so the second is
// found, with no latency. A finding of another kind open on that link
// (here a degraded link) does not stand for a lossy one.
TEST(ScoreTest, AConditionAlreadyNamedWhenItsFaultBeganIsFoundWithoutALatency) {
  for (const std::string open_kind : {"link_errors", "link_degraded"}) {
    testing::TempDir run;
    testing::WriteFile(run / "topology.yaml", kTwoRacks);
    nlohmann::json truth = {{"scenario", "twice"}, {"start_unix_us", kStart}, {"duration_s", 60.0},
                            {"conditions", nlohmann::json::array()}, {"jobs", nlohmann::json::array()}};
    truth["faults"] = {Fault(open_kind == "link_errors" ? "lossy_link" : "degraded_link", "z1-rtsw01/Ethernet8", 10),
                       Fault("lossy_link", "z1-ctsw01/Ethernet0", 30)};
    testing::WriteFile(run / "truth.json", truth.dump());
    {
      auto store = collector::Store::Open({.path = run / "collector.db", .relaxed_durability = true});
      ASSERT_TRUE(store.ok()) << store.status();
      const std::vector<v1::Anomaly> anomalies = {
          Anomaly(1, open_kind, "z1-rtsw01/Ethernet8", 10, 11, v1::SEVERITY_CRITICAL)};
      ASSERT_TRUE((*store)->anomalies().Write(anomalies).ok());
    }
    auto score = ScoreRun(run.path());
    ASSERT_TRUE(score.ok()) << score.status();
    ASSERT_EQ(score->faults.size(), 2u);
    EXPECT_TRUE(score->faults[0].detected);
    EXPECT_FALSE(score->faults[0].already_named);
    EXPECT_DOUBLE_EQ(score->faults[0].latency_s, 1.0);
    const FaultScore& second = score->faults[1];
    EXPECT_EQ(second.detected, open_kind == "link_errors") << open_kind;
    EXPECT_EQ(second.already_named, open_kind == "link_errors") << open_kind;
    EXPECT_LT(second.latency_s, 0) << open_kind;
    const nlohmann::json summary = Summarize({*score});
    EXPECT_EQ(summary["found_already_named"].get<int>(), open_kind == "link_errors" ? 1 : 0);
    EXPECT_DOUBLE_EQ(summary["detection_latency_s"]["p95"].get<double>(), 1.0);  // the first's only
  }
}

// The lab itself fell behind the wall clock for 3 s (truth's "lab_late"):
// a job whose last collective came just before that, or in the poll after
// it ended, stalled on the lab, not on the fabric. One whose last came well
// before it, or well after, is still a finding nothing explains.
TEST(ScoreTest, AJobStalledWhileTheLabRanLateIsTheLabsDoing) {
  testing::TempDir run;
  testing::WriteFile(run / "topology.yaml", kTwoRacks);
  nlohmann::json truth = {{"scenario", "late"}, {"start_unix_us", kStart}, {"duration_s", 60.0},
                          {"faults", nlohmann::json::array()}, {"jobs", nlohmann::json::array()}};
  truth["conditions"] = {{{"kind", "lab_late"},
                          {"target", ""},
                          {"start_unix_us", kStart + 40 * kSecond},
                          {"end_unix_us", kStart + 43 * kSecond}}};
  testing::WriteFile(run / "truth.json", truth.dump());
  {
    auto store = collector::Store::Open({.path = run / "collector.db", .relaxed_durability = true});
    ASSERT_TRUE(store.ok()) << store.status();
    v1::Anomaly on_the_lab = Anomaly(1, "job_stalled", "4711", 39.6, 45, v1::SEVERITY_CRITICAL);
    on_the_lab.set_job("4711");
    v1::Anomaly before = Anomaly(2, "job_stalled", "4712", 30, 35, v1::SEVERITY_CRITICAL);
    before.set_job("4712");
    v1::Anomaly just_after = Anomaly(3, "job_stalled", "4713", 43.5, 49, v1::SEVERITY_CRITICAL);
    just_after.set_job("4713");
    v1::Anomaly after = Anomaly(4, "job_stalled", "4714", 44.5, 50, v1::SEVERITY_CRITICAL);
    after.set_job("4714");
    const std::vector<v1::Anomaly> anomalies = {on_the_lab, before, just_after, after};
    ASSERT_TRUE((*store)->anomalies().Write(anomalies).ok());
  }
  auto score = ScoreRun(run.path());
  ASSERT_TRUE(score.ok()) << score.status();
  EXPECT_EQ(score->false_positives, (std::vector<std::string>{"job_stalled 4712", "job_stalled 4714"}));
  EXPECT_DOUBLE_EQ(score->lab_late_s, 3.0);
}

nlohmann::json Condition(const std::string& kind, const std::string& target, double from_s, double to_s) {
  return {{"kind", kind},
          {"target", target},
          {"start_unix_us", kStart + static_cast<int64_t>(from_s * 1e6)},
          {"end_unix_us", kStart + static_cast<int64_t>(to_s * 1e6)}};
}

// Slips each shorter than a poll interval ("lab_slip") add up: a stall
// called on a silence the lab lengthened by a second or more in all is the
// lab's; one it lengthened by less, or whose slips came outside the
// silence, is still a finding nothing explains. A fault's latency holds
// every slip from the run's start to its detection, before its onset too.
TEST(ScoreTest, SlipsThatAddUpToAPollIntervalInAStallsSilenceAreTheLabs) {
  testing::TempDir run;
  testing::WriteFile(run / "topology.yaml", kTwoRacks);
  nlohmann::json truth = {{"scenario", "slips"}, {"start_unix_us", kStart}, {"duration_s", 60.0},
                          {"faults", {Fault("lossy_link", "z1-rtsw01/Ethernet8", 50)}},
                          {"jobs", nlohmann::json::array()}};
  // 0.4 s at 11 s, 12 s and 13 s: 1.2 s in all between 11 and 14 s.
  // 0.4 s at 31 s: alone.
  truth["conditions"] = {Condition("lab_slip", "", 11, 11.4), Condition("lab_slip", "", 12, 12.4),
                         Condition("lab_slip", "", 13, 13.4), Condition("lab_slip", "", 31, 31.4)};
  testing::WriteFile(run / "truth.json", truth.dump());
  {
    auto store = collector::Store::Open({.path = run / "collector.db", .relaxed_durability = true});
    ASSERT_TRUE(store.ok()) << store.status();
    // Silent from 10.5 s, called at 15.5 s: 1.2 s of it the lab's.
    v1::Anomaly slipped = Anomaly(1, "job_stalled", "4711", 10.5, 15.5, v1::SEVERITY_CRITICAL);
    // Silent from 11.9 s: 0.8 s of it the lab's.
    v1::Anomaly partly = Anomaly(2, "job_stalled", "4712", 11.9, 16.9, v1::SEVERITY_CRITICAL);
    // Silent from 30 s: 0.4 s.
    v1::Anomaly alone = Anomaly(3, "job_stalled", "4713", 30, 35, v1::SEVERITY_CRITICAL);
    // Silent from 20 s, after the slips.
    v1::Anomaly later = Anomaly(4, "job_stalled", "4714", 20, 25, v1::SEVERITY_CRITICAL);
    // Each stall over 6 s after it began, long before the fault.
    for (v1::Anomaly* stall : {&slipped, &partly, &alone, &later}) stall->set_end_us(stall->start_us() + 6'000'000);
    // The fault, found 2 s after its onset at 50 s, after every slip.
    const v1::Anomaly found = Anomaly(5, "link_errors", "z1-rtsw01/Ethernet8", 50, 52, v1::SEVERITY_CRITICAL);
    const std::vector<v1::Anomaly> anomalies = {slipped, partly, alone, later, found};
    ASSERT_TRUE((*store)->anomalies().Write(anomalies).ok());
  }
  auto score = ScoreRun(run.path());
  ASSERT_TRUE(score.ok()) << score.status();
  std::vector<std::string> unexplained = score->false_positives;
  std::sort(unexplained.begin(), unexplained.end());
  EXPECT_EQ(unexplained, (std::vector<std::string>{"job_stalled 4712", "job_stalled 4713", "job_stalled 4714"}));
  EXPECT_DOUBLE_EQ(score->lab_late_s, 0.0) << "slips are not counted as the lab running late";
  ASSERT_EQ(score->faults.size(), 1u);
  EXPECT_TRUE(score->faults[0].detected);
  EXPECT_NEAR(score->faults[0].lab_slip_s, 1.6, 1e-6) << "every slip from the run's start to its detection";
}

// The false positives of a run with no fault and no job, whose truth has
// `conditions` and whose store has `anomalies`.
std::vector<std::string> FalsePositivesUnder(const std::vector<nlohmann::json>& conditions,
                                             const std::vector<v1::Anomaly>& anomalies) {
  testing::TempDir run;
  testing::WriteFile(run / "topology.yaml", kTwoRacks);
  nlohmann::json truth = {{"scenario", "conditions"}, {"start_unix_us", kStart}, {"duration_s", 60.0},
                          {"faults", nlohmann::json::array()}, {"jobs", nlohmann::json::array()}};
  truth["conditions"] = conditions;
  testing::WriteFile(run / "truth.json", truth.dump());
  {
    auto store = collector::Store::Open({.path = run / "collector.db", .relaxed_durability = true});
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) return {"(no store)"};
    EXPECT_TRUE((*store)->anomalies().Write(anomalies).ok());
  }
  auto score = ScoreRun(run.path());
  EXPECT_TRUE(score.ok()) << score.status();
  return score.ok() ? score->false_positives : std::vector<std::string>{"(no score)"};
}

// The model offered a switch's uplinks more than they carry from 10 s to
// 30 s (truth's "oversubscription"): the finding that says so then is
// explained; one on a switch the model never over-offered is not.
TEST(ScoreTest, OversubscriptionIsExplainedOnlyWhereAndWhenTheModelOverOffered) {
  v1::Anomaly there = Anomaly(1, "oversubscription", "z1-rtsw01", 12, 13, v1::SEVERITY_INFO);
  there.set_end_us(kStart + 31 * kSecond);
  const v1::Anomaly elsewhere = Anomaly(2, "oversubscription", "z1-rtsw02", 12, 13, v1::SEVERITY_INFO);
  const v1::Anomaly later = Anomaly(3, "oversubscription", "z1-rtsw01", 45, 46, v1::SEVERITY_INFO);
  EXPECT_EQ(FalsePositivesUnder({Condition("oversubscription", "z1-rtsw01", 10, 30)}, {there, elsewhere, later}),
            (std::vector<std::string>{"oversubscription z1-rtsw02", "oversubscription z1-rtsw01"}));
}

// Pauses a switch's over-offered uplinks made, raised and closed before
// the finding that names the cause (a lab running late names it late), are
// that congestion's, as they would be a fault's; loss is not what
// congestion makes on a lossless fabric, and pauses well after it ended are
// nobody's.
TEST(ScoreTest, PausesWhileTheModelOverOfferedAreExplainedByIt) {
  v1::Anomaly paused = Anomaly(1, "pfc_pause", "host01/mlx5_0", 12, 13, v1::SEVERITY_WARNING);
  paused.set_end_us(kStart + 14 * kSecond);
  const v1::Anomaly full = Anomaly(2, "buffer_high", "z1-rtsw01/Ethernet0", 11, 12, v1::SEVERITY_INFO);
  const v1::Anomaly lost = Anomaly(3, "silent_loss", "host02/mlx5_0", 12, 13, v1::SEVERITY_WARNING);
  const v1::Anomaly collided = Anomaly(4, "pfc_pause", "host03/mlx5_0", 41, 42, v1::SEVERITY_WARNING);
  const v1::Anomaly after = Anomaly(5, "pfc_pause", "host04/mlx5_0", 55, 56, v1::SEVERITY_WARNING);
  EXPECT_EQ(FalsePositivesUnder({Condition("oversubscription", "z1-rtsw01", 10, 30),
                                 Condition("ecmp_collision", "z1-rtsw02", 40, 42)},
                                {paused, full, lost, collided, after}),
            (std::vector<std::string>{"silent_loss host02/mlx5_0", "pfc_pause host04/mlx5_0"}));
}

// A queue's drop threshold on a CTSW acts only on the traffic through it.
// Two jobs' paths cross the CTSW, each on its own racks' ports; the
// threshold drops on the first job's port. The second job, whose flows the
// lab never saw the fault act on (truth's touched_jobs), is right to be
// diagnosed without it; one the lab says it touched must still have it
// first, and so must every job whose paths cross the target where the
// truth does not say which jobs it touched.
TEST(ScoreTest, AFaultOnTrafficIsJudgedOnTheJobsItTouched) {
  // Four racks of one host with one NIC, their RTSWs joined by one CTSW
  // (z1-ctsw01/Ethernet0 faces z1-rtsw01, Ethernet4 z1-rtsw02, ...).
  auto four_racks = GenerateTopology({.racks_per_zone = 4, .hosts_per_rack = 1, .nics_per_host = 1, .ctsw_per_zone = 1});
  ASSERT_TRUE(four_racks.ok()) << four_racks.status();
  std::ostringstream four_racks_yaml;
  WriteTopologyYaml(*four_racks, four_racks_yaml);
  const std::vector<std::pair<std::string, std::optional<std::vector<std::string>>>> cases = {
      {"only the first", std::vector<std::string>{"4711"}},
      {"both", std::vector<std::string>{"4711", "4712"}},
      {"not said", std::nullopt}};
  for (const auto& [name, touched] : cases) {
    testing::TempDir run;
    testing::WriteFile(run / "topology.yaml", four_racks_yaml.str());
    nlohmann::json truth = {{"scenario", "threshold"}, {"start_unix_us", kStart}, {"duration_s", 60.0},
                            {"conditions", nlohmann::json::array()}, {"jobs", nlohmann::json::array()}};
    nlohmann::json fault = Fault("buffer_threshold", "z1-ctsw01", 10);
    if (touched) fault["touched_jobs"] = *touched;
    truth["faults"] = {fault};
    testing::WriteFile(run / "truth.json", truth.dump());
    {
      auto store = collector::Store::Open({.path = run / "collector.db", .relaxed_durability = true});
      ASSERT_TRUE(store.ok()) << store.status();
      StartJob(**store, "4711", {"z1-r01-h1", "z1-r02-h1"});
      StartJob(**store, "4712", {"z1-r03-h1", "z1-r04-h1"});
      const std::vector<v1::Anomaly> anomalies = {
          Anomaly(1, "buffer_threshold_drops", "z1-ctsw01/Ethernet0", 10, 11, v1::SEVERITY_WARNING)};
      ASSERT_TRUE((*store)->anomalies().Write(anomalies).ok());
    }
    auto score = ScoreRun(run.path());
    ASSERT_TRUE(score.ok()) << score.status();
    ASSERT_EQ(score->faults.size(), 1u);
    const FaultScore& f = score->faults[0];
    EXPECT_TRUE(f.detected) << name;
    const std::vector<std::string> judged = touched ? *touched : std::vector<std::string>{"4711", "4712"};
    std::vector<std::string> jobs = f.jobs;
    std::sort(jobs.begin(), jobs.end());
    EXPECT_EQ(jobs, judged) << name;
    EXPECT_EQ(f.top1, judged.size() == 1) << name << ": the second job's paths do not cross Ethernet0";
  }
}

// A straggler that could first show 3 s before the run's end, on a job
// another fault had stalled until then, and named 1.1 s after the end from
// what the agents flushed as they stopped: found inside the grace, and
// judged when it was named, as an operator asking then would have seen it.
// Named after the grace, it is not found at all.
TEST(ScoreTest, AFaultFirstNamedInTheGraceAfterItsEndIsJudgedWhenNamed) {
  for (const double detected_s : {59.5, 61.1, 71.0}) {
    testing::TempDir run;
    testing::WriteFile(run / "topology.yaml", kTwoRacks);
    nlohmann::json truth = {{"scenario", "late"}, {"start_unix_us", kStart}, {"duration_s", 60.0},
                            {"conditions", nlohmann::json::array()}, {"jobs", nlohmann::json::array()}};
    nlohmann::json fault = Fault("straggler", "z1-r01-h1/gpu0", 39);
    fault["observable_from_unix_us"] = kStart + 57 * kSecond;
    truth["faults"] = {fault};
    testing::WriteFile(run / "truth.json", truth.dump());
    {
      auto store = collector::Store::Open({.path = run / "collector.db", .relaxed_durability = true});
      ASSERT_TRUE(store.ok()) << store.status();
      StartJob(**store, "4711", {"z1-r01-h1", "z1-r02-h1"});
      v1::Anomaly straggler = Anomaly(1, "straggler", "z1-r01-h1/gpu0", 58.3, detected_s, v1::SEVERITY_WARNING);
      straggler.set_job("4711");
      const std::vector<v1::Anomaly> anomalies = {straggler};
      ASSERT_TRUE((*store)->anomalies().Write(anomalies).ok());
    }
    auto score = ScoreRun(run.path());
    ASSERT_TRUE(score.ok()) << score.status();
    ASSERT_EQ(score->faults.size(), 1u);
    const bool in_grace = detected_s <= 70;
    EXPECT_EQ(score->faults[0].detected, in_grace) << detected_s;
    EXPECT_EQ(score->faults[0].top1, in_grace) << detected_s << ": " << score->faults[0].top1_kind;
  }
}

}  // namespace
}  // namespace rocefab::lab
