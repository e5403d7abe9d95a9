// Tier 6: the lab end to end. rocefab-lab runs a small fabric for 30 s with
// the real collector, host agents and switch agents; a NIC starts a PFC
// storm at 8 s. The collector must have heard from every agent, and the
// pause counters it stored must have moved exactly on the ports where the
// model (run again here, deterministically) says the storm went: the storming
// NIC and the switch ports its pauses spread to, and nowhere before 8 s.
#include <sqlite3.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "collector/store.h"
#include "common/config_loader.h"
#include "common/topology.h"
#include "lab/fabric_model.h"
#include "lab/runner.h"
#include "lab/topology_gen.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

const std::string kScenario = testing::FixturesDir() + "/lab/storm_small.yaml";

// entity|counter -> increase of the PFC frame counters over the run up to
// `until_us`, from the collector's samples.
std::map<std::string, int64_t> Increases(const std::string& db_path, int64_t until_us) {
  collector::StoreOptions options;
  options.path = db_path;
  options.read_only = true;
  auto store = collector::Store::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  std::map<std::string, int64_t> out;
  if (!store.ok()) return out;
  // Per series: max(value) - min(value).
  std::map<std::tuple<std::string, std::string, int64_t, int64_t>, std::pair<uint64_t, uint64_t>> range;
  for (const char* counter : {"pfc_tx_pause_frames", "pfc_rx_pause_frames"}) {
    auto rows = (*store)->ReadSamples("", counter, 0, until_us);
    EXPECT_TRUE(rows.ok()) << rows.status();
    if (!rows.ok()) continue;
    for (const collector::SampleRow& r : *rows) {
      auto key = std::make_tuple(r.series.entity, r.series.counter, r.series.prio, r.series.queue);
      auto [it, fresh] = range.emplace(key, std::make_pair(r.value, r.value));
      it->second.first = std::min(it->second.first, r.value);
      it->second.second = std::max(it->second.second, r.value);
    }
  }
  for (const auto& [key, mm] : range)
    out[std::get<0>(key) + "|" + std::get<1>(key)] += static_cast<int64_t>(mm.second - mm.first);
  return out;
}

