// The linux backend against the real kernel, in a private network namespace
// of this test process (needs root, as in CI): every item kind goes in and
// comes out as `ip` shows it.
#include "agents/switch/linux_backend.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iostream>
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

  v1::ConfigItem watchdog;
  watchdog.set_key("qos/pfc_watchdog");
  watchdog.mutable_qos()->mutable_qos()->mutable_pfc_watchdog()->set_detect_ms(200);
  EXPECT_TRUE(absl::IsUnimplemented(backend.Install(watchdog))) << "Linux has no PFC watchdog";

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

// A TE override as the compiler emits it (compiler.h): a single-uplink
// group, a route in that uplink's table, and a rule sending what enters on
// a host port for a rack there. The kernel holds all three, and when the
// uplink loses carrier, lookup falls through to the main table's ECMP route.
TEST_F(LinuxBackendTest, TeOverridesAreRulesOverTablesAndFallBackWhenTheUplinkDies) {
  LinuxBackend backend("z1-rtsw01");
  Ip({"link", "add", "Ethernet8", "type", "veth", "peer", "name", "pEthernet8"});
  for (const char* port : {"Ethernet8", "pEthernet8"}) Ip({"link", "set", port, "up"});
  std::string out;
  testing::RunCommand({"/usr/sbin/sysctl", "-w", "net.ipv4.ip_forward=1",
                       "net.ipv4.conf.all.ignore_routes_with_linkdown=1"}, &out, &out);
  ASSERT_TRUE(backend.Install(Address("Ethernet4", "100.64.0.2/31")).ok());
  ASSERT_TRUE(backend.Install(Address("Ethernet8", "100.64.0.4/31")).ok());
  ASSERT_TRUE(backend.Install(Address("Ethernet0", "10.1.1.254/32")).ok());
  auto group = [](uint32_t id, const std::string& port, const std::string& gw) {
    v1::ConfigItem item;
    item.set_key("nhg/" + std::to_string(id));
    item.mutable_nexthop_group()->set_id(id);
    auto* hop = item.mutable_nexthop_group()->add_nexthops();
    hop->set_port(port);
    hop->set_gateway(gw);
    return item;
  };
  ASSERT_TRUE(backend.Install(group(1, "Ethernet4", "100.64.0.3")).ok());    // the ECMP fallback
  ASSERT_TRUE(backend.Install(group(502, "Ethernet8", "100.64.0.5")).ok());  // the override's uplink
  v1::ConfigItem fallback;
  fallback.set_key("route/10.1.3.0/24");
  fallback.mutable_route()->set_prefix("10.1.3.0/24");
  fallback.mutable_route()->set_nexthop_group(1);
  ASSERT_TRUE(backend.Install(fallback).ok());
  v1::ConfigItem table_route;
  table_route.set_key("route/t202/10.1.3.0/24");
  table_route.mutable_route()->set_prefix("10.1.3.0/24");
  table_route.mutable_route()->set_nexthop_group(502);
  table_route.mutable_route()->set_table(202);
  ASSERT_TRUE(backend.Install(table_route).ok());
  v1::ConfigItem rule;
  rule.set_key("rule/Ethernet0/10.1.3.0/24");
  rule.mutable_rule()->set_priority(1000);
  rule.mutable_rule()->set_iif("Ethernet0");
  rule.mutable_rule()->set_prefix("10.1.3.0/24");
  rule.mutable_rule()->set_table(202);
  ASSERT_TRUE(backend.Install(rule).ok());
  EXPECT_NE(Ip({"rule", "show"}).find("1000:\tfrom all to 10.1.3.0/24 iif Ethernet0 lookup 202"), std::string::npos)
      << Ip({"rule", "show"});
  EXPECT_NE(Ip({"route", "show", "table", "202"}).find("10.1.3.0/24 nhid 502"), std::string::npos)
      << Ip({"route", "show", "table", "202"});
  // Where the kernel sends a packet that entered on Ethernet0 for the rack.
  auto egress = [&] {
    std::string route = Ip({"route", "get", "10.1.3.5", "from", "10.1.1.1", "iif", "Ethernet0"});
    return route;
  };
  EXPECT_NE(egress().find("dev Ethernet8"), std::string::npos) << egress();
  // The uplink loses carrier (its far end goes down): the table's route is
  // skipped and the main table's ECMP route carries the traffic.
  Ip({"link", "set", "pEthernet8", "down"});
  EXPECT_NE(egress().find("dev Ethernet4"), std::string::npos) << egress();
}

