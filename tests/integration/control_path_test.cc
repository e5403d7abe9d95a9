// Tier 3: the control path as real processes on loopback. rocefab-controllerd
// rolls policy out to four rocefab-switchd (file backend), with two
// rocefab-collectord shards watching for the health gate (the switches
// report to the second, so a gate that asked only the first would see
// nothing); the operator drives it with the rocefab CLI.
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <fstream>
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

class ControlPath : public ::testing::Test {
 protected:
  void SetUp() override {
    lab::TopologyParams params;
    params.racks_per_zone = 2;
    params.hosts_per_rack = 1;
    params.nics_per_host = 2;
    params.ctsw_per_zone = 2;
    proto_ = *lab::GenerateTopology(params);
    topo_ = *Topology::Build(proto_);
    {
      std::ofstream out(dir_ / "topology.yaml");
      WriteTopologyYaml(proto_, out);
    }
    testing::WriteFile(dir_ / "policy-ecmp.yaml", "default_scheme: ecmp\nmin_uplink_capacity: 0.5\n");
    testing::WriteFile(dir_ / "policy-eecmp.yaml", "default_scheme: eecmp\nmin_uplink_capacity: 0.5\n");
    for (const auto& sw : proto_.switches()) WriteCounters(sw.name(), 0);

    auto collector = testing::StartDaemon({BinDir() + "/rocefab-collectord", "--listen", "127.0.0.1:0",
                                           "--metrics-listen", "127.0.0.1:0", "--db", dir_ / "collector.db"},
                                          dir_ / "collector.log");
    ASSERT_FALSE(collector.status.empty()) << testing::ReadFile(dir_ / "collector.log");
    collector_ = std::move(collector.process);
    collector_address_ = testing::StatusField(collector.status, "grpc");
    auto shard = testing::StartDaemon({BinDir() + "/rocefab-collectord", "--listen", "127.0.0.1:0",
                                       "--metrics-listen", "127.0.0.1:0", "--db", dir_ / "shard2.db"},
                                      dir_ / "shard2.log");
    ASSERT_FALSE(shard.status.empty()) << testing::ReadFile(dir_ / "shard2.log");
    shard_ = std::move(shard.process);
    shard_address_ = testing::StatusField(shard.status, "grpc");

    NotifySocket agents_ready;
    nlohmann::json agents = nlohmann::json::object();
    for (const auto& sw : proto_.switches()) {
      switchds_.push_back(std::make_unique<Subprocess>(Subprocess::Options{
          {BinDir() + "/rocefab-switchd", "--collector", shard_address_, "--interval", "100ms",
           "--state-dir", dir_ / "switches", "--switch-name", sw.name(), "--listen", "127.0.0.1:0"},
          {{"NOTIFY_SOCKET", agents_ready.path()}},
          "",
          dir_ / ("switchd-" + sw.name() + ".log")}));
    }
    for (size_t i = 0; i < switchds_.size(); ++i) {
      auto status = agents_ready.WaitReady(std::chrono::seconds(20));
      ASSERT_TRUE(status.has_value());
      agents[testing::StatusField(*status, "switch")] = testing::StatusField(*status, "grpc");
    }
    testing::WriteFile(dir_ / "endpoints.json", nlohmann::json{{"switch_agents", agents}}.dump());
    StartController("policy-ecmp.yaml");
  }

  void StartController(const std::string& policy) {
    if (controller_) {
      controller_->Signal(SIGTERM);
      controller_->Wait();
    }
    auto controller = testing::StartDaemon(
        {BinDir() + "/rocefab-controllerd", "--listen", "127.0.0.1:0", "--db", dir_ / "controller.db",
         "--topology", dir_ / "topology.yaml", "--policy", dir_ / policy, "--collector",
         collector_address_ + "," + shard_address_, "--switch-agents-json", dir_ / "endpoints.json"},
        dir_ / "controller.log");
    ASSERT_FALSE(controller.status.empty()) << testing::ReadFile(dir_ / "controller.log");
    controller_ = std::move(controller.process);
    controller_address_ = testing::StatusField(controller.status, "grpc");
  }

  // The switch's counters file, as the lab would write it: every cabled port.
  void WriteCounters(const std::string& sw, uint64_t flaps) {
    nlohmann::json ports = nlohmann::json::object();
    for (const auto& port : topo_->PortsOf(sw)) ports[port] = {{"rx_bytes", 0}, {"link_up", 1}, {"link_flaps", flaps}};
    testing::WriteFile(dir_ / ("switches/" + sw + "/counters.json"),
                       nlohmann::json{{"switch", sw}, {"ports", ports}}.dump());
  }

  int Cli(std::vector<std::string> args, std::string* out, std::string* err) {
    args.insert(args.begin(), {BinDir() + "/rocefab", "--controller", controller_address_});
    return testing::RunCommand(args, out, err);
  }