TEST(Lab, StormRunReachesTheCollectorExactlyWhereTheModelPutIt) {
  testing::TempDir dir;
  const std::string run_dir = dir / "run";
  std::string out, err;
  // The polled trees go to a tmpfs by default; name the place, so the test
  // can tell that nothing reading it is left behind.
  const std::string live_dir = "/dev/shm/rocefab-lab-test-" + std::to_string(getpid());
  const int code = testing::RunCommand({testing::BinDir() + "/rocefab-lab", "run", kScenario,
                                        "--run-dir", run_dir, "--live-dir", live_dir,
                                        "--timeline-every", "10", "--show",
                                        "job show 4711 --since 60s --bucket 5s", "--show",
                                        "job diagnose 4711 --window 1m", "--show", "pfc --nonzero --prio 3"},
                                       &out, &err);
  ASSERT_EQ(code, 0) << out << err;
  EXPECT_NE(out.find("FAULT  pfc_storm on z1-r02-h1/mlx5_1 starts"), std::string::npos) << out;
  EXPECT_NE(out.find("stopped all daemons cleanly"), std::string::npos) << out;
  // The operator's view of the job from NCCL's own records.
  EXPECT_NE(out.find("$ rocefab job show 4711"), std::string::npos) << out;
  EXPECT_NE(out.find("SLOWEST RANK"), std::string::npos) << out;
  EXPECT_NE(out.find("AllReduce"), std::string::npos) << out;
  // The diagnosis names the storming NIC and its playbook.
  EXPECT_NE(out.find("most likely cause: pfc_storm on z1-r02-h1/mlx5_1"), std::string::npos) << out;
  // The playbook is printed as a path the operator can open.
  const size_t at = out.find("playbook: /");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string playbook = out.substr(at + 10, out.find('\n', at) - at - 10);
  EXPECT_TRUE(playbook.ends_with("/playbooks/pfc_storm.md")) << playbook;
  EXPECT_TRUE(std::filesystem::exists(playbook)) << playbook;
  EXPECT_NE(out.find("verdict: DEGRADED since "), std::string::npos) << out;
  // pfcstat's view: the storming NIC pauses its peer on the lossless
  // priority; the other priorities are not shown.
  const size_t pfc = out.find("$ rocefab pfc --nonzero --prio 3");
  ASSERT_NE(pfc, std::string::npos) << out;
  const std::string pfc_view = out.substr(pfc);
  EXPECT_NE(pfc_view.find("PFC3 FRAMES/S"), std::string::npos) << pfc_view;
  EXPECT_EQ(pfc_view.find("PFC0"), std::string::npos) << pfc_view;
  EXPECT_NE(pfc_view.find("z1-r02-h1/mlx5_1"), std::string::npos) << pfc_view;
  // Scored against the truth: found, first, and soon.
  ASSERT_EQ(testing::RunCommand({testing::BinDir() + "/rocefab-lab", "score", "--run-dir", run_dir, "-o", "json"},
                                &out, &err),
            0)
      << err;
  auto score = nlohmann::json::parse(out);
  EXPECT_EQ(score["top1_accuracy"], 1.0) << out;
  EXPECT_EQ(score["recall"], 1.0) << out;
  EXPECT_EQ(score["false_positives"], 0) << out;
  EXPECT_LE(score["detection_latency_s"]["p95"].get<double>(), 2.0) << out;
  // Nothing of the run is left running, and the live trees were moved.
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string cmdline = testing::ReadFile(entry.path().string() + "/cmdline");
    EXPECT_EQ(cmdline.find(run_dir), std::string::npos) << "left running: " << entry.path();
    EXPECT_EQ(cmdline.find(live_dir), std::string::npos) << "left running: " << entry.path();
  }
  EXPECT_FALSE(std::filesystem::exists(live_dir));

  // The same scenario, model only: the exact set of ports that paused.
  auto scenario = lab::LoadScenario(kScenario);
  ASSERT_TRUE(scenario.ok());
  lab::TopologyParams params;
  params.racks_per_zone = 4;
  params.hosts_per_rack = 2;
  params.nics_per_host = 4;
  params.ctsw_per_zone = 2;
  auto topology = Topology::Build(*lab::GenerateTopology(params));
  ASSERT_TRUE(topology.ok());
  auto model = lab::FabricModel::Create(*topology, *scenario);
  ASSERT_TRUE(model.ok());
  while ((*model)->now_s() < scenario->duration_s()) (*model)->Step(scenario->tick_s(), nullptr);
  std::set<std::string> expected;
  for (const auto& port : (*model)->ports()) {
    const std::string entity = port.device + "/" + port.name;
    if (port.c.pfc_tx_frames >= 1) expected.insert(entity + "|pfc_tx_pause_frames");
    if (port.c.pfc_rx_frames >= 1) expected.insert(entity + "|pfc_rx_pause_frames");
  }
  ASSERT_TRUE(expected.count("z1-r02-h1/mlx5_1|pfc_tx_pause_frames"));

  const std::string db_path = run_dir + "/collector.db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2((run_dir + "/collector.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  // Every agent reported.
  std::set<std::string> agents;
  {
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, "SELECT agent_id, batches FROM agents", -1, &stmt, nullptr);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      agents.insert(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
      EXPECT_GE(sqlite3_column_int64(stmt, 1), 20);
    }
    sqlite3_finalize(stmt);
  }
  for (const auto& host : (*topology)->proto().hosts()) EXPECT_TRUE(agents.count(host.name())) << host.name();
  // Collective timings arrived from every rank's NCCL Inspector log, with
  // the job taken from the dump directory's name.
  {
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, "SELECT count(DISTINCT rank), count(*), min(busbw_gbs) FROM collectives "
                           "WHERE job = '4711' AND op = 'AllReduce'", -1, &stmt, nullptr);
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int64(stmt, 0), 32);  // 8 hosts x 4 GPUs
    EXPECT_GE(sqlite3_column_int64(stmt, 1), 32 * 20);
    EXPECT_GT(sqlite3_column_double(stmt, 2), 0);
    sqlite3_finalize(stmt);
  }
  for (const auto& sw : (*topology)->proto().switches()) EXPECT_TRUE(agents.count(sw.name())) << sw.name();

  // Nothing paused before the storm.
  auto truth = nlohmann::json::parse(testing::ReadFile(run_dir + "/truth.json"));
  const int64_t storm_start = truth["faults"][0]["start_unix_us"];
  EXPECT_EQ(truth["faults"][0]["target"], "z1-r02-h1/mlx5_1");
  for (const auto& [key, increase] :
       Increases(db_path, storm_start - 500'000 - 1))
    EXPECT_EQ(increase, 0) << key << " moved before the storm";

  // After: exactly the model's set moved.
  std::set<std::string> moved;
  for (const auto& [key, increase] : Increases(db_path, INT64_MAX))
    if (increase > 0) moved.insert(key);
  sqlite3_close(db);
  EXPECT_EQ(moved, expected);
  EXPECT_GE(moved.size(), 3u) << "the storm spread beyond the NIC and its switch port";

  // The trees the agents polled are left in the run directory, and both
  // agents' one-shot modes read them.
  ASSERT_EQ(testing::RunCommand({testing::BinDir() + "/rocefab-switchd", "--once", "-o", "json",
                                 "--state-dir", run_dir + "/switches", "--switch-name", "z1-rtsw02"},
                                &out, &err),
            0)
      << err;
  auto sw = nlohmann::json::parse(out);
  EXPECT_EQ(sw["switch"], "z1-rtsw02");
  EXPECT_EQ(sw["ports"].size(), (*topology)->PortsOf("z1-rtsw02").size());
  ASSERT_EQ(testing::RunCommand({testing::BinDir() + "/rocefab-hostd", "--once", "-o", "json",
                                 "--no-netlink", "--host-name", "z1-r02-h1", "--sysfs-root",
                                 run_dir + "/hosts/z1-r02-h1/sys", "--ethtool-dir",
                                 run_dir + "/hosts/z1-r02-h1/ethtool"},
                                &out, &err),
            0)
      << err;
  auto host = nlohmann::json::parse(out);
  EXPECT_EQ(host["nics"].size(), 4u);
  EXPECT_GT(host["nics"][1]["counters"]["pfc_tx_pause_frames"]["3"].get<int64_t>(), 0);
  EXPECT_EQ(host["health"]["parse_errors"], 0);
}

}  // namespace
}  // namespace rocefab

