#include "agents/switch/config_applier.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/support/test_support.h"

namespace rocefab::switchd {
namespace {

// A backend that keeps state in memory, fails on chosen keys and cannot do
// chosen kinds, like a device without DCB.
class FakeConfigBackend final : public ConfigBackend {
 public:
  std::string name() const override { return "fake"; }
  absl::Status Install(const v1::ConfigItem& item) override {
    ++installs;
    if (fail_keys.count(item.key())) return absl::InternalError("the ASIC said no");
    if (item.has_qos() && !qos_supported) return absl::UnimplementedError("no DCB on this device");
    state[item.key()] = item.SerializeAsString();
    return absl::OkStatus();
  }
  absl::Status Remove(const v1::ConfigItem& item) override {
    state.erase(item.key());
    return absl::OkStatus();
  }
  absl::Status Commit(const v1::SwitchConfig& applied) override {
    committed_generation = applied.generation();
    return absl::OkStatus();
  }
  std::map<std::string, std::string> state;
  std::set<std::string> fail_keys;
  bool qos_supported = true;
  uint64_t committed_generation = 0;
  int installs = 0;
};

v1::SwitchConfig Config(uint64_t generation, std::vector<std::string> prefixes, uint32_t group_size) {
  v1::SwitchConfig config;
  config.set_switch_name("z1-rtsw01");
  config.set_generation(generation);
  config.set_content_hash("hash-" + std::to_string(generation));
  auto* group = config.add_items();
  group->set_key("nhg/1");
  group->mutable_nexthop_group()->set_id(1);
  for (uint32_t i = 0; i < group_size; ++i) group->mutable_nexthop_group()->add_nexthops()->set_port("Ethernet" + std::to_string(32 + 4 * i));
  for (const auto& prefix : prefixes) {
    auto* route = config.add_items();
    route->set_key("route/" + prefix);
    route->mutable_route()->set_prefix(prefix);
    route->mutable_route()->set_nexthop_group(1);
  }
  auto* qos = config.add_items();
  qos->set_key("qos");
  qos->mutable_qos()->mutable_qos()->set_strict_priority_tc(6);
  return config;
}

TEST(ConfigApplier, AppliesDiffsAndReportsEveryItem) {
  FakeConfigBackend backend;
  ConfigApplier applier("z1-rtsw01", backend, "");
  auto first = applier.Apply(Config(1, {"10.1.2.0/24", "10.1.3.0/24"}, 4));
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_EQ(first.state().applied_generation(), 1u);
  EXPECT_EQ(first.state().applied_hash(), "hash-1");
  EXPECT_EQ(first.state().items_size(), 4);
  EXPECT_EQ(backend.state.size(), 4u);
  // Only the changed group and the new route are installed; the gone route is removed.
  backend.installs = 0;
  auto second = applier.Apply(Config(2, {"10.1.2.0/24", "10.1.4.0/24"}, 3));
  ASSERT_TRUE(second.ok()) << second.error();
  EXPECT_EQ(backend.installs, 2);
  EXPECT_FALSE(backend.state.count("route/10.1.3.0/24"));
  EXPECT_TRUE(backend.state.count("route/10.1.4.0/24"));
  EXPECT_EQ(backend.committed_generation, 2u);
}

TEST(ConfigApplier, PartialFailureRollsBackAndSaysWhatHadBeenApplied) {
  FakeConfigBackend backend;
  ConfigApplier applier("z1-rtsw01", backend, "");
  ASSERT_TRUE(applier.Apply(Config(1, {"10.1.2.0/24"}, 4)).ok());
  const auto before = backend.state;
  backend.fail_keys = {"route/10.1.9.0/24"};
  auto response = applier.Apply(Config(2, {"10.1.2.0/24", "10.1.5.0/24", "10.1.9.0/24"}, 2));
  EXPECT_FALSE(response.ok());
  EXPECT_NE(response.error().find("item route/10.1.9.0/24 failed: the ASIC said no"), std::string::npos)
      << response.error();
  EXPECT_NE(response.error().find("rolled back 2 applied change(s) [nhg/1, route/10.1.5.0/24]"),
            std::string::npos)
      << response.error();
  EXPECT_TRUE(response.rolled_back());
  EXPECT_EQ(response.state().applied_generation(), 1u);
  EXPECT_EQ(backend.state, before) << "the device is back to generation 1";
  bool failed_reported = false;
  for (const auto& item : response.state().items())
    if (item.key() == "route/10.1.9.0/24") failed_reported = item.state() == v1::ITEM_STATE_FAILED;
  EXPECT_TRUE(failed_reported);
}

TEST(ConfigApplier, AFailedItemNoLongerDesiredLeavesNoTrace) {
  FakeConfigBackend backend;
  ConfigApplier applier("z1-rtsw01", backend, "");
  ASSERT_TRUE(applier.Apply(Config(1, {"10.1.2.0/24"}, 2)).ok());
  backend.fail_keys = {"route/10.1.9.0/24"};
  ASSERT_FALSE(applier.Apply(Config(2, {"10.1.2.0/24", "10.1.9.0/24"}, 2)).ok());
  auto next = applier.Apply(Config(3, {"10.1.2.0/24", "10.1.5.0/24"}, 2));
  ASSERT_TRUE(next.ok()) << next.error();
  for (const auto& item : next.state().items()) {
    EXPECT_NE(item.key(), "route/10.1.9.0/24");
    EXPECT_NE(item.state(), v1::ITEM_STATE_FAILED) << item.key();
  }
}

TEST(ConfigApplier, UnsupportedItemsAreReportedNotFailed) {
  FakeConfigBackend backend;
  backend.qos_supported = false;
  ConfigApplier applier("z1-rtsw01", backend, "");
  auto response = applier.Apply(Config(1, {"10.1.2.0/24"}, 2));
  ASSERT_TRUE(response.ok()) << response.error();
  for (const auto& item : response.state().items()) {
    if (item.key() == "qos") {
      EXPECT_EQ(item.state(), v1::ITEM_STATE_UNSUPPORTED);
      EXPECT_EQ(item.reason(), "no DCB on this device");
    } else {
      EXPECT_EQ(item.state(), v1::ITEM_STATE_APPLIED);
    }
  }
}

// Found by the apply_config fuzzer: a key whose previous item was
// unsupported (never on the device) and whose new item went on before
// another item failed. Before, the rollback tried to re-install the
// unsupported item, failed, and left the new one on the device.
TEST(ConfigApplier, RollingBackOverAnUnsupportedItemLeavesTheDeviceAsItWas) {
  FakeConfigBackend backend;
  backend.qos_supported = false;
  ConfigApplier applier("z1-rtsw01", backend, "");
  ASSERT_TRUE(applier.Apply(Config(1, {"10.1.2.0/24"}, 2)).ok());
  const auto before = backend.state;
  ASSERT_EQ(before.count("qos"), 0u) << "unsupported: not on the device";
  v1::SwitchConfig next = Config(2, {"10.1.2.0/24"}, 2);
  for (auto& item : *next.mutable_items())
    if (item.key() == "qos") item.mutable_route()->set_prefix("10.9.0.0/16");  // now a supported item
  auto* bad = next.add_items();
  bad->set_key("route/10.1.3.0/24");
  bad->mutable_route()->set_prefix("10.1.3.0/24");
  backend.fail_keys = {"route/10.1.3.0/24"};
  const auto response = applier.Apply(next);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(backend.state, before) << response.error();
}

TEST(ConfigApplier, RefusesOldGenerationsWrongSwitchAndDuplicateKeys) {
  FakeConfigBackend backend;
  ConfigApplier applier("z1-rtsw01", backend, "");
  ASSERT_TRUE(applier.Apply(Config(5, {"10.1.2.0/24"}, 2)).ok());
  const auto old = applier.Apply(Config(4, {}, 2));
  EXPECT_NE(old.error().find("older than the applied 5"), std::string::npos);
  EXPECT_FALSE(old.rolled_back()) << "refused before any item was tried";
  auto other = Config(6, {}, 2);
  other.set_switch_name("z1-rtsw02");
  EXPECT_NE(applier.Apply(other).error().find("config is for z1-rtsw02"), std::string::npos);
  auto twice = Config(6, {"10.1.2.0/24", "10.1.2.0/24"}, 2);
  EXPECT_NE(applier.Apply(twice).error().find("appears twice"), std::string::npos);
  EXPECT_EQ(applier.State().applied_generation(), 5u);
}

TEST(ConfigApplier, PersistsAndReconcilesAfterRestart) {
  testing::TempDir dir;
  const std::string state_file = dir / "applied.pb";
  {
    FakeConfigBackend backend;
    ConfigApplier applier("z1-rtsw01", backend, state_file);
    ASSERT_TRUE(applier.Apply(Config(3, {"10.1.2.0/24", "10.1.3.0/24"}, 4)).ok());
  }
  // A fresh process: an empty device, reconciled to generation 3. Twice is
  // the same as once.
  FakeConfigBackend backend;
  ConfigApplier applier("z1-rtsw01", backend, state_file);
  ASSERT_TRUE(applier.Reconcile().ok());
  ASSERT_TRUE(applier.Reconcile().ok());
  EXPECT_EQ(applier.State().applied_generation(), 3u);
  EXPECT_EQ(backend.state.size(), 4u);
  EXPECT_EQ(backend.committed_generation, 3u);
  // A state file of another switch is refused, not applied.
  FakeConfigBackend other_backend;
  ConfigApplier other("z1-rtsw02", other_backend, state_file);
  EXPECT_FALSE(other.Reconcile().ok());
  EXPECT_TRUE(other_backend.state.empty());
  testing::WriteFile(dir / "garbage.pb", "\xff\xff\xff not a config");
  ConfigApplier garbage("z1-rtsw01", other_backend, dir / "garbage.pb");
  EXPECT_FALSE(garbage.Reconcile().ok());
}

}  // namespace
}  // namespace rocefab::switchd