// What `tool args` says, and whether it succeeded.
bool Tool(const std::string& tool, std::vector<std::string> args, std::string* out) {
  args.insert(args.begin(), access(("/usr/sbin/" + tool).c_str(), X_OK) == 0 ? "/usr/sbin/" + tool : "/sbin/" + tool);
  std::string err;
  const bool ok = testing::RunCommand(args, out, &err) == 0;
  *out += err;
  return ok;
}

// QoS item by item, asserted against what this kernel and these ports offer,
// as iproute2's own `dcb` and `tc` find it: where they can, the backend must
// apply the item and the kernel must show it; where they cannot, the backend
// must answer unsupported with the reason. What could not be checked here is
// printed.
TEST_F(LinuxBackendTest, QosItemsAreAppliedWhereTheKernelCanAndUnsupportedWithAReasonWhereNot) {
  LinuxBackend backend("z1-rtsw01");
  std::vector<std::string> unchecked;
  auto item = [](const std::string& part) {
    v1::ConfigItem i;
    i.set_key("qos/" + part);
    return i;
  };

  // PFC, ETS and the DSCP map need DCB on every port.
  std::string shown;
  const bool dcb = Tool("dcb", {"pfc", "show", "dev", "Ethernet0"}, &shown);
  v1::ConfigItem pfc = item("pfc");
  pfc.mutable_qos()->mutable_qos()->add_pfc_priorities(3);
  v1::ConfigItem ets = item("ets");
  ets.mutable_qos()->mutable_qos()->set_strict_priority_tc(6);
  v1::ConfigItem dscp = item("dscp");
  auto* map = dscp.mutable_qos()->mutable_qos()->add_dscp_to_tc();
  map->set_dscp(26);
  map->set_tc(3);
  for (const v1::ConfigItem* i : {&pfc, &ets, &dscp}) {
    const absl::Status status = backend.Install(*i);
    if (dcb) {
      EXPECT_TRUE(status.ok()) << i->key() << ": " << status;
    } else {
      EXPECT_TRUE(absl::IsUnimplemented(status)) << i->key() << ": " << status;
      EXPECT_NE(std::string(status.message()).find("has no DCB"), std::string::npos) << status;
      EXPECT_NE(std::string(status.message()).find("2 of 2 ports"), std::string::npos) << status;
      EXPECT_TRUE(backend.Remove(*i).ok()) << "nothing to remove from a port that never took it";
    }
  }
  if (dcb) {
    ASSERT_TRUE(Tool("dcb", {"pfc", "show", "dev", "Ethernet0"}, &shown));
    EXPECT_NE(shown.find("pfc-enabled 3"), std::string::npos) << shown;
  } else {
    std::replace(shown.begin(), shown.end(), '\n', ' ');
    unchecked.push_back("PFC, ETS and the DSCP map as applied: these veth ports have no DCB (dcb: " + shown +
                        "); rocefab: " + std::string(backend.Install(pfc).message()));
  }

  // ECN marking: a RED qdisc, if the kernel has one.
  v1::ConfigItem ecn = item("ecn");
  auto* e = ecn.mutable_qos()->mutable_qos()->add_ecn();
  e->set_tc(3);
  e->set_min_bytes(150000);
  e->set_max_bytes(1500000);
  e->set_probability(0.1);
  const bool red = Tool("tc", {"qdisc", "add", "dev", "pEthernet0", "root", "red", "limit", "6000000", "min", "150000",
                               "max", "1500000", "avpkt", "4096", "burst", "100", "ecn", "probability", "0.1"},
                        &shown);
  const absl::Status ecn_status = backend.Install(ecn);
  if (red) {
    ASSERT_TRUE(ecn_status.ok()) << ecn_status;
    ASSERT_TRUE(Tool("tc", {"qdisc", "show", "dev", "Ethernet0"}, &shown));
    EXPECT_NE(shown.find("red"), std::string::npos) << shown;
    EXPECT_NE(shown.find("ecn"), std::string::npos) << shown;
    EXPECT_NE(shown.find("min 150000b"), std::string::npos) << shown;
    EXPECT_NE(shown.find("max 1500000b"), std::string::npos) << shown;
    ASSERT_TRUE(backend.Remove(ecn).ok());
    Tool("tc", {"qdisc", "show", "dev", "Ethernet0"}, &shown);
    EXPECT_EQ(shown.find("red"), std::string::npos) << shown;
  } else {
    EXPECT_TRUE(absl::IsUnimplemented(ecn_status)) << ecn_status;
    EXPECT_NE(std::string(ecn_status.message()).find("no RED qdisc (sch_red)"), std::string::npos) << ecn_status;
    std::replace(shown.begin(), shown.end(), '\n', ' ');
    unchecked.push_back("ECN thresholds as applied: this kernel has no RED qdisc (tc: " + shown + "); rocefab: " +
                        std::string(ecn_status.message()));
  }

  // Linux has neither a PFC watchdog nor shared-buffer profiles.
  v1::ConfigItem watchdog = item("pfc_watchdog");
  watchdog.mutable_qos()->mutable_qos()->mutable_pfc_watchdog()->set_detect_ms(200);
  const absl::Status wd = backend.Install(watchdog);
  EXPECT_TRUE(absl::IsUnimplemented(wd)) << wd;
  EXPECT_NE(std::string(wd.message()).find("no PFC watchdog"), std::string::npos);
  v1::ConfigItem buffer = item("buffer");
  buffer.mutable_qos()->mutable_buffer()->set_pool_bytes(32000000);
  EXPECT_TRUE(absl::IsUnimplemented(backend.Install(buffer)));
  for (const std::string& what : unchecked) std::cout << "not checked on this kernel: " << what << "\n";
}

