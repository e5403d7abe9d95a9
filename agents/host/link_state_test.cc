// Link state and ethtool ioctls against the real kernel. The veth tests make
// their own network namespace (needs root, as in CI) so they touch nothing
// on the machine.
#include "agents/host/link_state.h"

#include <gtest/gtest.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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

// The ioctl source keeps where the vocabulary's statistics sit and reads the
// names again when the set's size changes: veth's set has statistics per
// queue, so changing its channels changes it.
TEST_F(VethNamespace, EthtoolNamesAreReadAgainWhenTheSetChanges) {
  ASSERT_EQ(Ip({"link", "add", "rf2", "numtxqueues", "4", "numrxqueues", "4", "type", "veth", "peer", "name",
                "rf3", "numtxqueues", "4", "numrxqueues", "4"}),
            0);
  IoctlEthtoolSource source;
  auto size = [&] {
    auto stats = source.Read("rf2");
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? stats->size() : 0;
  };
  const size_t before = size();
  const uint64_t reads_before = source.name_reads();
  NicReading nic;
  for (int64_t now : {1'000'000, 1'100'000, 1'200'000}) {
    source.BeginPoll(now);
    ASSERT_TRUE(source.ReadInto("rf2", &nic).ok());
  }
  EXPECT_EQ(source.name_reads(), reads_before + 1) << "one read of the names for three polls";

  // ETHTOOL_SCHANNELS: a different number of receive queues.
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  ethtool_channels channels{};
  channels.cmd = ETHTOOL_GCHANNELS;
  ifreq ifr{};
  std::strcpy(ifr.ifr_name, "rf2");
  ifr.ifr_data = reinterpret_cast<char*>(&channels);
  const int got = ioctl(fd, SIOCETHTOOL, &ifr);
  channels.cmd = ETHTOOL_SCHANNELS;
  channels.rx_count = channels.rx_count == channels.max_rx ? 1 : channels.max_rx;
  const int set = got == 0 && channels.max_rx > 1 ? ioctl(fd, SIOCETHTOOL, &ifr) : -1;
  const int err = errno;
  close(fd);
  if (set != 0)
    GTEST_SKIP() << "this kernel's veth cannot change its channels (" << std::strerror(err)
                 << "): the re-read on a changed set is checked only against the ioctl's format";
  ASSERT_NE(size(), before) << "veth's set has statistics per receive queue";
  const uint64_t reads_after_change = source.name_reads();
  source.BeginPoll(1'300'000);
  ASSERT_TRUE(source.ReadInto("rf2", &nic).ok());
  EXPECT_EQ(source.name_reads(), reads_after_change + 1) << "the changed set's names are read again";
}

}  // namespace
}  // namespace rocefab::hostd