namespace rocefab {
namespace {

// The control path in the lab: the controller rolls out plain ECMP, then
// E-ECMP at 20 s; the job's bus bandwidth must rise and the rack uplinks'
// imbalance fall once the switch agents apply it.
// SONiC switches end to end: counters through COUNTERS_DB, the controller's
// rollouts through CONFIG_DB, the storm found as on the file backend.
TEST(Lab, SonicSwitchesCarryAStormAndTwoRolloutsThroughRedis) {
  testing::TempDir dir;
  const std::string run_dir = dir / "run";
  std::string out, err;
  ASSERT_EQ(testing::RunCommand({testing::BinDir() + "/rocefab-lab", "run",
                                 std::string(ROCEFAB_SOURCE_DIR) + "/lab/scenarios/sonic_storm.yaml",
                                 "--run-dir", run_dir, "--duration", "36", "--timeline-every", "2",
                                 "--live-dir", "/dev/shm/rocefab-lab-sonic-" + std::to_string(getpid()),
                                 "--show", "job diagnose 4741 --window 1m --limit 2"},
                                &out, &err),
            0)
      << out << err;
  EXPECT_NE(out.find("switches run SONiC's databases in redis-server"), std::string::npos) << out;
  // Both rollouts reached every switch's CONFIG_DB, and the model routes by it.
  size_t rollouts = 0;
  for (size_t at = 0; (at = out.find("CONFIG 12 switch(es) now route by applied config (from CONFIG_DB)", at)) !=
                      std::string::npos;
       ++at)
    ++rollouts;
  EXPECT_GE(rollouts, 2u) << out;
  EXPECT_NE(out.find("most likely cause: pfc_storm on z1-r03-h1/mlx5_3"), std::string::npos) << out;
  // The agents read SONiC's databases, and applied both generations there.
  const std::string log = testing::ReadFile(run_dir + "/logs/switchd-z1-rtsw01.log");
  EXPECT_NE(log.find("SONiC databases at unix:"), std::string::npos) << log;
  EXPECT_NE(log.find("generation 2 applied"), std::string::npos) << log;
}

TEST(Lab, EcmpToEecmpRaisesBusBandwidthWithTheRealControlPath) {
  testing::TempDir dir;
  const std::string run_dir = dir / "run";
  std::string out, err;
  ASSERT_EQ(testing::RunCommand({testing::BinDir() + "/rocefab-lab", "run",
                                 std::string(ROCEFAB_SOURCE_DIR) + "/lab/scenarios/ecmp_to_eecmp.yaml",
                                 "--run-dir", run_dir, "--duration", "30", "--timeline-every", "1",
                                 "--live-dir", "/dev/shm/rocefab-lab-eecmp-" + std::to_string(getpid())},
                                &out, &err),
            0)
      << out << err;
  EXPECT_NE(out.find("CONFIG 12 switch(es) now route by applied config (generation 2, scheme EECMP)"),
            std::string::npos)
      << out;
  double before = 0, after = 0, imbalance_before = 0, imbalance_after = 0;
  std::istringstream lines(testing::ReadFile(run_dir + "/timeline.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    const double t = j["t"];
    if (t > 5 && t < 19) {
      before = j["jobs"][0]["busbw_gbs"];
      imbalance_before = j["uplink_imbalance"];
    }
    if (t > 25) {
      after = j["jobs"][0]["busbw_gbs"];
      imbalance_after = j["uplink_imbalance"];
    }
  }
  std::cout << "[ecmp->eecmp] busbw " << before << " -> " << after << " GB/s, uplink imbalance "
            << imbalance_before << " -> " << imbalance_after << "\n";
  EXPECT_GT(after, before * 1.2);
  EXPECT_LT(imbalance_after, imbalance_before);
  // The controller's audit shows both rollouts.
  EXPECT_TRUE(std::filesystem::exists(run_dir + "/controller.db"));
}

}  // namespace
}  // namespace rocefab

namespace rocefab {
namespace {

// The scored suite, shortened: the clean run and one fault per tier (NIC
// link, RTSW-CTSW link loss, a GPU) at half their times, two at once.
TEST(Lab, ShortenedSuiteFindsEveryFaultFirstAndNothingElse) {
  testing::TempDir dir;
  std::string out, err;
  const int code = testing::RunCommand(
      {testing::BinDir() + "/rocefab-lab", "suite", "--scenarios",
       std::string(ROCEFAB_SOURCE_DIR) + "/lab/scenarios", "--out", dir / "suite", "--only", "clean", "--only",
       "link_flap", "--only", "lossy_link_ctsw", "--only", "straggler", "--time-scale", "0.5", "--parallel", "2",
       "-o", "json"},
      &out, &err);
  ASSERT_EQ(code, 0) << out << err;
  auto suite = nlohmann::json::parse(out);
  EXPECT_EQ(suite["runs"], 4) << out;
  EXPECT_EQ(suite["faults"], 3) << out;
  EXPECT_GE(suite["top1_accuracy"].get<double>(), 0.95) << out;
  EXPECT_EQ(suite["recall"], 1.0) << out;
  EXPECT_EQ(suite["false_positives"], 0) << out;
  // Detected within 2 s, plus whatever time the lab itself fell behind the
  // wall clock before the detection (truth's "lab_slip": a loaded machine
  // wrote the counters and records late, and the collector could not see
  // them sooner; the fault's own onset came that much later too).
  for (const auto& run : suite["scenarios"])
    for (const auto& fault : run["faults"]) {
      const double slip = fault.value("lab_slip_s", 0.0);
      if (slip > 0) std::cout << run["scenario"] << ": the lab slipped " << slip << " s before the detection\n";
      const auto& latency = fault["detection_latency_s"];
      EXPECT_LE(latency.is_number() ? latency.get<double>() : 1e9, 2.0 + slip) << run.dump();
    }
}

// The paper's failure modes without a faulty element, end to end through
// the daemons: a noisy neighbour, named from the victim's diagnosis with
// the links both cross; a switch image that adds latency, named from what
// changed on the job's paths.
// Runs a shipped scenario through the daemons with `job diagnose JOB` at
// its end; returns the run's output from the diagnosis on, and expects its
// score to find every fault first with no false positive.
std::string RunAndDiagnose(const std::string& scenario, const std::string& job) {
  testing::TempDir dir;
  const std::string run_dir = dir / "run";
  std::string out, err;
  EXPECT_EQ(testing::RunCommand({testing::BinDir() + "/rocefab-lab", "run",
                                 std::string(ROCEFAB_SOURCE_DIR) + "/lab/scenarios/" + scenario, "--run-dir", run_dir,
                                 "--show", "job diagnose " + job + " --window 10m"},
                                &out, &err),
            0)
      << out << err;
  std::string score;
  EXPECT_EQ(testing::RunCommand({testing::BinDir() + "/rocefab-lab", "score", "--run-dir", run_dir, "-o", "json"},
                                &score, &err),
            0)
      << score << err;
  const auto s = nlohmann::json::parse(score, nullptr, /*allow_exceptions=*/false);
  if (s.is_object()) {
    EXPECT_EQ(s.value("top1_accuracy", 0.0), 1.0) << score;
    EXPECT_EQ(s.value("false_positives", -1), 0) << score;
  } else {
    ADD_FAILURE() << "rocefab-lab score printed no JSON: " << score;
  }
  const size_t from = out.find("job " + job + " (");
  EXPECT_NE(from, std::string::npos) << out;
  const std::string diagnosis = from == std::string::npos ? out : out.substr(from);
  std::cout << diagnosis << "\n";
  return diagnosis;
}

TEST(Lab, ANoisyNeighbourIsNamedInItsVictimsDiagnosis) {
  const std::string out = RunAndDiagnose("job_contention.yaml", "4760");
  EXPECT_NE(out.find("job_contention from job 4761"), std::string::npos) << out;
  EXPECT_NE(out.find("job 4760 is slowed by job 4761's traffic"), std::string::npos) << out;
  EXPECT_NE(out.find("playbooks/job_contention.md"), std::string::npos) << out;
}

TEST(Lab, ALatencyRegressionIsNamedFromWhatChangedOnTheJobsPaths) {
  const std::string out = RunAndDiagnose("latency_regression.yaml", "4765");
  EXPECT_NE(out.find("latency_regression on z1-ctsw02"), std::string::npos) << out;
  EXPECT_NE(out.find("what changed on its paths"), std::string::npos) << out;
  EXPECT_NE(out.find("os lab-1.0 -> lab-2.3"), std::string::npos) << out;
  EXPECT_NE(out.find("playbooks/latency_regression.md"), std::string::npos) << out;
}

// A stuck NIC whose stall prevention (mlx5's `auto`, 100 ms) stops its
// pauses before a pause tree forms: named from the stall prevention's
// events, and still named by its drops while the job hangs on them.
TEST(Lab, ANicWhoseStallPreventionGaveUpPausingIsNamedByItsEventsAndDrops) {
  const std::string out = RunAndDiagnose("pfc_storm_stall_prevention.yaml", "4714");
  EXPECT_NE(out.find("pfc_storm on z1-r02-h2/mlx5_1"), std::string::npos) << out;
  EXPECT_NE(out.find("pause_storm_errors 1"), std::string::npos) << out;
  EXPECT_NE(out.find("rx_discards_phy"), std::string::npos) << out;
  EXPECT_NE(out.find("playbooks/pfc_storm.md"), std::string::npos) << out;
}

// A job across two zones fills the CTSWs' uplinks to the ATSWs, built
// oversubscribed: no fault, so no hot spot and no storm, but the capacity
// shortfall named where the model over-offered a group, with the pauses it
// causes as its consequences.
TEST(Lab, AnAllToAllAcrossZonesIsOversubscriptionNotAHotSpot) {
  const std::string out = RunAndDiagnose("cross_zone_alltoall.yaml", "4780");
  EXPECT_NE(out.find("oversubscription"), std::string::npos) << out;
  EXPECT_EQ(out.find("ecn_hotspot"), std::string::npos) << out;
  EXPECT_EQ(out.find("pfc_storm"), std::string::npos) << out;
}

// PFC off on one RTSW uplink while the CTSW above it, without ECN, must
// pause it: both settings are named as causes, and the drops the link lets
// through are the PFC setting's consequence, not a threshold of their own.
TEST(Lab, PfcOffOnOnePortIsNamedAndTheDropsItLetsThroughAreItsConsequence) {
  const std::string out = RunAndDiagnose("ecn_and_pfc_misconfig.yaml", "4720");
  EXPECT_NE(out.find("pfc_misconfig on z1-rtsw04/Ethernet112"), std::string::npos) << out;
  EXPECT_NE(out.find("playbooks/pfc_misconfig.md"), std::string::npos) << out;
  EXPECT_EQ(out.find("buffer_threshold_drops"), std::string::npos) << out;
}

// A sample of the generated corpus (docs/lab.md, "Generated scenarios"):
// fabric, jobs, faults, severities and timings drawn from a fixed seed that
// nobody tuned the detectors on, scored strictly (the top finding's kind
// must lead to the fault's playbook).
TEST(Lab, AGeneratedSampleIsFoundFirstWithTheRightPlaybookAndNothingElse) {
  testing::TempDir dir;
  std::string out, err;
  const int code = testing::RunCommand({testing::BinDir() + "/rocefab-lab", "suite", "--generate", "4", "--seed",
                                        "20261202", "--out", dir / "suite", "--time-scale", "0.5", "--parallel",
                                        "2", "-o", "json"},
                                       &out, &err);
  ASSERT_EQ(code, 0) << out << err;
  auto suite = nlohmann::json::parse(out);
  std::cout << "[generated sample] faults " << suite["faults"] << " top1 " << suite["top1_accuracy"] << " recall "
            << suite["recall"] << " false positives " << suite["false_positives"] << "\n";
  EXPECT_EQ(suite["runs"], 4) << out;
  EXPECT_GE(suite["faults"].get<int>(), 3) << out;
  EXPECT_GE(suite["top1_accuracy"].get<double>(), 0.95) << out;
  EXPECT_GE(suite["recall"].get<double>(), 0.98) << out;
  EXPECT_EQ(suite["false_positives"], 0) << out;
}

}  // namespace
}  // namespace rocefab

namespace rocefab {
namespace {

// Automatic remediation: the collector, with drain_flapping_link opted in
// for link_flap alerts, drains a flapping fabric link through the real
// controller; the job, which stalled on every flap before, stops stalling
// and keeps its bus bandwidth while the link goes on flapping.
TEST(Lab, FlappingFabricLinkIsDrainedAutomaticallyAndTheJobRecovers) {
  testing::TempDir dir;
  const std::string run_dir = dir / "run";
  const std::string source = ROCEFAB_SOURCE_DIR;
  std::string out, err;
  ASSERT_EQ(testing::RunCommand({testing::BinDir() + "/rocefab-lab", "run", source + "/lab/scenarios/link_flap_autodrain.yaml",
                                 "--run-dir", run_dir, "--timeline-every", "1",
                                 "--collector-arg=--auto-playbook", "--collector-arg=drain_flapping_link:link_flap",
                                 "--collector-arg=--playbooks-dir", "--collector-arg=" + source + "/playbooks/auto",
                                 "--show", "playbook runs", "--show", "fabric health --since 10m",
                                 "--show", "job diagnose 4737 --window 10m --limit 20"},
                                &out, &err),
            0)
      << out << err;
  // The automatic drain is an operator change: in fabric health, in effect,
  // by the remediation identity, and on the job's diagnosis.
  const size_t health = out.find("$ rocefab fabric health");
  ASSERT_NE(health, std::string::npos) << out;
  const std::string changes = out.substr(health, out.find("$ rocefab job diagnose") - health);
  EXPECT_NE(changes.find("operator changes"), std::string::npos) << changes;
  auto line_with = [](const std::string& text, const std::string& a, const std::string& b) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(line_with(changes, "z1-rtsw07/Ethernet72", "in effect")) << changes;
  const std::string diagnosis = out.substr(out.find("$ rocefab job diagnose"));
  EXPECT_TRUE(line_with(diagnosis, "operator_change", "z1-rtsw07/Ethernet72")) << diagnosis;
  // When the drained config reached the switches.
  const size_t config = out.find("CONFIG 2 switch(es) now route by applied config (generation 2");
  ASSERT_NE(config, std::string::npos) << "no drain was applied:\n" << out;
  const double drained_at = std::stod(out.substr(out.rfind("t=", config) + 2));
  EXPECT_GT(drained_at, 20.0);
  EXPECT_LT(drained_at, 35.0) << "two flaps confirm it; the drain follows within seconds";
  EXPECT_NE(out.find("succeeded  drained link z1-rtsw07/Ethernet72"), std::string::npos) << out;
  // Recorded at the drain as "running", then that same record closed: one
  // run in the audit log, not two.
  const size_t runs_at = out.find("$ rocefab playbook runs");
  ASSERT_NE(runs_at, std::string::npos) << out;
  const std::string runs = out.substr(runs_at, out.find("$ rocefab", runs_at + 1) - runs_at);
  int listed = 0;
  std::istringstream run_lines(runs);
  for (std::string line; std::getline(run_lines, line);) listed += line.find("drain_flapping_link") != std::string::npos;
  EXPECT_EQ(listed, 1) << runs;
  EXPECT_EQ(runs.find("running"), std::string::npos) << runs;

  int stalls_before = 0, stalls_after = 0, n_base = 0, n_after = 0;
  double base = 0, after = 0;
  std::istringstream lines(testing::ReadFile(run_dir + "/timeline.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    const double t = j["t"];
    const bool stalled = j["jobs"][0]["stalled"];
    const double busbw = j["jobs"][0]["busbw_gbs"];
    if (t > 5 && t < 19) base += busbw, ++n_base;
    if (t > 20 && t <= drained_at) stalls_before += stalled;
    if (t > drained_at + 1 && t < 50) stalls_after += stalled, after += busbw, ++n_after;
  }
  ASSERT_GT(n_base, 0);
  ASSERT_GT(n_after, 0);
  EXPECT_GE(stalls_before, 1) << "each flap stalls the job until the drain";
  EXPECT_EQ(stalls_after, 0) << "the drained link's flaps no longer touch the job";
  EXPECT_GE(after / n_after, 0.95 * base / n_base);
  std::cout << "drained at t=" << drained_at << " s; stalled ticks before " << stalls_before << ", after "
            << stalls_after << "; busbw " << base / n_base << " GB/s before the fault, " << after / n_after
            << " GB/s after the drain\n";
}

}  // namespace
}  // namespace rocefab

namespace rocefab {
namespace {

// Two collector shards, one per AI Zone: a PFC storm in zone 2 under a job
// that spans both zones. Only the zone-2 collector sees the storm; `rocefab
// --collector A,B job diagnose` fans out, merges, and names it.
TEST(Lab, ShardedCollectorsNameAZone2StormUnderAJobSpanningBothZones) {
  testing::TempDir dir;
  const std::string run_dir = dir / "run";
  const std::string source = ROCEFAB_SOURCE_DIR;
  auto lab = Subprocess::Spawn({{testing::BinDir() + "/rocefab-lab", "run",
                                 source + "/lab/scenarios/pfc_storm_sharded.yaml", "--run-dir", run_dir,
                                 "--time-scale", "0.5"},
                                {},
                                dir / "lab.out",
                                dir / "lab.out"});
  ASSERT_TRUE(lab.ok()) << lab.status();
  std::string collectors;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto j = nlohmann::json::parse(testing::ReadFile(run_dir + "/endpoints.json"), nullptr, false);
        if (j.is_discarded() || !j.contains("collector")) return false;
        collectors = j["collector"];
        return true;
      },
      std::chrono::seconds(60)))
      << testing::ReadFile(dir / "lab.out");
  const size_t comma = collectors.find(',');
  ASSERT_NE(comma, std::string::npos) << "two shards: " << collectors;
  const std::string zone1 = collectors.substr(0, comma), zone2 = collectors.substr(comma + 1);
  auto storms_on = [&](const std::string& collector) {
    std::string out, err;
    if (testing::RunCommand({testing::BinDir() + "/rocefab", "--tls-ca", run_dir + "/pki/ca.pem", "--tls-cert", run_dir + "/pki/lab-operator.pem", "--tls-key", run_dir + "/pki/lab-operator.key", "--collector", collector, "fabric", "health",
                             "-o", "json"},
                            &out, &err) != 0)
      return -1;
    auto j = nlohmann::json::parse(out, nullptr, false);
    int n = 0;
    if (!j.is_discarded() && j.contains("anomalies"))
      for (const auto& a : j["anomalies"]) n += a.value("kind", "") == "pfc_storm";
    return n;
  };
  // The storm runs from 10 s to 22.5 s of fabric time.
  nlohmann::json diagnosis;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        std::string out, err;
        if (testing::RunCommand({testing::BinDir() + "/rocefab", "--tls-ca", run_dir + "/pki/ca.pem", "--tls-cert", run_dir + "/pki/lab-operator.pem", "--tls-key", run_dir + "/pki/lab-operator.key", "--collector", collectors, "job", "diagnose",
                                 "4724", "--window", "1m", "-o", "json"},
                                &out, &err) != 0)
          return false;
        diagnosis = nlohmann::json::parse(out, nullptr, false);
        // Once the job is hit (stalled or degraded), the verdict must name the storm.
        return !diagnosis.is_discarded() && diagnosis.contains("findings") && !diagnosis["findings"].empty() &&
               diagnosis["findings"][0].value("kind", "") == "pfc_storm" &&
               (diagnosis.value("state", "") == "stalled" || diagnosis.value("state", "") == "degraded");
      },
      std::chrono::seconds(60)))
      << diagnosis.dump(2) << testing::ReadFile(dir / "lab.out");
  EXPECT_EQ(diagnosis["findings"][0]["entity"], "z2-r02-h1/mlx5_0");
  const std::string verdict = diagnosis["verdict"];
  EXPECT_NE(verdict.find("most likely cause: pfc_storm on z2-r02-h1/mlx5_0"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("[2 collector shards]"), std::string::npos) << verdict;
  // Each shard holds only its own zone: the storm is the second's alone.
  EXPECT_GE(storms_on(zone2), 1);
  EXPECT_EQ(storms_on(zone1), 0);
  // The job was registered on both shards.
  for (const std::string& shard : {zone1, zone2}) {
    std::string out, err;
    ASSERT_EQ(testing::RunCommand({testing::BinDir() + "/rocefab", "--tls-ca", run_dir + "/pki/ca.pem", "--tls-cert", run_dir + "/pki/lab-operator.pem", "--tls-key", run_dir + "/pki/lab-operator.key", "--collector", shard, "job", "list", "-o", "json"},
                                  &out, &err),
              0)
        << err;
    EXPECT_NE(out.find("4724"), std::string::npos) << shard << ": " << out;
  }
  EXPECT_EQ((*lab)->Wait(), 0) << testing::ReadFile(dir / "lab.out");
  std::cout << "[sharded] " << verdict << "\n";
}

