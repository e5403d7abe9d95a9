// Tier 4: the linux backend against the real kernel. Four hosts, two rack
// switches and two spine switches are network namespaces joined by veth
// pairs; each switch runs rocefab-switchd --backend linux inside its
// namespace, and a real rocefab-controllerd pushes routing to them. The test
// reads the kernel's nexthops, routes and hash settings with `ip`, sends real
// UDP traffic to port 4791 from many source ports (standing for QPs), and
// reads where it went from the interfaces' counters. Needs root (CI is).
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/topology.h"
#include "lab/topology_gen.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

using testing::BinDir;
using testing::NotifySocket;
using testing::Subprocess;

std::string IpBinary() { return access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip" : "/sbin/ip"; }

class KernelFabric : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    std::string out, err;
    if (testing::RunCommand({IpBinary(), "netns", "list"}, &out, &err) != 0)
      GTEST_SKIP() << "ip netns is not available here: " << err;
    prefix_ = "rf" + std::to_string(getpid()) + "-";
    lab::TopologyParams params;
    params.racks_per_zone = 2;
    params.hosts_per_rack = 2;
    params.nics_per_host = 1;
    params.ctsw_per_zone = 2;
    proto_ = *lab::GenerateTopology(params);
    topo_ = *Topology::Build(proto_);
    {
      std::ofstream out_file(dir_ / "topology.yaml");
      WriteTopologyYaml(proto_, out_file);
    }
    for (const auto& sw : proto_.switches()) AddNs(sw.name());
    for (const auto& host : proto_.hosts()) AddNs(host.name());
    int n = 0;
    for (const auto& link : proto_.links()) {
      const std::string a = "rfa" + std::to_string(getpid() % 10000) + "x" + std::to_string(n);
      const std::string b = "rfb" + std::to_string(getpid() % 10000) + "x" + std::to_string(n++);
      ASSERT_EQ(Ip({"link", "add", a, "type", "veth", "peer", "name", b}), 0);
      for (auto [tmp, end] : {std::pair{a, link.a()}, std::pair{b, link.b()}}) {
        std::string_view dev, port;
        SplitPortName(end, &dev, &port);
        std::string name(port);
        if (const auto* host = topo_->FindHost(dev)) name = host->nics(0).netdev();
        ASSERT_EQ(Ip({"link", "set", tmp, "netns", Ns(std::string(dev)), "name", name}), 0);
        ASSERT_EQ(Ip({"-n", Ns(std::string(dev)), "link", "set", name, "up"}), 0);
      }
    }
    for (const auto& host : proto_.hosts()) {
      const auto& nic = host.nics(0);
      const std::string gw = nic.ip().substr(0, nic.ip().rfind('.')) + ".254";
      ASSERT_EQ(Ip({"-n", Ns(host.name()), "addr", "add", nic.ip() + "/32", "dev", nic.netdev()}), 0);
      ASSERT_EQ(Ip({"-n", Ns(host.name()), "route", "add", gw, "dev", nic.netdev(), "scope", "link"}), 0);
      ASSERT_EQ(Ip({"-n", Ns(host.name()), "route", "add", "default", "via", gw}), 0);
    }
    // The switches forward, and multipath return paths are not reverse-path filtered.
    for (const auto& sw : proto_.switches())
      for (const char* setting : {"net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0",
                                  "net.ipv4.conf.default.rp_filter=0",
                                  "net.ipv6.conf.all.disable_ipv6=1"})
        ASSERT_EQ(testing::RunCommand({IpBinary(), "netns", "exec", Ns(sw.name()), "/usr/sbin/sysctl", "-qw", setting}, nullptr), 0);

    std::vector<std::string> identities = {"rocefab-collectord", "rocefab-controllerd", "alice"};
    for (const auto& sw : proto_.switches()) identities.push_back(sw.name());
    ca_.Issue(identities);
    auto collector = testing::StartDaemon(
        testing::With({BinDir() + "/rocefab-collectord", "--listen", "unix:" + dir_ / "collector.sock",
                       "--metrics-listen", "127.0.0.1:0", "--db", dir_ / "collector.db"},
                      ca_.Flags("rocefab-collectord")),
        dir_ / "collector.log");
    ASSERT_FALSE(collector.status.empty()) << testing::ReadFile(dir_ / "collector.log");
    collector_ = std::move(collector.process);
    for (const auto& sw : proto_.switches()) StartSwitchd(sw.name());
    nlohmann::json agents = nlohmann::json::object();
    for (const auto& sw : proto_.switches()) agents[sw.name()] = "unix:" + dir_ / (sw.name() + ".sock");
    testing::WriteFile(dir_ / "endpoints.json", nlohmann::json{{"switch_agents", agents}}.dump());
    // The shipped policies' QoS: each item is applied where the kernel can
    // and reported unsupported with its reason where it cannot.
    testing::WriteFile(dir_ / "eecmp.yaml",
                       "default_scheme: eecmp\nmin_uplink_capacity: 0.5\nqos:\n"
                       "  dscp_to_tc: [{dscp: 26, tc: 3}, {dscp: 48, tc: 6}]\n  lossless_tcs: [3]\n"
                       "  pfc_priorities: [3]\n"
                       "  ecn: [{tc: 3, min_bytes: 150000, max_bytes: 1500000, probability: 0.1}]\n"
                       "  strict_priority_tc: 6\n  pfc_watchdog: {detect_ms: 200, restore_ms: 400, action: drop}\n");
    testing::WriteFile(dir_ / "pinning.yaml", "default_scheme: path_pinning\nmin_uplink_capacity: 0.5\n");
  }

  void TearDown() override {
    controller_.reset();
    switchds_.clear();
    collector_.reset();
    for (const auto& ns : namespaces_) Ip({"netns", "del", ns});
  }

  std::string Ns(const std::string& device) const { return prefix_ + device; }
  void AddNs(const std::string& device) {
    ASSERT_EQ(Ip({"netns", "add", Ns(device)}), 0);
    namespaces_.push_back(Ns(device));
    ASSERT_EQ(Ip({"-n", Ns(device), "link", "set", "lo", "up"}), 0);
  }
  static int Ip(std::vector<std::string> args, std::string* out = nullptr) {
    args.insert(args.begin(), IpBinary());
    std::string o, e;
    const int rc = testing::RunCommand(args, &o, &e);
    if (out) *out = o;
    if (rc != 0) ADD_FAILURE() << "ip " << args[1] << " " << (args.size() > 2 ? args[2] : "") << ": " << e;
    return rc;
  }

  void StartSwitchd(const std::string& sw) {
    auto switchd = testing::StartDaemon(
        testing::With({IpBinary(), "netns", "exec", Ns(sw), BinDir() + "/rocefab-switchd", "--backend", "linux",
                       "--state-dir", dir_ / "state", "--switch-name", sw, "--listen",
                       "unix:" + dir_ / (sw + ".sock"), "--collector", "unix:" + dir_ / "collector.sock"},
                      ca_.Flags(sw)),
        dir_ / ("switchd-" + sw + ".log"));
    ASSERT_FALSE(switchd.status.empty()) << testing::ReadFile(dir_ / ("switchd-" + sw + ".log"));
    switchds_[sw] = std::move(switchd.process);
  }

  void StartController(const std::string& policy, const std::string& config_yaml = "") {
    controller_.reset();
    std::vector<std::string> argv = {BinDir() + "/rocefab-controllerd", "--listen", "unix:" + dir_ / "controller.sock",
                                     "--db", dir_ / "controller.db", "--topology", dir_ / "topology.yaml",
                                     "--policy", dir_ / policy, "--switch-agents-json", dir_ / "endpoints.json",
                                     "--grant", "admin=alice"};
    if (!config_yaml.empty()) {
      testing::WriteFile(dir_ / "controllerd.yaml", config_yaml);
      argv.push_back("--config");
      argv.push_back(dir_ / "controllerd.yaml");
    }
    auto controller = testing::StartDaemon(testing::With(argv, ca_.Flags("rocefab-controllerd")),
                                           dir_ / "controller.log");
    ASSERT_FALSE(controller.status.empty()) << testing::ReadFile(dir_ / "controller.log");
    controller_ = std::move(controller.process);
  }

  int Cli(std::vector<std::string> args, std::string* out) {
    args.insert(args.begin(), {BinDir() + "/rocefab", "--controller", "unix:" + dir_ / "controller.sock"});
    for (const auto& flag : ca_.Flags("alice")) args.push_back(flag);
    std::string err;
    const int rc = testing::RunCommand(args, out, &err);
    if (rc != 0) *out += err;
    return rc;
  }

  uint64_t TxPackets(const std::string& sw, const std::string& port) {
    std::string out;
    Ip({"-n", Ns(sw), "-j", "-s", "link", "show", "dev", port}, &out);
    auto json = nlohmann::json::parse(out, nullptr, false);
    if (json.is_discarded() || json.empty()) return 0;
    return json[0]["stats64"]["tx"]["packets"].get<uint64_t>();
  }

  // UDP to port 4791 from `flows` source ports, `per_flow` packets each,
  // sent from inside the host's namespace.
  void SendRoce(const std::string& host, const std::string& dst, int flows, int per_flow) {
    std::thread sender([&] {
      const int ns = open(("/run/netns/" + Ns(host)).c_str(), O_RDONLY | O_CLOEXEC);
      ASSERT_GE(ns, 0);
      ASSERT_EQ(setns(ns, CLONE_NEWNET), 0);
      close(ns);
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(4791);
      inet_pton(AF_INET, dst.c_str(), &to.sin_addr);
      char payload[256] = {};
      for (int f = 0; f < flows; ++f) {
        const int fd = socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in from{};
        from.sin_family = AF_INET;
        from.sin_port = htons(static_cast<uint16_t>(0xC000 + f * 97));  // QP-derived ports
        bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from);
        for (int i = 0; i < per_flow; ++i)
          sendto(fd, payload, sizeof payload, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
        close(fd);
      }
    });
    sender.join();
  }

  testing::TempDir dir_;
  testing::DevCa ca_;
  std::string prefix_;
  v1::Topology proto_;
  std::shared_ptr<const Topology> topo_;
  std::vector<std::string> namespaces_;
  std::unique_ptr<Subprocess> collector_, controller_;
  std::map<std::string, std::unique_ptr<Subprocess>> switchds_;
};

