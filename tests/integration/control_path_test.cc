// Tier 3: the control path as real processes on loopback. rocefab-controllerd
// rolls policy out to four rocefab-switchd (file backend), with two
// rocefab-collectord shards watching for the health gate (the switches
// report to the second, so a gate that asked only the first would see
// nothing); the operator drives it with the rocefab CLI.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <future>
#include <iomanip>
#include <set>
#include <sstream>

#include "common/authz.h"
#include "common/clock.h"
#include "common/topology.h"
#include "rocefab/v1/control.grpc.pb.h"
#include "rocefab/v1/query.grpc.pb.h"
#include "rocefab/v1/telemetry.grpc.pb.h"
#include "lab/topology_gen.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

using testing::BinDir;
using testing::NotifySocket;
using testing::Subprocess;

constexpr char kCollectorViewers[] = "viewer=vera,rocefab-controllerd";

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
    std::vector<std::string> identities = {"rocefab-collectord", "rocefab-controllerd", "alice", "vera",
                                           "oscar", "ada", "nobody"};
    for (const auto& sw : proto_.switches()) identities.push_back(sw.name());
    ca_.Issue(identities);

    // Two collector shards with the same grants; the switches report to the second.
    auto start_collector = [&](const std::string& name) {
      return testing::StartDaemon(
          testing::With({BinDir() + "/rocefab-collectord", "--listen", "127.0.0.1:0", "--metrics-listen",
                         "127.0.0.1:0", "--db", dir_ / (name + ".db"), "--topology", dir_ / "topology.yaml",
                         "--grant", kCollectorViewers, "--grant", "operator=oscar", "--grant", "admin=ada",
                         "--grant", "agent=z1-*"},
                        ca_.Flags("rocefab-collectord")),
          dir_ / (name + ".log"));
    };
    auto collector = start_collector("collector");
    ASSERT_FALSE(collector.status.empty()) << testing::ReadFile(dir_ / "collector.log");
    collector_ = std::move(collector.process);
    collector_address_ = testing::StatusField(collector.status, "grpc");
    collector_metrics_ = testing::StatusField(collector.status, "metrics");
    auto shard = start_collector("shard2");
    ASSERT_FALSE(shard.status.empty()) << testing::ReadFile(dir_ / "shard2.log");
    shard_ = std::move(shard.process);
    shard_address_ = testing::StatusField(shard.status, "grpc");

    NotifySocket agents_ready;
    nlohmann::json agents = nlohmann::json::object();
    for (const auto& sw : proto_.switches()) {
      switchds_.push_back(std::make_unique<Subprocess>(Subprocess::Options{
          testing::With({BinDir() + "/rocefab-switchd", "--collector", shard_address_, "--interval", "100ms",
                         "--state-dir", dir_ / "switches", "--switch-name", sw.name(), "--listen", "127.0.0.1:0",
                         "--grant", "viewer=vera", "--metrics-listen", "127.0.0.1:0"},
                        ca_.Flags(sw.name())),
          {{"NOTIFY_SOCKET", agents_ready.path()}},
          "",
          dir_ / ("switchd-" + sw.name() + ".log")}));
    }
    for (size_t i = 0; i < switchds_.size(); ++i) {
      auto status = agents_ready.WaitReady(std::chrono::seconds(20));
      ASSERT_TRUE(status.has_value());
      agents[testing::StatusField(*status, "switch")] = testing::StatusField(*status, "grpc");
      if (testing::StatusField(*status, "switch") == "z1-rtsw01") {
        agent_address_ = testing::StatusField(*status, "grpc");
        agent_metrics_ = testing::StatusField(*status, "metrics");
      }
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
        testing::With({BinDir() + "/rocefab-controllerd", "--listen", "127.0.0.1:0", "--db", dir_ / "controller.db",
                       "--topology", dir_ / "topology.yaml", "--policy", dir_ / policy, "--collector",
                       collector_address_ + "," + shard_address_, "--switch-agents-json", dir_ / "endpoints.json",
                       "--grant", "viewer=vera", "--grant", "operator=oscar", "--grant", "admin=alice,ada",
                       "--metrics-listen", "127.0.0.1:0"},
                      ca_.Flags("rocefab-controllerd")),
        dir_ / "controller.log");
    ASSERT_FALSE(controller.status.empty()) << testing::ReadFile(dir_ / "controller.log");
    controller_ = std::move(controller.process);
    controller_address_ = testing::StatusField(controller.status, "grpc");
    controller_metrics_ = testing::StatusField(controller.status, "metrics");
  }

  // The switch's counters file, as the lab would write it: every cabled
  // port. `noise` adds drops on the lossy queue 0 and a trickle of FCS
  // errors, which no detector calls a fault.
  void WriteCounters(const std::string& sw, uint64_t flaps, uint64_t noise = 0) {
    nlohmann::json ports = nlohmann::json::object();
    for (const auto& port : topo_->PortsOf(sw))
      ports[port] = {{"rx_bytes", 0},
                     {"link_up", 1},
                     {"link_flaps", flaps},
                     {"rx_fcs_errors", noise},
                     {"queues", {{"0", {{"queue_drops", noise * 1000}}}}}};
    // Atomically, as the lab writes it: switchd may be reading the file.
    const std::string path = dir_ / ("switches/" + sw + "/counters.json");
    testing::WriteFile(path + ".tmp", nlohmann::json{{"switch", sw}, {"ports", ports}}.dump());
    std::filesystem::rename(path + ".tmp", path);
  }

  int Cli(std::vector<std::string> args, std::string* out, std::string* err) {
    args.insert(args.begin(), {BinDir() + "/rocefab", "--controller", controller_address_});
    for (const auto& flag : ca_.Flags("alice")) args.push_back(flag);
    return testing::RunCommand(args, out, err);
  }

  nlohmann::json Applied(const std::string& sw) {
    return nlohmann::json::parse(testing::ReadFile(dir_ / ("switches/" + sw + "/applied.json")));
  }

  testing::TempDir dir_;
  testing::DevCa ca_;
  v1::Topology proto_;
  std::shared_ptr<const Topology> topo_;
  std::unique_ptr<Subprocess> collector_, shard_, controller_;
  std::vector<std::unique_ptr<Subprocess>> switchds_;
  std::string collector_address_, shard_address_, controller_address_, agent_address_;
  std::string collector_metrics_, controller_metrics_, agent_metrics_;
};