  nlohmann::json Applied(const std::string& sw) {
    return nlohmann::json::parse(testing::ReadFile(dir_ / ("switches/" + sw + "/applied.json")));
  }

  testing::TempDir dir_;
  v1::Topology proto_;
  std::shared_ptr<const Topology> topo_;
  std::unique_ptr<Subprocess> collector_, shard_, controller_;
  std::vector<std::unique_ptr<Subprocess>> switchds_;
  std::string collector_address_, shard_address_, controller_address_;
};

TEST_F(ControlPath, PlanApplyStatusHistoryDrainAndAGateThatRollsBack) {
  std::string out, err;
  ASSERT_EQ(Cli({"config", "plan"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("4 switch(es) to change"), std::string::npos) << out;

  ASSERT_EQ(Cli({"config", "apply", "--canary", "1", "--wave-size", "2", "--gate-seconds", "1",
                 "--why", "first rollout"},
                &out, &err),
            0)
      << out << err;
  EXPECT_NE(out.find("canary"), std::string::npos) << out;
  EXPECT_NE(out.find("applied in 3 wave(s)"), std::string::npos) << out;
  ASSERT_EQ(Cli({"config", "status", "-o", "json"}, &out, &err), 0);
  const nlohmann::json parsed_switches = nlohmann::json::parse(out);
  for (const auto& s : parsed_switches["switches"]) {
    EXPECT_FALSE(s["drift"].get<bool>()) << s.dump();
    EXPECT_EQ(s["applied_generation"], s["desired_generation"]);
  }
  EXPECT_EQ(Applied("z1-rtsw01")["scheme"], "ROUTING_SCHEME_ECMP");
  ASSERT_EQ(Cli({"config", "plan"}, &out, &err), 0);
  EXPECT_NE(out.find("0 switch(es) to change, 4 in sync"), std::string::npos) << out;

  // Drain: one of rtsw01's two uplinks keeps 50%, the policy's minimum; the
  // second would leave nothing, so it is refused unless forced.
  const std::string up1 = "z1-rtsw01/Ethernet8", up2 = "z1-rtsw01/Ethernet12";
  ASSERT_EQ(Cli({"drain", "link", up1, "--reason", "flapping optic"}, &out, &err), 0) << err;
  for (const auto& hop : Applied("z1-rtsw01")["items"]) {
    if (!hop.contains("nexthop_group")) continue;
    for (const auto& nh : hop["nexthop_group"]["nexthops"]) EXPECT_NE(nh["port"], "Ethernet8");
  }
  EXPECT_EQ(Cli({"drain", "link", up2, "--reason", "second optic"}, &out, &err), 1);
  EXPECT_NE(err.find("would keep 0% of its uplink capacity"), std::string::npos) << err;
  EXPECT_EQ(Cli({"drain", "link", up1}, &out, &err), 2) << "a drain needs a reason";
  ASSERT_EQ(Cli({"undrain", "link", up1}, &out, &err), 0) << err;

  // A new policy, and a canary whose switch starts flapping during the gate:
  // the rollout stops and the canary goes back to what it had.
  StartController("policy-eecmp.yaml");
  std::atomic<bool> flapping{true};
  std::thread flapper([&] {
    // Keep link_flaps rising on every switch while the apply runs.
    for (uint64_t flaps = 1; flapping; ++flaps) {
      for (const auto& sw : proto_.switches()) WriteCounters(sw.name(), flaps);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const int code = Cli({"config", "apply", "--canary", "1", "--gate-seconds", "1", "--why", "eecmp"},
                       &out, &err);
  flapping = false;
  flapper.join();
  EXPECT_EQ(code, 1) << out << err;
  std::cout << "[rollback]\n" << out;
  EXPECT_NE(out.find("rolled back"), std::string::npos) << out;
  EXPECT_NE(out.find("link_flaps rose"), std::string::npos) << out;
  // Everything runs ECMP still; the canary at a new generation.
  for (const auto& sw : proto_.switches()) EXPECT_EQ(Applied(sw.name())["scheme"], "ROUTING_SCHEME_ECMP") << sw.name();

  ASSERT_EQ(Cli({"config", "history", "-o", "json"}, &out, &err), 0);
  std::vector<std::string> actions;
  const nlohmann::json parsed_entries = nlohmann::json::parse(out);
  for (const auto& e : parsed_entries["entries"]) actions.push_back(e["action"]);
  for (const char* action : {"compile", "apply-start", "apply-done", "drain", "undrain", "rollback"})
    EXPECT_NE(std::find(actions.begin(), actions.end(), action), actions.end()) << action;
}

}  // namespace
}  // namespace rocefab