// The on-call guide's commands, as written, on the demo fabric: every
// `$ rocefab ...` line of docs/operations.md runs against `make demo`'s
// scenario, and exits 0, or with an error where the guide shows one.
TEST(Lab, TheOnCallGuidesCommandsWorkOnTheDemoFabricAsWritten) {
  const std::string source = ROCEFAB_SOURCE_DIR;
  struct Step {
    std::string command;
    bool error_shown = false;  // the guide's next line is "rocefab: ..."
  };
  std::vector<Step> steps;
  {
    std::istringstream doc(testing::ReadFile(source + "/docs/operations.md"));
    std::vector<std::string> lines;
    for (std::string line; std::getline(doc, line);) lines.push_back(line);
    for (size_t i = 0; i < lines.size(); ++i) {
      const size_t at = lines[i].find("$ rocefab ");
      if (at == std::string::npos || lines[i].find_first_not_of(' ') != at) continue;
      steps.push_back({lines[i].substr(at + 10), i + 1 < lines.size() && lines[i + 1].starts_with("rocefab: ")});
    }
  }
  ASSERT_GE(steps.size(), 6u) << "the guide's commands were not found";
  testing::TempDir dir;
  std::vector<std::string> argv = {testing::BinDir() + "/rocefab-lab", "run", source + "/lab/scenarios/demo.yaml",
                                   "--run-dir", dir / "run", "--timeline-every", "30"};
  for (const Step& step : steps) argv.insert(argv.end(), {"--show", step.command});
  std::string out, err;
  ASSERT_EQ(testing::RunCommand(argv, &out, &err), 0) << out << err;
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string header = "$ rocefab " + steps[i].command + "\n";
    const size_t from = out.find(header);
    ASSERT_NE(from, std::string::npos) << steps[i].command << "\n" << out;
    const size_t to = out.find("\n$ rocefab ", from + header.size());
    const std::string shown = out.substr(from, to == std::string::npos ? std::string::npos : to - from);
    const bool failed = shown.find("\n(exit ") != std::string::npos;
    EXPECT_EQ(failed, steps[i].error_shown) << shown;
    if (!steps[i].error_shown) {
      EXPECT_EQ(shown.find("unknown command"), std::string::npos) << shown;
    }
  }
}

}  // namespace
}  // namespace rocefab