TEST_F(ControlPath, PlanApplyStatusHistoryDrainAndAGateThatRollsBack) {
  std::string out, err;
  ASSERT_EQ(Cli({"config", "plan"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("4 switch(es) to change"), std::string::npos) << out;

  // Lossy-queue drops and a trickle of FCS errors during every gate: a gate
  // that failed on any queue_drops or FCS error (before) rolled this back.
  std::atomic<bool> noisy{true};
  std::thread noise([&] {
    for (uint64_t n = 1; noisy; ++n) {
      for (const auto& sw : proto_.switches()) WriteCounters(sw.name(), 0, n);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const int first = Cli({"config", "apply", "--canary", "1", "--wave-size", "2", "--gate-seconds", "1",
                         "--why", "first rollout"},
                        &out, &err);
  noisy = false;
  noise.join();
  ASSERT_EQ(first, 0) << out << err;
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
  // The preview first: the rack's capacity, and nothing pushed.
  ASSERT_EQ(Cli({"drain", "link", up1, "--reason", "flapping optic", "--dry-run"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("capacity check"), std::string::npos) << out;
  EXPECT_NE(out.find("z1-rtsw01"), std::string::npos) << out;
  EXPECT_NE(out.find("50%"), std::string::npos) << out;
  EXPECT_NE(out.find("nothing changed"), std::string::npos) << out;
  // A mistyped port: a usage error naming the nearest ports.
  EXPECT_EQ(Cli({"drain", "link", "z1-rtsw01/Ethernet9", "--reason", "typo"}, &out, &err), 2);
  EXPECT_NE(err.find("has no port 'Ethernet9' in the topology; nearest known: "), std::string::npos) << err;
  EXPECT_NE(err.find("z1-rtsw01/Ethernet8"), std::string::npos) << err;
  // A port facing a host: refused, it is the NIC's only link.
  {
    const std::string nic = proto_.hosts(0).name() + "/" + proto_.hosts(0).nics(0).name();
    const std::string facing = topo_->PeerOf(topo_->LinkOfPort(nic), nic);
    EXPECT_EQ(Cli({"drain", "link", facing, "--reason", "typo"}, &out, &err), 1);
    EXPECT_NE(err.find("the only link of NIC " + nic), std::string::npos) << err;
  }
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
    // Once the canary runs the new config (its agent wrote it), links start
    // flapping: a fault that begins inside the gate, however slowly the
    // apply got there on a loaded machine. Then keep link_flaps rising on
    // every switch until the apply returns.
    testing::WaitFor(
        [&] {
          auto applied = nlohmann::json::parse(testing::ReadFile(dir_ / "switches/z1-ctsw01/applied.json"), nullptr, false);
          return !flapping || (!applied.is_discarded() && applied.value("scheme", "") == "ROUTING_SCHEME_EECMP");
        },
        std::chrono::seconds(60));
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
  EXPECT_NE(out.find("link_flap on z1-"), std::string::npos) << out;
  // Everything runs ECMP still; the canary at a new generation.
  for (const auto& sw : proto_.switches()) EXPECT_EQ(Applied(sw.name())["scheme"], "ROUTING_SCHEME_ECMP") << sw.name();

  ASSERT_EQ(Cli({"config", "history", "-o", "json"}, &out, &err), 0);
  std::vector<std::string> actions;
  const nlohmann::json parsed_entries = nlohmann::json::parse(out);
  for (const auto& e : parsed_entries["entries"]) actions.push_back(e["action"]);
  for (const char* action : {"compile", "apply-start", "apply-done", "drain", "undrain", "rollback"})
    EXPECT_NE(std::find(actions.begin(), actions.end(), action), actions.end()) << action;
  // The controller counted the rollback, and no rollout runs now.
  auto metrics = testing::HttpGet(controller_metrics_, "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_NE(metrics->find("rocefab_controller_rollouts_total{result=\"rolled_back\"} 1\n"), std::string::npos)
      << *metrics;
  EXPECT_NE(metrics->find("rocefab_controller_rollout_active 0\n"), std::string::npos) << *metrics;
}

// The real daemons, under mutual TLS: an operator drains a link while an
// admin's rollout sits in a 60 s gate, then the admin aborts it.
TEST_F(ControlPath, ADrainDuringARolloutAnswersInUnderASecondAndAbortRollsBack) {
  std::string out, err;
  ASSERT_EQ(Cli({"config", "apply", "--gate-seconds", "0", "--why", "first"}, &out, &err), 0) << out << err;
  StartController("policy-eecmp.yaml");
  Subprocess apply({testing::With({BinDir() + "/rocefab", "--controller", controller_address_, "config", "apply",
                                   "--canary", "1", "--gate-seconds", "60", "--why", "slow rollout"},
                                  ca_.Flags("alice")),
                    {},
                    dir_ / "apply.out",
                    dir_ / "apply.out"});
  // The canary runs the new config: the rollout is in its gate.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto applied = nlohmann::json::parse(testing::ReadFile(dir_ / "switches/z1-ctsw01/applied.json"), nullptr, false);
        return !applied.is_discarded() && applied.value("scheme", "") == "ROUTING_SCHEME_EECMP";
      },
      std::chrono::seconds(30)));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> drain = {BinDir() + "/rocefab", "--controller", controller_address_, "drain", "link",
                                    "z1-rtsw01/Ethernet8", "--reason", "optic"};
  for (const auto& flag : ca_.Flags("oscar")) drain.push_back(flag);
  ASSERT_EQ(testing::RunCommand(drain, &out, &err), 0) << out << err;
  const double drain_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(drain_ms, 1000) << "the drain waited for the rollout";
  std::cout << "[drain during rollout] " << out << "  took " << drain_ms << " ms (CLI process, mTLS, push)\n";
  EXPECT_EQ(Cli({"config", "abort", "--why", "test"}, &out, &err), 0) << out << err;
  EXPECT_EQ(apply.Wait(), 1) << testing::ReadFile(dir_ / "apply.out");
  EXPECT_NE(testing::ReadFile(dir_ / "apply.out").find("aborted by alice"), std::string::npos)
      << testing::ReadFile(dir_ / "apply.out");
  // Everything back on ECMP, and the drain kept.
  for (const auto& sw : proto_.switches()) EXPECT_EQ(Applied(sw.name())["scheme"], "ROUTING_SCHEME_ECMP") << sw.name();
  for (const auto& hop : Applied("z1-rtsw01")["items"]) {
    if (!hop.contains("nexthop_group")) continue;
    for (const auto& nh : hop["nexthop_group"]["nexthops"]) EXPECT_NE(nh["port"], "Ethernet8");
  }
  ASSERT_EQ(Cli({"config", "history", "-o", "json"}, &out, &err), 0);
  const nlohmann::json history = nlohmann::json::parse(out);
  bool oscar_drained = false;
  for (const auto& e : history["entries"])
    oscar_drained |= e["action"] == "drain" && e["who"] == "oscar";
  EXPECT_TRUE(oscar_drained) << "the audit log names the certificate's identity: " << out;
}

// A manual playbook run through the real CLI, collector and controller: it
// is one audit record, written at its first change and closed when it ends.
// Over the RPC, a run under way is continued only by the identity that
// recorded it, and a run that has ended is never changed.
TEST_F(ControlPath, APlaybookRunIsOneAuditRecordThatOnlyItsRecorderContinues) {
  testing::WriteFile(dir_ / "drain_now.yaml", R"(name: drain_now
description: drain a link, then check the jobs
target: a fabric link
steps:
  - {action: drain_link, reason: "optic"}
verify:
  - {check: jobs_healthy, timeout: 10s, window: 5s}
)");
  std::vector<std::string> run = {BinDir() + "/rocefab", "--controller", controller_address_, "--collector",
                                  collector_address_, "playbook", "run", dir_ / "drain_now.yaml", "--target",
                                  "z1-rtsw01/Ethernet8"};
  for (const auto& flag : ca_.Flags("oscar")) run.push_back(flag);
  std::string out, err;
  ASSERT_EQ(testing::RunCommand(run, &out, &err), 0) << out << err;
  EXPECT_NE(out.find("result: succeeded (audit record 1:"), std::string::npos) << out;

  auto stub_as = [&](const std::string& identity) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = testing::ReadFile(ca_.ca());
    options.pem_private_key = testing::ReadFile(ca_.key(identity));
    options.pem_cert_chain = testing::ReadFile(ca_.cert(identity));
    return v1::Query::NewStub(grpc::CreateChannel(collector_address_, grpc::SslCredentials(options)));
  };
  auto oscar = stub_as("oscar"), ada = stub_as("ada");
  auto list = [&] {
    grpc::ClientContext ctx;
    v1::ListPlaybookRunsResponse resp;
    EXPECT_TRUE(oscar->ListPlaybookRuns(&ctx, v1::ListPlaybookRunsRequest(), &resp).ok());
    return resp;
  };
  v1::ListPlaybookRunsResponse runs = list();
  ASSERT_EQ(runs.runs_size(), 1) << "recorded under way, then that record closed: " << runs.DebugString();
  EXPECT_EQ(runs.runs(0).result(), "succeeded");
  EXPECT_EQ(runs.runs(0).who(), "oscar") << "the certificate's identity";
  ASSERT_EQ(runs.runs(0).changes_size(), 1);
  EXPECT_NE(runs.runs(0).changes(0).find("drained link z1-rtsw01/Ethernet8"), std::string::npos);

  auto record = [](v1::Query::Stub& stub, const v1::PlaybookRun& r, uint64_t* id) {
    grpc::ClientContext ctx;
    v1::RecordPlaybookRunRequest req;
    *req.mutable_run() = r;
    v1::RecordPlaybookRunResponse resp;
    const grpc::Status s = stub.RecordPlaybookRun(&ctx, req, &resp);
    if (id != nullptr) *id = resp.id();
    return s.error_code();
  };
  v1::PlaybookRun under_way;
  under_way.set_playbook("drain_now");
  under_way.set_target("z1-rtsw01/Ethernet12");
  under_way.set_result("running");
  under_way.set_heard_us(1);  // the collector's clock decides, not the recorder's
  const int64_t before_us = SystemClock::Instance().NowUs();
  uint64_t id = 0;
  ASSERT_EQ(record(*oscar, under_way, &id), grpc::StatusCode::OK);
  EXPECT_EQ(id, 2u);
  {
    const v1::ListPlaybookRunsResponse listed = list();
    ASSERT_GE(listed.runs_size(), 1);
    EXPECT_EQ(listed.runs(0).id(), 2u);
    EXPECT_GE(listed.runs(0).heard_us(), before_us) << "stamped by the collector as it recorded the run";
    EXPECT_LE(listed.runs(0).heard_us(), SystemClock::Instance().NowUs());
  }
  under_way.set_id(id);
  under_way.set_result("succeeded");
  EXPECT_EQ(record(*ada, under_way, nullptr), grpc::StatusCode::PERMISSION_DENIED) << "oscar's run, not ada's";
  EXPECT_EQ(record(*oscar, under_way, nullptr), grpc::StatusCode::OK);
  under_way.set_result("failed");
  EXPECT_EQ(record(*oscar, under_way, nullptr), grpc::StatusCode::FAILED_PRECONDITION) << "it has ended";
  under_way.set_id(77);
  EXPECT_EQ(record(*oscar, under_way, nullptr), grpc::StatusCode::NOT_FOUND);
  runs = list();
  ASSERT_EQ(runs.runs_size(), 2) << runs.DebugString();
  EXPECT_EQ(runs.runs(0).result(), "succeeded") << "as it ended";
}

// What each RPC needs, written out here (not taken from common/authz.cc), so
// that a change to the server's table shows up as a failure.
struct MethodRule {
  const char* method;
  const char* server;  // collector, controller, switchd
  std::set<std::string> roles;
};
const std::vector<MethodRule>& Rules() {
  static const auto* rules = new std::vector<MethodRule>{
      {"/rocefab.v1.Telemetry/Push", "collector", {"agent"}},
      {"/rocefab.v1.Query/ListAgents", "collector", {"viewer"}},
      {"/rocefab.v1.Query/GetCounters", "collector", {"viewer"}},
      {"/rocefab.v1.Query/StartJob", "collector", {"operator"}},
      {"/rocefab.v1.Query/EndJob", "collector", {"operator"}},
      {"/rocefab.v1.Query/ListJobs", "collector", {"viewer"}},
      {"/rocefab.v1.Query/JobTimeline", "collector", {"viewer"}},
      {"/rocefab.v1.Query/ListAnomalies", "collector", {"viewer"}},
      {"/rocefab.v1.Query/DiagnoseJob", "collector", {"viewer"}},
      {"/rocefab.v1.Query/ListAlerts", "collector", {"viewer"}},
      {"/rocefab.v1.Query/Silence", "collector", {"operator"}},
      {"/rocefab.v1.Query/Unsilence", "collector", {"operator"}},
      {"/rocefab.v1.Query/RecordPlaybookRun", "collector", {"operator"}},
      {"/rocefab.v1.Query/ListPlaybookRuns", "collector", {"viewer"}},
      {"/rocefab.v1.Query/TrafficMatrix", "collector", {"viewer"}},
      {"/rocefab.v1.Controller/Plan", "controller", {"viewer"}},
      {"/rocefab.v1.Controller/Status", "controller", {"viewer"}},
      {"/rocefab.v1.Controller/History", "controller", {"viewer"}},
      {"/rocefab.v1.Controller/Drain", "controller", {"operator"}},
      {"/rocefab.v1.Controller/Apply", "controller", {"admin"}},
      {"/rocefab.v1.Controller/Abort", "controller", {"admin"}},
      {"/rocefab.v1.SwitchAgent/ApplyConfig", "switchd", {"controller"}},
      {"/rocefab.v1.SwitchAgent/GetState", "switchd", {"controller", "viewer"}},
  };
  return *rules;
}

// The roles each identity holds on each server, from the grants SetUp gave
// (admin includes operator, which includes viewer).
std::set<std::string> RolesOn(const std::string& server, const std::string& identity) {
  static const std::map<std::string, std::map<std::string, std::set<std::string>>> roles = {
      {"collector",
       {{"vera", {"viewer"}},
        {"oscar", {"viewer", "operator"}},
        {"ada", {"viewer", "operator", "admin"}},
        {"rocefab-controllerd", {"viewer"}},
        {"z1-rtsw01", {"agent"}}}},
      {"controller",
       {{"vera", {"viewer"}}, {"oscar", {"viewer", "operator"}}, {"ada", {"viewer", "operator", "admin"}}}},
      {"switchd", {{"vera", {"viewer"}}, {"rocefab-controllerd", {"controller"}}}},
  };
  auto s = roles.at(server).find(identity);
  return s == roles.at(server).end() ? std::set<std::string>() : s->second;
}

TEST_F(ControlPath, EveryRpcOfEveryServiceIsAllowedOrDeniedByTheCallersCertificate) {
  // The table covers every RPC the protos define, and the server's table too.
  std::set<std::string> proto_methods, test_methods;
  for (const auto& [file, name] : std::vector<std::pair<const google::protobuf::FileDescriptor*, const char*>>{
           {v1::TelemetryBatch::descriptor()->file(), "Telemetry"},
           {v1::ListAgentsRequest::descriptor()->file(), "Query"},
           {v1::PlanRequest::descriptor()->file(), "Controller"},
           {v1::PlanRequest::descriptor()->file(), "SwitchAgent"}}) {
    const auto* service = file->FindServiceByName(name);
    ASSERT_NE(service, nullptr) << name;
    for (int m = 0; m < service->method_count(); ++m)
      proto_methods.insert("/" + service->full_name() + "/" + service->method(m)->name());
  }
  for (const auto& rule : Rules()) test_methods.insert(rule.method);
  EXPECT_EQ(test_methods, proto_methods);
  const auto served = AuthorizedMethods();
  EXPECT_EQ(std::set<std::string>(served.begin(), served.end()), proto_methods);

  // Another CA's certificate, as an attacker with a self-made CA has.
  testing::DevCa other({"ada"});
  const std::map<std::string, std::string> address = {
      {"collector", collector_address_}, {"controller", controller_address_}, {"switchd", agent_address_}};
  struct Caller {
    std::string name;
    std::shared_ptr<grpc::ChannelCredentials> credentials;
  };
  auto read = [](const std::string& path) { return testing::ReadFile(path); };
  std::vector<Caller> callers;
  {
    grpc::SslCredentialsOptions none;
    none.pem_root_certs = read(ca_.ca());
    callers.push_back({"no-cert", grpc::SslCredentials(none)});
    grpc::SslCredentialsOptions foreign = none;
    foreign.pem_private_key = read(other.key("ada"));
    foreign.pem_cert_chain = read(other.cert("ada"));
    callers.push_back({"other-CA", grpc::SslCredentials(foreign)});
  }
  for (const char* identity : {"nobody", "vera", "oscar", "ada", "rocefab-controllerd", "z1-rtsw01"}) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = read(ca_.ca());
    options.pem_private_key = read(ca_.key(identity));
    options.pem_cert_chain = read(ca_.cert(identity));
    callers.push_back({identity, grpc::SslCredentials(options)});
  }
  auto call = [&](const MethodRule& rule, const Caller& caller) {
    auto channel = grpc::CreateChannel(address.at(rule.server), caller.credentials);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (std::string(rule.method) == "/rocefab.v1.Telemetry/Push") {
      auto stream = v1::Telemetry::NewStub(channel)->Push(&context);
      stream->WritesDone();
      return stream->Finish();
    }
    grpc::GenericStub stub(channel);
    grpc::Slice empty("");
    grpc::ByteBuffer request(&empty, 1), response;  // zero bytes: every request message's defaults
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, rule.method, grpc::StubOptions(), &request, &response,
                   [&done](grpc::Status status) { done.set_value(std::move(status)); });
    return done.get_future().get();
  };
  std::ostringstream table;
  table << std::left << std::setw(40) << "RPC";
  for (const auto& caller : callers) table << std::setw(21) << caller.name;
  table << "\n";
  int mismatches = 0;
  for (const auto& rule : Rules()) {
    table << std::setw(40) << rule.method;
    for (const auto& caller : callers) {
      const grpc::Status status = call(rule, caller);
      const auto held = RolesOn(rule.server, caller.name);
      bool expect_allowed = false;
      for (const auto& role : rule.roles) expect_allowed |= held.count(role) > 0;
      const auto code = status.error_code();
      const bool handshake_failed = code == grpc::StatusCode::UNAVAILABLE;
      const bool denied = code == grpc::StatusCode::PERMISSION_DENIED || code == grpc::StatusCode::UNAUTHENTICATED ||
                          handshake_failed;
      std::string cell = handshake_failed ? "refused(tls)" : denied ? "DENIED" : "allowed";
      if (!denied && code != grpc::StatusCode::OK) cell += "(" + std::to_string(code) + ")";
      if (denied == expect_allowed) {
        ++mismatches;
        cell += "!!";
        ADD_FAILURE() << rule.method << " by " << caller.name << ": " << status.error_code() << " "
                      << status.error_message() << (expect_allowed ? " (should be allowed)" : " (should be denied)");
      }
      // Who cannot present a certificate of our CA never gets past TLS.
      if (caller.name == "no-cert" || caller.name == "other-CA") EXPECT_TRUE(handshake_failed) << rule.method;
      table << std::setw(21) << cell;
    }
    table << "\n";
  }
  std::cout << "[rpc x identity]\n" << table.str();
  EXPECT_EQ(mismatches, 0);
  // Each daemon counted what it refused, by method.
  for (const auto& [metrics, method] : std::vector<std::pair<std::string, std::string>>{
           {collector_metrics_, "/rocefab.v1.Query/Silence"},
           {controller_metrics_, "/rocefab.v1.Controller/Apply"},
           {agent_metrics_, "/rocefab.v1.SwitchAgent/ApplyConfig"}}) {
    auto body = testing::HttpGet(metrics, "/metrics");
    ASSERT_TRUE(body.has_value()) << metrics;
    EXPECT_NE(body->find("rocefab_grpc_denied_total{method=\"" + method + "\"}"), std::string::npos) << *body;
  }
  // The controller and the switch agent also say what they are and how they run.
  auto controller = testing::HttpGet(controller_metrics_, "/metrics");
  ASSERT_TRUE(controller.has_value());
  EXPECT_NE(controller->find("program=\"rocefab-controllerd\""), std::string::npos) << *controller;
  EXPECT_NE(controller->find("rocefab_controller_desired_generation "), std::string::npos) << *controller;
  EXPECT_NE(controller->find("rocefab_controller_rollout_active 0\n"), std::string::npos) << *controller;
  EXPECT_NE(controller->find("rocefab_controller_rollouts_total{result=\"rolled_back\"} "), std::string::npos)
      << *controller;
  auto agent = testing::HttpGet(agent_metrics_, "/metrics");
  ASSERT_TRUE(agent.has_value());
  for (const char* series : {"program=\"rocefab-switchd\"", "rocefab_agent_poll_duration_seconds_count ",
                             "rocefab_agent_component_info{component=\"kernel\"", "rocefab_switchd_degraded_sources 0\n",
                             "rocefab_switchd_applied_generation "})
    EXPECT_NE(agent->find(series), std::string::npos) << series << "\n" << *agent;
}

}  // namespace
}  // namespace rocefab

