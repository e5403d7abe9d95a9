// The linux backend against the real kernel, in a private network namespace
// of this test process (needs root, as in CI): every item kind goes in and
// comes out as `ip` shows it.
#include "agents/switch/linux_backend.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "tests/support/test_support.h"

namespace rocefab::switchd {
namespace {

std::string Ip(std::vector<std::string> args) {
  args.insert(args.begin(), access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip" : "/sbin/ip");
  std::string out, err;
  if (testing::RunCommand(args, &out, &err) != 0) ADD_FAILURE() << "ip: " << err;
  return out;
}

class LinuxBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for a private network namespace";
    if (unshare(CLONE_NEWNET) != 0) GTEST_SKIP() << "unshare(CLONE_NEWNET) not permitted here";
    Ip({"link", "set", "lo", "up"});
    for (const char* port : {"Ethernet0", "Ethernet4"}) {
      Ip({"link", "add", port, "type", "veth", "peer", "name", std::string("p") + port});
      Ip({"link", "set", port, "up"});
      Ip({"link", "set", std::string("p") + port, "up"});
    }
  }
  static v1::ConfigItem Address(const std::string& port, const std::string& cidr) {
    v1::ConfigItem item;
    item.set_key("addr/" + port);
    item.mutable_address()->set_port(port);
    item.mutable_address()->set_address(cidr);
    return item;
  }
};

// The poll thread reads counters while gRPC threads apply config. On one
// shared libnl socket, their requests and replies interleave: sequence
// numbers mismatch, a dump reads an ack, and an apply fails or hangs.
TEST_F(LinuxBackendTest, CountersAndConfigFromTwoThreadsAtOnceBothSucceed) {
  LinuxBackend backend("z1-rtsw01");
  std::atomic<bool> done{false};
  std::atomic<int> read_failures{0}, reads{0};
  std::thread poller([&] {
    while (!done) {
      auto reading = backend.ReadCounters();
      if (!reading.ok() || reading->ports.size() != 2) ++read_failures;
      ++reads;
    }
  });
  int apply_failures = 0;
  for (int i = 0; i < 300; ++i) {
    const auto item = Address("Ethernet0", "100.64." + std::to_string(i % 200) + ".0/31");
    if (!backend.Install(item).ok()) ++apply_failures;
    if (!backend.Remove(item).ok()) ++apply_failures;
  }
  done = true;
  poller.join();
  EXPECT_EQ(apply_failures, 0);
  EXPECT_EQ(read_failures, 0) << "of " << reads << " reads";
  EXPECT_GT(reads, 0);
}

TEST_F(LinuxBackendTest, EveryItemKindReachesTheKernelAndLeavesIt) {
  LinuxBackend backend("z1-rtsw01");
  ASSERT_TRUE(backend.Install(Address("Ethernet0", "100.64.0.0/31")).ok());
  ASSERT_TRUE(backend.Install(Address("Ethernet4", "100.64.0.2/31")).ok());
  EXPECT_NE(Ip({"addr", "show", "dev", "Ethernet0"}).find("100.64.0.0/31"), std::string::npos);

  v1::ConfigItem group;
  group.set_key("nhg/1");
  group.mutable_nexthop_group()->set_id(1);
  for (auto [port, gw] : {std::pair{"Ethernet0", "100.64.0.1"}, std::pair{"Ethernet4", "100.64.0.3"}}) {
    auto* hop = group.mutable_nexthop_group()->add_nexthops();
    hop->set_port(port);
    hop->set_gateway(gw);
  }
  ASSERT_TRUE(backend.Install(group).ok());
  EXPECT_NE(Ip({"nexthop", "show"}).find("id 1 group 1001/1002"), std::string::npos);

  v1::ConfigItem route;
  route.set_key("route/10.1.2.0/24");
  route.mutable_route()->set_prefix("10.1.2.0/24");
  route.mutable_route()->set_nexthop_group(1);
  ASSERT_TRUE(backend.Install(route).ok());
  EXPECT_NE(Ip({"route", "show"}).find("10.1.2.0/24 nhid 1"), std::string::npos);
  // Installing again is idempotent (reconcile after a restart).
  ASSERT_TRUE(backend.Install(group).ok());
  ASSERT_TRUE(backend.Install(route).ok());

  // A pinned path: traffic arriving on Ethernet0 for 10.1.3.0/24 uses table 100.
  v1::ConfigItem rule;
  rule.set_key("rule/100");
  rule.mutable_rule()->set_priority(100);
  rule.mutable_rule()->set_iif("Ethernet0");
  rule.mutable_rule()->set_prefix("10.1.3.0/24");
  rule.mutable_rule()->set_table(100);
  ASSERT_TRUE(backend.Install(rule).ok());
  const std::string rules = Ip({"rule", "show"});
  EXPECT_NE(rules.find("100:"), std::string::npos) << rules;
  EXPECT_NE(rules.find("to 10.1.3.0/24 iif Ethernet0 lookup 100"), std::string::npos) << rules;

  v1::ConfigItem hash;
  hash.set_key("hash");
  for (const char* f : {"src_ip", "dst_ip", "ip_proto", "src_port", "dst_port", "roce_dst_qp"})
    hash.mutable_hash()->add_fields(f);
  ASSERT_TRUE(backend.Install(hash).ok());
  EXPECT_EQ(testing::ReadFile("/proc/sys/net/ipv4/fib_multipath_hash_policy"), "3\n");
  // src_ip 0x1 | dst_ip 0x2 | ip_proto 0x4 | src_port 0x10 | dst_port 0x20;
  // the RoCE destination QP rides on the QP-derived source port.
  EXPECT_EQ(std::stoul(testing::ReadFile("/proc/sys/net/ipv4/fib_multipath_hash_fields"), nullptr, 0),
            0x37u);

  v1::ConfigItem qos;
  qos.set_key("qos");
  EXPECT_TRUE(absl::IsUnimplemented(backend.Install(qos))) << "veth has no DCB";

  // A nexthop on a port that does not exist fails, it is not skipped.
  v1::ConfigItem bad = group;
  bad.set_key("nhg/2");
  bad.mutable_nexthop_group()->set_id(2);
  bad.mutable_nexthop_group()->mutable_nexthops(0)->set_port("Ethernet99");
  EXPECT_FALSE(backend.Install(bad).ok());

  // Out again, in reverse order.
  ASSERT_TRUE(backend.Remove(rule).ok());
  ASSERT_TRUE(backend.Remove(route).ok());
  ASSERT_TRUE(backend.Remove(group).ok());
  EXPECT_EQ(Ip({"route", "show"}).find("10.1.2.0/24"), std::string::npos);
  EXPECT_EQ(Ip({"nexthop", "show"}).find("id 1 "), std::string::npos);
  EXPECT_EQ(Ip({"rule", "show"}).find("lookup 100"), std::string::npos);

  // Counters: the ports, with their root qdisc's queue counters.
  auto reading = backend.ReadCounters();
  ASSERT_TRUE(reading.ok());
  ASSERT_EQ(reading->ports.size(), 2u);
  EXPECT_EQ(reading->ports.at("Ethernet0").counters.at("link_up"), 1u);
  EXPECT_EQ(reading->ports.at("Ethernet0").queues.count(0), 1u);
}

}  // namespace
}  // namespace rocefab::switchd
