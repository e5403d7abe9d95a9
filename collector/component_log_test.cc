#include "collector/component_log.h"

#include <gtest/gtest.h>

namespace rocefab::collector {
namespace {

TEST(ComponentLog, TheFirstReportIsNoChangeALaterDifferentOneIs) {
  ComponentLog log;
  EXPECT_EQ(log.Observe("z1-ctsw02", {{"os", "lab-1.0"}, {"kernel", "6.1"}}, 100), 0u);
  EXPECT_EQ(log.Observe("z1-ctsw02", {{"os", "lab-1.0"}, {"kernel", "6.1"}}, 200), 0u) << "the same versions again";
  EXPECT_EQ(log.Observe("z1-ctsw02", {{"os", "lab-2.3"}, {"kernel", "6.1"}}, 300), 1u);
  const auto changes = log.Changes(0, 1000);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].device(), "z1-ctsw02");
  EXPECT_EQ(changes[0].component(), "os");
  EXPECT_EQ(changes[0].from(), "lab-1.0");
  EXPECT_EQ(changes[0].to(), "lab-2.3");
  EXPECT_EQ(changes[0].at_us(), 300);
  EXPECT_TRUE(log.Changes(301, 1000).empty()) << "outside the asked span";
  EXPECT_EQ(log.Current("z1-ctsw02").at("os"), "lab-2.3");
  EXPECT_TRUE(log.Current("nobody").empty());
}

TEST(ComponentLog, AddedAndRemovedComponentsAreChanges) {
  ComponentLog log;
  log.Observe("h1", {{"mlx5_0 firmware", "28.39.1002"}}, 1);
  EXPECT_EQ(log.Observe("h1", {{"mlx5_1 firmware", "28.39.1002"}}, 2), 2u);
  const auto changes = log.Changes(0, 10);
  ASSERT_EQ(changes.size(), 2u);
  bool added = false, removed = false;
  for (const auto& c : changes) {
    added |= c.component() == "mlx5_1 firmware" && c.from().empty() && c.to() == "28.39.1002";
    removed |= c.component() == "mlx5_0 firmware" && c.from() == "28.39.1002" && c.to().empty();
  }
  EXPECT_TRUE(added && removed);
}

TEST(ComponentLog, AReplayedOlderBatchChangesNothing) {
  ComponentLog log;
  log.Observe("sw", {{"os", "a"}}, 100);
  log.Observe("sw", {{"os", "b"}}, 200);
  // A batch from the agent's spool, sent before the upgrade, arrives late.
  EXPECT_EQ(log.Observe("sw", {{"os", "a"}}, 150), 0u);
  EXPECT_EQ(log.Current("sw").at("os"), "b");
  EXPECT_EQ(log.Changes(0, 1000).size(), 1u);
}

TEST(ComponentLog, KeepsItsNewestChangesWithinItsBound) {
  ComponentLog log(3);
  log.Observe("sw", {{"os", "v0"}}, 0);
  for (int i = 1; i <= 5; ++i) log.Observe("sw", {{"os", "v" + std::to_string(i)}}, i);
  const auto changes = log.Changes(0, 100);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes.front().to(), "v3");
  EXPECT_EQ(changes.back().to(), "v5");
}

}  // namespace
}  // namespace rocefab::collector