namespace rocefab {
namespace {

// rocefab check roce through the real daemons: a host agent reports its
// NICs' RoCE settings from an mlx5 layout, the switch agents report the
// QoS the controller rolled out, and the check names each mismatch.
TEST_F(ControlPath, CheckRoceNamesEachNicWhoseSettingsDisagreeWithItsSwitchPort) {
  testing::WriteFile(dir_ / "policy-qos.yaml", R"(default_scheme: ecmp
min_uplink_capacity: 0.5
qos:
  dscp_to_tc: [{dscp: 26, tc: 3}, {dscp: 48, tc: 6}]
  lossless_tcs: [3]
  pfc_priorities: [3]
  ecn: [{tc: 3, min_bytes: 150000, max_bytes: 1500000, probability: 0.1}]
  strict_priority_tc: 6
)");
  StartController("policy-qos.yaml");
  std::string out, err;
  ASSERT_EQ(Cli({"config", "apply", "--canary", "1", "--gate-seconds", "0", "--why", "qos"}, &out, &err), 0)
      << out << err;
  // The host: the fixture's two RDMA ports, with MLNX_OFED's ecn/ tree and
  // rdma_cm's configfs ToS. mlx5_0 is set up right; mlx5_1 sends RoCE with
  // DSCP 0 and answers ECN marks with no CNPs.
  const std::string root = dir_ / "z1-r01-h1";
  testing::CopyTree(testing::FixturesDir() + "/hosts/z1-r01-h1", root);
  const std::string sys = root + "/sys";
  testing::WriteFile(sys + "/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos", "106\n");
  testing::WriteFile(sys + "/kernel/config/rdma_cm/mlx5_1/ports/1/default_roce_tos", "0\n");
  for (const char* netdev : {"eth2", "eth3"}) {
    const std::string net = sys + "/class/net/" + netdev;
    testing::WriteFile(net + "/mtu", "4200\n");
    for (int prio = 0; prio < 8; ++prio)
      testing::WriteFile(net + "/ecn/roce_np/enable/" + std::to_string(prio),
                         prio == 3 && std::string(netdev) == "eth2" ? "1\n" : "0\n");
    testing::WriteFile(net + "/ecn/roce_np/cnp_dscp", "48\n");
  }
  ca_.Issue({"z1-r01-h1"});
  auto hostd = testing::StartDaemon(
      testing::With({BinDir() + "/rocefab-hostd", "--collector", collector_address_, "--interval", "200ms",
                     "--sysfs-root", sys, "--proc-root", root + "/proc", "--ethtool-dir", root + "/ethtool",
                     "--host-name", "z1-r01-h1", "--no-netlink"},
                    ca_.Flags("z1-r01-h1")),
      dir_ / "hostd.log");
  ASSERT_FALSE(hostd.status.empty()) << testing::ReadFile(dir_ / "hostd.log");
  // ada is a viewer of the collectors and of the controller.
  auto check_roce = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {BinDir() + "/rocefab", "--controller", controller_address_, "--collector",
                                     collector_address_ + "," + shard_address_, "check", "roce", "--topology",
                                     dir_ / "topology.yaml"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    for (const auto& flag : ca_.Flags("ada")) argv.push_back(flag);
    return testing::RunCommand(argv, &out, &err);
  };
  nlohmann::json check;
  int code = -1;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        code = check_roce({"-o", "json"});
        check = nlohmann::json::parse(out, nullptr, false);
        return !check.is_discarded() && check.value("nics_checked", "") == "2";
      },
      std::chrono::seconds(20)))
      << out << err;
  EXPECT_EQ(code, 1) << "a mismatch exits 1";
  std::set<std::pair<std::string, std::string>> found;
  for (const auto& m : check["mismatches"]) found.insert({m["nic"].get<std::string>(), m["setting"].get<std::string>()});
  EXPECT_TRUE(found.count({"z1-r01-h1/mlx5_1", "roce_tos"})) << check.dump(2);
  EXPECT_TRUE(found.count({"z1-r01-h1/mlx5_1", "roce_ecn_np_enabled"}))
      << "the switch marks its one lossless class, where this NIC sends no CNPs: " << check.dump(2);
  EXPECT_EQ(found.size(), 2u) << check.dump(2);
  for (const auto& [nic, setting] : found) EXPECT_NE(nic, "z1-r01-h1/mlx5_0") << setting << ": " << check.dump(2);
  EXPECT_EQ(check["unknown"].value("pfc_enabled", ""), "2") << "no dcbnl with --no-netlink: unknown, not a mismatch";
  // The human form names the switch port each NIC faces.
  check_roce({});
  EXPECT_NE(out.find("z1-rtsw01/"), std::string::npos) << out;
  EXPECT_NE(out.find("2 NIC(s) checked against their switch ports: 2 mismatch(es)"), std::string::npos) << out;
}

}  // namespace
}  // namespace rocefab
