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
  EXPECT_EQ(kinds.size(), 9u) << ::testing::PrintToString(kinds);
  EXPECT_GE(tiers.size(), 4u) << ::testing::PrintToString(tiers);
  EXPECT_EQ(collectives.size(), 4u);
  EXPECT_GE(host_counts.size(), 3u);
  EXPECT_EQ(polls.size(), 3u);
  EXPECT_GT(clean, 0);
  EXPECT_GT(overlapping, 5);
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