TEST_F(KernelFabric, EecmpSpreadsPinningPinsDrainEmptiesAndAKilledAgentConverges) {
  std::string out;
  StartController("eecmp.yaml");
  ASSERT_EQ(Cli({"config", "apply", "--gate-seconds", "0", "--why", "netns"}, &out), 0) << out;

  // The kernel holds what the controller asked for.
  std::string nh, routes, hash;
  Ip({"-n", Ns("z1-rtsw01"), "nexthop", "show"}, &nh);
  Ip({"-n", Ns("z1-rtsw01"), "route", "show"}, &routes);
  std::cout << "[kernel] z1-rtsw01 nexthops:\n" << nh << "[kernel] z1-rtsw01 routes:\n" << routes;
  EXPECT_NE(nh.find("id 1 group 1001/1002"), std::string::npos) << nh;
  EXPECT_NE(routes.find("10.1.2.0/24 nhid 1"), std::string::npos) << routes;
  EXPECT_NE(routes.find("10.1.1.1 dev Ethernet0"), std::string::npos) << routes;
  testing::RunCommand({IpBinary(), "netns", "exec", Ns("z1-rtsw01"), "/usr/sbin/sysctl", "-n",
                       "net.ipv4.fib_multipath_hash_policy"}, &hash);
  EXPECT_EQ(hash, "3\n");
  // QoS: PFC, ETS and the DSCP map need DCB, which veth lacks; Linux has no
  // PFC watchdog; ECN needs a RED qdisc, which this kernel may lack.
  std::string probe;
  const bool red = testing::RunCommand({IpBinary(), "netns", "exec", Ns("z1-rtsw01"), "/usr/sbin/tc", "qdisc", "add",
                                        "dev", "lo", "root", "red", "limit", "6000000", "min", "150000", "max",
                                        "1500000", "avpkt", "4096", "burst", "100", "ecn", "probability", "0.1"},
                                       &probe, &probe) == 0;
  if (red)
    testing::RunCommand({IpBinary(), "netns", "exec", Ns("z1-rtsw01"), "/usr/sbin/tc", "qdisc", "del", "dev", "lo",
                         "root"}, &probe, &probe);
  else
    std::cout << "[kernel] no RED qdisc here: qos/ecn is expected unsupported, its applied form unchecked\n";
  ASSERT_EQ(Cli({"config", "status", "-o", "json"}, &out), 0);
  {
    const auto status = nlohmann::json::parse(out);
    for (const auto& s : status["switches"]) {
      EXPECT_FALSE(s["drift"].get<bool>()) << s.dump();
      EXPECT_EQ(s["unsupported_items"], red ? 4 : 5) << "qos/pfc, qos/ets, qos/dscp, qos/pfc_watchdog"
                                                     << (red ? "" : " and qos/ecn");
    }
  }
  std::string items;
  ASSERT_EQ(Cli({"config", "status"}, &items), 0) << items;
  std::cout << "[controller] rocefab config status:\n" << items;
  EXPECT_NE(items.find("qos/pfc"), std::string::npos) << items;
  EXPECT_NE(items.find("has no DCB"), std::string::npos) << items;
  EXPECT_NE(items.find("no PFC watchdog"), std::string::npos) << items;
  // Warm up neighbours (ARP along the path) and wait until the rack switch
  // has resolved both uplink gateways, then 64 "QPs" of traffic from rack 1
  // to rack 2.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        SendRoce("z1-r01-h1", "10.1.2.1", 16, 1);
        std::string neigh;
        Ip({"-n", Ns("z1-rtsw01"), "neigh", "show"}, &neigh);
        return neigh.find("100.64.0.5 dev Ethernet8 lladdr") != std::string::npos &&
               neigh.find("100.64.0.7 dev Ethernet12 lladdr") != std::string::npos;
      },
      std::chrono::seconds(10)));
  auto split = [&](int flows) {
    const uint64_t a0 = TxPackets("z1-rtsw01", "Ethernet8"), b0 = TxPackets("z1-rtsw01", "Ethernet12");
    SendRoce("z1-r01-h1", "10.1.2.1", flows, 50);
    return std::pair<uint64_t, uint64_t>(TxPackets("z1-rtsw01", "Ethernet8") - a0,
                                         TxPackets("z1-rtsw01", "Ethernet12") - b0);
  };
  auto [e8, e12] = split(64);
  std::cout << "[traffic] eecmp: Ethernet8 " << e8 << " Ethernet12 " << e12 << "\n";
  EXPECT_GE(e8 + e12, 64u * 50 * 9 / 10);
  EXPECT_GT(std::min(e8, e12), (e8 + e12) / 5) << "both uplinks carry QPs";

  StartController("pinning.yaml");
  ASSERT_EQ(Cli({"config", "apply", "--gate-seconds", "0", "--why", "pin"}, &out), 0) << out;
  auto [p8, p12] = split(64);
  std::cout << "[traffic] path-pinning: Ethernet8 " << p8 << " Ethernet12 " << p12 << "\n";
  EXPECT_GE(std::max(p8, p12), (p8 + p12) * 99 / 100) << "one destination slice, one uplink";
  const std::string pinned = p8 > p12 ? "Ethernet8" : "Ethernet12";

  ASSERT_EQ(Cli({"drain", "link", "z1-rtsw01/" + pinned, "--reason", "netns test"}, &out), 0) << out;
  SendRoce("z1-r01-h1", "10.1.2.1", 4, 2);
  auto [d8, d12] = split(16);
  std::cout << "[traffic] drained " << pinned << ": Ethernet8 " << d8 << " Ethernet12 " << d12 << "\n";
  // No data: at most a stray control packet (an ARP probe of the old
  // neighbour) against the 800 that went the other way.
  EXPECT_LE(pinned == "Ethernet8" ? d8 : d12, 2u) << "a drained uplink carries no traffic";
  EXPECT_GE(d8 + d12, 16u * 50 * 9 / 10);
  ASSERT_EQ(Cli({"undrain", "link", "z1-rtsw01/" + pinned}, &out), 0) << out;

  // SIGKILL a switch agent in the middle of an apply, restart it, apply
  // again: everything converges on one generation.
  StartController("eecmp.yaml");
  Subprocess apply({testing::With({BinDir() + "/rocefab", "--controller", "unix:" + dir_ / "controller.sock",
                                   "config", "apply", "--gate-seconds", "0", "--canary", "4"},
                                  ca_.Flags("alice")),
                    {}, dir_ / "apply1.out", dir_ / "apply1.out"});
  switchds_["z1-rtsw01"]->Signal(SIGKILL);
  switchds_["z1-rtsw01"]->Wait();
  apply.Wait();
  StartSwitchd("z1-rtsw01");
  ASSERT_EQ(Cli({"config", "apply", "--gate-seconds", "0", "--why", "after restart"}, &out), 0) << out;
  ASSERT_EQ(Cli({"config", "status", "-o", "json"}, &out), 0);
  const auto status = nlohmann::json::parse(out);
  std::set<uint64_t> generations;
  for (const auto& s : status["switches"]) {
    EXPECT_FALSE(s["drift"].get<bool>()) << s.dump();
    generations.insert(std::stoull(s["applied_generation"].get<std::string>()));
  }
  EXPECT_EQ(generations.size(), 1u) << out;
  Ip({"-n", Ns("z1-rtsw01"), "nexthop", "show"}, &nh);
  EXPECT_NE(nh.find("group 1001/1002"), std::string::npos) << nh;

  // An agent that stops answering (stopped, as behind a partition) during an
  // apply: its wave fails within the per-switch deadline and names it; the
  // others are not held up, and status still answers for all.
  StartController("pinning.yaml", "agent_timeout: 2s\nunreachable: fail\n");
  switchds_["z1-ctsw02"]->Signal(SIGSTOP);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Cli({"config", "apply", "--gate-seconds", "0", "--why", "partition"}, &out), 1) << out;
  const double apply_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(out.find("z1-ctsw02"), std::string::npos) << out;
  EXPECT_LT(apply_s, 8.0) << "one deadline, not one per call";
  ASSERT_EQ(Cli({"config", "status", "-o", "json"}, &out), 0) << out;
  int unreachable = 0;
  const nlohmann::json partitioned = nlohmann::json::parse(out);
  for (const auto& s : partitioned["switches"]) unreachable += !s.value("error", "").empty();
  EXPECT_EQ(unreachable, 1) << out;
  switchds_["z1-ctsw02"]->Signal(SIGCONT);
  ASSERT_EQ(Cli({"config", "apply", "--gate-seconds", "0", "--why", "healed"}, &out), 0) << out;
  std::cout << "[partition] apply with a stopped agent failed in " << apply_s << " s\n";
}

}  // namespace
}  // namespace rocefab
