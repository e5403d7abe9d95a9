// Link state and ethtool ioctls against the real kernel. The veth tests make
// their own network namespace (needs root, as in CI) so they touch nothing
// on the machine.
#include "agents/host/link_state.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>

#include "agents/host/ethtool_stats.h"
#include "tests/support/test_support.h"

namespace rocefab::hostd {
namespace {

TEST(NetlinkLinkSource, LoopbackAndMissingDevice) {
  NetlinkLinkSource source;
  auto lo = source.Read("lo");
  ASSERT_TRUE(lo.ok()) << lo.status();
  EXPECT_TRUE(lo->has_carrier_changes);
  EXPECT_TRUE(absl::IsNotFound(source.Read("rfnodev0").status()));
}

class VethNamespace : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create a network namespace and veth pair";
    // Each ctest run of this test is its own process: leaving the namespace
    // is not needed.
    if (unshare(CLONE_NEWNET) != 0) GTEST_SKIP() << "unshare(CLONE_NEWNET) not permitted here";
    ASSERT_EQ(Ip({"link", "add", "rf0", "type", "veth", "peer", "name", "rf1"}), 0);
    ASSERT_EQ(Ip({"link", "set", "rf0", "up"}), 0);
    ASSERT_EQ(Ip({"link", "set", "rf1", "up"}), 0);
  }
  static int Ip(std::vector<std::string> args) {
    args.insert(args.begin(), "/usr/sbin/ip");
    if (access(args[0].c_str(), X_OK) != 0) args[0] = "/sbin/ip";
    std::string out, err;
    int rc = testing::RunCommand(args, &out, &err);
    if (rc != 0) ADD_FAILURE() << "ip failed: " << err;
    return rc;
  }
};

TEST_F(VethNamespace, CarrierFollowsThePeerAndFlapsAreCounted) {
  NetlinkLinkSource source;
  ASSERT_TRUE(testing::WaitFor([&] { auto s = source.Read("rf0"); return s.ok() && s->carrier; },
                               std::chrono::seconds(5)));
  const uint32_t changes_up = source.Read("rf0")->carrier_changes;
  ASSERT_EQ(Ip({"link", "set", "rf1", "down"}), 0);
  auto down = source.Read("rf0");
  ASSERT_TRUE(down.ok());
  EXPECT_FALSE(down->carrier);
  EXPECT_GT(down->carrier_changes, changes_up);
  ASSERT_EQ(Ip({"link", "set", "rf1", "up"}), 0);
  ASSERT_TRUE(testing::WaitFor([&] { return source.Read("rf0")->carrier; },
                               std::chrono::seconds(5)));
  EXPECT_GE(source.Read("rf0")->carrier_changes, changes_up + 2);
}

TEST_F(VethNamespace, EthtoolIoctlReadsVethStatistics) {
  IoctlEthtoolSource source;
  auto stats = source.Read("rf0");
  ASSERT_TRUE(stats.ok()) << stats.status();
  // veth's statistics set starts with its peer's ifindex.
  auto it = std::find_if(stats->begin(), stats->end(),
                         [](const auto& s) { return s.first == "peer_ifindex"; });
  ASSERT_NE(it, stats->end());
  EXPECT_GT(it->second, 0u);
}

}  // namespace
}  // namespace rocefab::hostd
