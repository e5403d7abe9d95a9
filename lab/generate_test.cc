#include "lab/generate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "common/strings.h"
#include "lab/fabric_model.h"
#include "lab/runner.h"
#include "tests/support/test_support.h"

namespace rocefab::lab {
namespace {

uint64_t JobCompleted(const FabricModel& model, const std::string& id) {
  for (const JobStatus& job : model.jobs())
    if (job.id == id) return job.completed;
  return 0;
}

TEST(Generate, TheSameSeedAndIndexGiveTheSameScenarioWhateverTheCount) {
  GenerateOptions a{.seed = 11, .count = 3};
  GenerateOptions b{.seed = 11, .count = 50};
  for (int i = 0; i < 3; ++i) {
    auto x = GenerateScenario(a, i), y = GenerateScenario(b, i);
    ASSERT_TRUE(x.ok() && y.ok()) << x.status() << y.status();
    EXPECT_EQ(x->SerializeAsString(), y->SerializeAsString()) << i;
  }
  auto other = GenerateScenario({.seed = 12}, 0);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->SerializeAsString(), GenerateScenario(a, 0)->SerializeAsString());
}

// Over a sample, the draws cover what the suite must judge: every fault
// kind, several tiers, overlapping faults, clean runs, every collective and
// several fabric sizes and poll intervals; and every scenario is one the
// model accepts.
TEST(Generate, ASampleCoversKindsTiersOverlapsCollectivesAndSizes) {
  std::map<std::string, int> kinds, tiers;
  std::set<int> collectives, host_counts;
  std::set<double> polls;
  int clean = 0, overlapping = 0;
  for (int i = 0; i < 80; ++i) {
    auto s = GenerateScenario({.seed = 3}, i);
    ASSERT_TRUE(s.ok()) << i << ": " << s.status();
    auto topology = TopologyForScenario(*s, "");
    ASSERT_TRUE(topology.ok()) << topology.status();
    auto model = FabricModel::Create(*topology, *s);
    ASSERT_TRUE(model.ok()) << s->name() << ": " << model.status();
    host_counts.insert((*topology)->proto().hosts_size());
    polls.insert(s->poll_interval_s());
    for (const auto& job : s->jobs()) collectives.insert(job.collective());
    if (s->faults().empty()) ++clean;
    if (s->faults_size() > 1) ++overlapping;
    std::set<std::string> devices;
    for (const auto& f : s->faults()) {
      ++kinds[v1::FaultKind_Name(f.kind())];
      ++tiers[TargetTier(**topology, f.target())];
      EXPECT_GE(f.at_s(), 15) << s->name();
      EXPECT_LT(f.at_s(), s->duration_s()) << s->name();
      EXPECT_TRUE(devices.insert(EntityDevice(f.target())).second) << s->name() << ": two faults on one device";
    }
  }
  EXPECT_EQ(kinds.size(), 12u) << ::testing::PrintToString(kinds);
  EXPECT_GE(tiers.size(), 4u) << ::testing::PrintToString(tiers);
  EXPECT_EQ(collectives.size(), 4u);
  EXPECT_GE(host_counts.size(), 3u);
  EXPECT_EQ(polls.size(), 3u);
  EXPECT_GT(clean, 0);
  EXPECT_GT(overlapping, 5);
}

// A noisy neighbour is drawn only where the model shows it slowing its
// victim by 10% or more: run each one drawn with and without the neighbour.
TEST(Generate, ANoisyNeighbourIsDrawnOnlyWhereTheModelShowsItSlowingItsVictim) {
  int drawn = 0;
  for (int i = 0; i < 120 && drawn < 3; ++i) {
    auto s = GenerateScenario({.seed = 1}, i);
    ASSERT_TRUE(s.ok()) << i << ": " << s.status();
    if (s->faults().empty() || s->faults(0).kind() != v1::FAULT_KIND_JOB_CONTENTION) continue;
    ++drawn;
    const v1::FaultSpec& f = s->faults(0);
    ASSERT_NE(f.victim(), f.target()) << s->name();
    auto topology = TopologyForScenario(*s, "");
    ASSERT_TRUE(topology.ok());
    // The victim's iterations per model second from 20 s after the fault
    // starts, with and without it.
    auto rate = [&](bool with) {
      v1::Scenario run = *s;
      run.clear_faults();
      if (with) {
        v1::FaultSpec* only = run.add_faults();
        *only = f;
        only->set_at_s(0);
        only->clear_duration_s();
      } else {
        for (int j = 0; j < run.jobs_size(); ++j)
          if (run.jobs(j).id() == f.target()) run.mutable_jobs()->DeleteSubrange(j, 1);
      }
      auto model = FabricModel::Create(*topology, run);
      EXPECT_TRUE(model.ok()) << model.status();
      uint64_t before = 0;
      for (int k = 0; k < 16; ++k) {
        if (k == 8) before = JobCompleted(**model, f.victim());
        (*model)->Step(0.5, nullptr);
      }
      return static_cast<double>(JobCompleted(**model, f.victim()) - before);
    };
    const double alone = rate(false), beside = rate(true);
    ASSERT_GT(alone, 0) << s->name();
    EXPECT_LE(beside, 0.91 * alone) << s->name() << ": the victim alone " << alone << ", beside it " << beside;
  }
  EXPECT_GE(drawn, 1) << "no noisy neighbour among 120 scenarios of seed 1";
}

// A latency regression likewise: its switch slows a job by 10% or more.
TEST(Generate, ALatencyRegressionIsDrawnOnlyWhereTheModelShowsItSlowingAJob) {
  int drawn = 0;
  for (int i = 0; i < 120 && drawn < 3; ++i) {
    auto s = GenerateScenario({.seed = 1}, i);
    ASSERT_TRUE(s.ok()) << i << ": " << s.status();
    if (s->faults().empty() || s->faults(0).kind() != v1::FAULT_KIND_LATENCY_REGRESSION) continue;
    ++drawn;
    EXPECT_EQ(s->faults(0).duration_s(), 0) << s->name() << ": an image stays";
    EXPECT_LE(s->faults(0).at_s(), 25) << s->name();
    auto topology = TopologyForScenario(*s, "");
    ASSERT_TRUE(topology.ok());
    auto busbw = [&](bool with) {
      v1::Scenario run = *s;
      run.clear_faults();
      if (with) {
        *run.add_faults() = s->faults(0);
        run.mutable_faults(0)->set_at_s(0);
      }
      auto model = FabricModel::Create(*topology, run);
      EXPECT_TRUE(model.ok()) << model.status();
      for (int k = 0; k < 8; ++k) (*model)->Step(0.5, nullptr);
      std::vector<double> out;
      for (const JobStatus& job : (*model)->jobs()) out.push_back(job.busbw_gbs);
      return out;
    };
    const auto healthy = busbw(false), slowed = busbw(true);
    bool bites = false;
    for (size_t j = 0; j < healthy.size(); ++j) bites |= healthy[j] > 0 && slowed[j] <= 0.9 * healthy[j];
    EXPECT_TRUE(bites) << s->name();
  }
  EXPECT_GE(drawn, 1) << "no latency regression among 120 scenarios of seed 1";
}

TEST(Generate, WrittenScenariosLoadAsScenarioFiles) {
  testing::TempDir dir;
  auto paths = WriteGeneratedScenarios({.seed = 5, .count = 4}, dir / "gen");
  ASSERT_TRUE(paths.ok()) << paths.status();
  ASSERT_EQ(paths->size(), 4u);
  for (const std::string& path : *paths) {
    auto loaded = LoadScenario(path);
    ASSERT_TRUE(loaded.ok()) << path << ": " << loaded.status();
    auto again = GenerateScenario({.seed = 5}, static_cast<int>(&path - paths->data()));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(loaded->name(), again->name());
    EXPECT_EQ(loaded->faults_size(), again->faults_size());
    EXPECT_EQ(loaded->jobs_size(), again->jobs_size());
  }
}

TEST(Generate, TiersFollowTheTopology) {
  auto s = GenerateScenario({.seed = 1}, 0);
  ASSERT_TRUE(s.ok());
  auto topology = TopologyForScenario(*s, "");
  ASSERT_TRUE(topology.ok());
  const Topology& t = **topology;
  EXPECT_EQ(TargetTier(t, "z1-r01-h1/gpu0"), "gpu");
  EXPECT_EQ(TargetTier(t, "z1-r01-h1/mlx5_0"), "nic");
  EXPECT_EQ(TargetTier(t, "z1-rtsw01"), "rtsw");
  EXPECT_EQ(TargetTier(t, "z1-ctsw01"), "ctsw");
  EXPECT_EQ(TargetTier(t, "no-such-switch"), "other");
  // An RTSW's uplink.
  for (const auto& link : t.proto().links())
    if (link.a().starts_with("z1-rtsw01/") && link.b().starts_with("z1-ctsw")) {
      EXPECT_EQ(TargetTier(t, link.a()), "rtsw-ctsw");
      EXPECT_EQ(TargetTier(t, link.b()), "rtsw-ctsw");
      break;
    }
}

}  // namespace
}  // namespace rocefab::lab