namespace rocefab {
namespace {

// Centralized TE through the real daemons, under mTLS: hostd's NIC counters
// and Inspector records reach the collector, whose traffic matrix the
// controller's TE loop allocates over; its overrides roll out through the
// canary, waves and gates to the switch agents, and the lab routes by them.
TEST(Lab, EecmpToTeRaisesBusBandwidthOnAFragmentedPlacementThroughTheTeLoop) {
  testing::TempDir dir;
  const std::string run_dir = dir / "run";
  const std::string source = ROCEFAB_SOURCE_DIR;
  auto lab = Subprocess::Spawn({{testing::BinDir() + "/rocefab-lab", "run", source + "/lab/scenarios/eecmp_to_te.yaml",
                                 "--run-dir", run_dir, "--timeline-every", "1", "--live-dir",
                                 "/dev/shm/rocefab-lab-te-" + std::to_string(getpid())},
                                {},
                                dir / "lab.out",
                                dir / "lab.out"});
  ASSERT_TRUE(lab.ok()) << lab.status();
  std::string collector;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto j = nlohmann::json::parse(testing::ReadFile(run_dir + "/endpoints.json"), nullptr, false);
        if (j.is_discarded() || !j.contains("collector")) return false;
        collector = j["collector"];
        return true;
      },
      std::chrono::seconds(60)))
      << testing::ReadFile(dir / "lab.out");
  // The matrix the TE loop reads, as an operator sees it.
  nlohmann::json matrix;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        std::string out, err;
        if (testing::RunCommand({testing::BinDir() + "/rocefab", "--tls-ca", run_dir + "/pki/ca.pem", "--tls-cert",
                                 run_dir + "/pki/lab-operator.pem", "--tls-key", run_dir + "/pki/lab-operator.key",
                                 "--collector", collector, "fabric", "traffic", "--window", "5", "-o", "json"},
                                &out, &err) != 0)
          return false;
        matrix = nlohmann::json::parse(out, nullptr, false);
        // Until every host agent's second reading (the first with deltas)
        // is in the window: agents start one by one on a loaded machine.
        return !matrix.is_discarded() && matrix.contains("demands") && matrix.contains("job_patterns") &&
               matrix["job_patterns"].value("4740", "") == "ring" && matrix.value("nics_from_nic_counters", 0) >= 64;
      },
      std::chrono::seconds(40)))
      << matrix.dump();
  double total = 0;
  for (const auto& d : matrix["demands"]) total += d.value("bytes_per_s", 0.0);
  EXPECT_GT(total, 1e9) << "the job's NICs send gigabytes per second";
  EXPECT_GE(matrix.value("nics_from_nic_counters", 0), 64) << "8 hosts x 8 NICs report";
  ASSERT_EQ((*lab)->Wait(), 0) << testing::ReadFile(dir / "lab.out");

  double before = 0, after = 0;
  std::istringstream lines(testing::ReadFile(run_dir + "/timeline.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    const double t = j["t"];
    if (t > 5 && t < 14) before = j["jobs"][0]["busbw_gbs"];
    if (t > 40) after = j["jobs"][0]["busbw_gbs"];
  }
  std::cout << "[eecmp->te] busbw " << before << " -> " << after << " GB/s\n";
  EXPECT_GT(after, before * 1.1) << testing::ReadFile(dir / "lab.out");
  // The controller's audit: the TE loop's rollout completed through its gates.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2((run_dir + "/controller.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT count(*) FROM audit WHERE who = 'rocefab-controllerd/te' AND action = 'apply-done'",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_GE(sqlite3_column_int(stmt, 0), 1);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

}  // namespace
}  // namespace rocefab