// Each port's PFC priorities come from dcbnl where the port has DCB; a port
// without it reports no pfc_enabled at all (unknown is not off).
TEST_F(LinuxBackendTest, PfcEnabledIsReportedOnlyWherePortsAnswerDcbnl) {
  LinuxBackend backend("z1-rtsw01");
  std::string shown;
  const bool dcb = Tool("dcb", {"pfc", "show", "dev", "Ethernet0"}, &shown);
  if (dcb) ASSERT_TRUE(Tool("dcb", {"pfc", "set", "dev", "Ethernet0", "prio-pfc", "3:on"}, &shown)) << shown;
  auto reading = backend.ReadCounters();
  ASSERT_TRUE(reading.ok()) << reading.status();
  ASSERT_TRUE(reading->ports.count("Ethernet0"));
  const auto& per_prio = reading->ports.at("Ethernet0").per_prio;
  if (dcb) {
    ASSERT_TRUE(per_prio.count("pfc_enabled"));
    EXPECT_EQ(per_prio.at("pfc_enabled").at(3), 1u);
  } else {
    EXPECT_FALSE(per_prio.count("pfc_enabled")) << "a veth without DCB has no PFC setting to report";
    std::replace(shown.begin(), shown.end(), '\n', ' ');
    std::cout << "not checked on this kernel: pfc_enabled read back from a port with DCB; these veth ports have "
                 "none (dcb: "
              << shown << ")\n";
  }
}

// What a port's dcbnl answer becomes, with the kernel's answers given.
TEST(AddPfcEnabled, ThePortsPfcMaskPerPriorityAndNothingWithoutAnAnswer) {
  struct Fake : DcbSource {
    absl::StatusOr<DcbSettings> Read(const std::string& netdev) override {
      if (netdev == "Ethernet0") return DcbSettings{.pfc_en = uint8_t{0x18}, .dscp_to_prio = {}};
      if (netdev == "Ethernet4") return DcbSettings{};  // DCB, but no IEEE PFC from the driver
      return absl::UnimplementedError(netdev + " has no DCB");
    }
  } fake;
  SwitchReading reading;
  for (const char* port : {"Ethernet0", "Ethernet4", "Ethernet8"}) reading.ports[port].counters["rx_bytes"] = 1;
  AddPfcEnabled(fake, &reading);
  const auto& e0 = reading.ports.at("Ethernet0").per_prio.at("pfc_enabled");
  EXPECT_EQ(e0.size(), 8u);
  EXPECT_EQ(e0.at(3), 1u);
  EXPECT_EQ(e0.at(4), 1u);
  EXPECT_EQ(e0.at(0), 0u);
  EXPECT_FALSE(reading.ports.at("Ethernet4").per_prio.count("pfc_enabled"));
  EXPECT_FALSE(reading.ports.at("Ethernet8").per_prio.count("pfc_enabled"));
}

}  // namespace
}  // namespace rocefab::switchd
