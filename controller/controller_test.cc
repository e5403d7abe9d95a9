// The controller's rollout, rollback, abort and drains against a fleet in
// memory, with the real compiler and a real SQLite store.
#include "controller/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <thread>

#include "common/config_loader.h"
#include "common/strings.h"
#include "controller/compiler.h"
#include "controller/te_loop.h"
#include "lab/topology_gen.h"
#include "tests/support/test_support.h"

namespace rocefab::controller {
namespace {

using std::chrono::steady_clock;

// Switch agents in memory. Each switch keeps what it applied; a switch can
// be unreachable (after a delay, as a deadline would), reject configs, or
// hold an apply until released.
struct Switches {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, v1::SwitchConfig> applied;
  std::set<std::string> unreachable, rejecting;
  std::set<std::string> hold;  // applies to these wait for release()
  bool released = false;
  int64_t unreachable_delay_ms = 0;
  std::vector<std::string> apply_log;  // switch names, in order

  void release() {
    std::lock_guard lock(mu);
    released = true;
    cv.notify_all();
  }
  size_t applies() {
    std::lock_guard lock(mu);
    return apply_log.size();
  }
};

class FakeFleet final : public Fleet {
 public:
  explicit FakeFleet(Switches& s) : s_(s) {}
  // A killed controller: from now on its calls reach nothing.
  void Kill() { dead_ = true; }

  absl::StatusOr<v1::SwitchState> GetState(const std::string& name) override {
    if (auto down = Down(name); !down.ok()) return down;
    std::lock_guard lock(s_.mu);
    v1::SwitchState state;
    state.set_switch_name(name);
    const v1::SwitchConfig& config = s_.applied[name];
    state.set_applied_generation(config.generation());
    state.set_applied_hash(config.content_hash());
    *state.mutable_applied() = config;
    return state;
  }
  absl::StatusOr<v1::ApplyConfigResponse> Apply(const v1::SwitchConfig& config) override {
    if (auto down = Down(config.switch_name()); !down.ok()) return down;
    std::unique_lock lock(s_.mu);
    if (s_.hold.count(config.switch_name())) s_.cv.wait(lock, [&] { return s_.released; });
    if (dead_) return absl::UnavailableError("controller killed");
    v1::ApplyConfigResponse response;
    if (s_.rejecting.count(config.switch_name())) {
      response.set_error("item route/x failed: no such port");
      return response;
    }
    s_.applied[config.switch_name()] = config;
    s_.apply_log.push_back(config.switch_name());
    response.set_ok(true);
    return response;
  }

 private:
  absl::Status Down(const std::string& name) {
    bool down;
    {
      std::lock_guard lock(s_.mu);
      down = s_.unreachable.count(name) > 0;
    }
    if (dead_) return absl::UnavailableError("controller killed");
    if (!down) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(s_.unreachable_delay_ms));
    return absl::UnavailableError(StrCat("agent ", name, ": deadline exceeded"));
  }
  Switches& s_;
  std::atomic<bool> dead_{false};
};

// The detectors' verdict: problems on the listed switches, or a collector
// that cannot be asked.
struct FakeGate final : public Gate {
  std::mutex mu;
  std::set<std::string> sick;
  bool collector_down = false;
  int asked = 0;
  std::string Verdict(const std::vector<std::string>& switches, int64_t, int64_t) override {
    std::lock_guard lock(mu);
    ++asked;
    if (collector_down) return "collector 127.0.0.1:9 cannot be asked for the gate; ";
    std::string out;
    for (const auto& name : switches)
      if (sick.count(name)) out += "lossless_drops on " + name + "/Ethernet0; ";
    return out;
  }
  std::vector<v1::Job> jobs;
  absl::StatusOr<std::vector<v1::Job>> RunningJobs() override {
    std::lock_guard lock(mu);
    if (collector_down) return absl::UnavailableError("collector 127.0.0.1:9 cannot be asked");
    return jobs;
  }
  v1::TrafficMatrixResponse matrix;
  absl::StatusOr<v1::TrafficMatrixResponse> TrafficMatrix(uint32_t) override {
    std::lock_guard lock(mu);
    if (collector_down) return absl::UnavailableError("collector 127.0.0.1:9 cannot be asked");
    return matrix;
  }
};

v1::Policy Policy(const std::string& scheme) {
  v1::Policy policy;
  EXPECT_TRUE(LoadYamlConfig("default_scheme: " + scheme + "\nmin_uplink_capacity: 0.5\n", "policy.yaml", &policy).ok());
  auto valid = ValidatePolicy(policy);
  EXPECT_TRUE(valid.ok()) << valid.status();
  return *valid;
}

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lab::TopologyParams params;
    params.racks_per_zone = 4;
    params.hosts_per_rack = 1;
    params.nics_per_host = 2;
    params.ctsw_per_zone = 2;
    topology_ = *Topology::Build(*lab::GenerateTopology(params));
    config_.set_unreachable("fail");
  }
  std::unique_ptr<Controller> Make(const std::string& scheme, Fleet& fleet, Store& store) {
    auto core = std::make_unique<Controller>(topology_, Policy(scheme), store, fleet, &gate_, config_,
                                             SystemClock::Instance());
    auto generation = core->Start("test", "start");
    EXPECT_TRUE(generation.ok()) << generation.status();
    return core;
  }
  std::unique_ptr<Store> OpenStore() { return *Store::Open(dir_ / "controller.db"); }
  v1::ApplyRequest Request(uint32_t gate_seconds = 0) {
    v1::ApplyRequest request;
    request.set_canary(1);
    request.set_wave_size(2);
    request.set_gate_seconds(gate_seconds);
    request.set_why("test");
    return request;
  }
  // Waits until `n` applies reached the switches.
  bool WaitApplies(size_t n) {
    return testing::WaitFor([&] { return switches_.applies() >= n; }, std::chrono::seconds(10));
  }
  std::set<v1::RoutingScheme> Schemes() {
    std::lock_guard lock(switches_.mu);
    std::set<v1::RoutingScheme> out;
    for (const auto& [name, config] : switches_.applied) out.insert(config.scheme());
    return out;
  }

  testing::TempDir dir_;
  std::shared_ptr<const Topology> topology_;
  v1::ControllerdConfig config_;
  Switches switches_;
  FakeGate gate_;
};

TEST_F(ControllerTest, ADrainAfterARollbackPushesOnlyItsSwitchesAndThePolicyTheFabricRuns) {
  auto store = OpenStore();
  FakeFleet fleet(switches_);
  {
    auto ecmp = Make("ecmp", fleet, *store);
    auto applied = ecmp->Apply(Request(), "alice");
    ASSERT_TRUE(applied.ok() && applied->ok()) << (applied.ok() ? applied->error() : applied.status().ToString());
  }
  const size_t switch_count = switches_.applied.size();
  ASSERT_GT(switch_count, 4u);
  // Restarted with a new policy whose canary fails its gate.
  auto eecmp = Make("eecmp", fleet, *store);
  gate_.sick = {"z1-ctsw01"};
  auto rejected = eecmp->Apply(Request(/*gate_seconds=*/1), "alice");
  ASSERT_TRUE(rejected.ok());
  ASSERT_TRUE(rejected->rolled_back()) << rejected->error();
  EXPECT_EQ(Schemes(), std::set<v1::RoutingScheme>{v1::ROUTING_SCHEME_ECMP}) << "the canary went back";

  // Before: the drain recompiled the rejected eecmp policy and pushed it to
  // every switch, with no canary and no gate.
  const size_t before = switches_.applies();
  v1::DrainRequest drain;
  drain.set_kind("link");
  drain.set_name([&] {
    for (const auto& port : topology_->PortsOf("z1-rtsw01")) {
      const std::string full = "z1-rtsw01/" + port;
      const std::string& peer = topology_->PeerOf(topology_->LinkOfPort(full), full);
      if (peer.starts_with("z1-ctsw")) return full;
    }
    return std::string();
  }());
  drain.set_reason("flapping");
  auto drained = eecmp->Drain(drain, "bob");
  ASSERT_TRUE(drained.ok() && drained->ok()) << (drained.ok() ? drained->error() : drained.status().ToString());
  EXPECT_EQ(Schemes(), std::set<v1::RoutingScheme>{v1::ROUTING_SCHEME_ECMP}) << "the rejected policy stays out";
  EXPECT_LT(drained->pushed_size(), static_cast<int>(switch_count)) << "only the switches the drain changes";
  EXPECT_GE(drained->pushed_size(), 2) << "at least the link's two ends";
  EXPECT_EQ(switches_.applies() - before, static_cast<size_t>(drained->pushed_size()));
  std::lock_guard lock(switches_.mu);
  for (const auto& name : drained->pushed()) {
    const auto& ports = switches_.applied[name].drained_ports();
    if (name == "z1-rtsw01") EXPECT_EQ(ports.size(), 1) << name;
  }
}

TEST_F(ControllerTest, ADrainDuringARolloutAnswersInUnderOneSecondAndAbortStopsTheWaves) {
  auto store = OpenStore();
  FakeFleet fleet(switches_);
  auto ecmp = Make("ecmp", fleet, *store);
  ASSERT_TRUE(ecmp->Apply(Request(), "alice")->ok());
  auto core = Make("eecmp", fleet, *store);
  const size_t base = switches_.applies();
  std::optional<absl::StatusOr<v1::ApplyResponse>> result;
  std::thread rollout([&] { result = core->Apply(Request(/*gate_seconds=*/60), "alice"); });
  ASSERT_TRUE(WaitApplies(base + 1)) << "the canary was pushed";
  ASSERT_TRUE(testing::WaitFor([&] { return !core->Status()->rollout().empty(); }, std::chrono::seconds(5)));

  v1::DrainRequest drain;
  drain.set_kind("switch");
  drain.set_name("z1-ctsw02");
  drain.set_reason("emergency: optics");
  const auto start = steady_clock::now();
  auto drained = core->Drain(drain, "bob");
  const double seconds = std::chrono::duration<double>(steady_clock::now() - start).count();
  ASSERT_TRUE(drained.ok() && drained->ok()) << (drained.ok() ? drained->error() : drained.status().ToString());
  EXPECT_LT(seconds, 1.0) << "the rollout sits in a 60 s gate; the drain must not wait for it";
  std::printf("drain during rollout: %.1f ms, %d switch(es) pushed\n", seconds * 1e3, drained->pushed_size());

  const size_t during = switches_.applies();
  auto aborted = core->Abort("changed my mind", "alice");
  EXPECT_TRUE(aborted.aborting());
  rollout.join();
  ASSERT_TRUE(result && result->ok());
  EXPECT_TRUE((*result)->aborted());
  EXPECT_TRUE((*result)->rolled_back());
  EXPECT_EQ((*result)->waves_size(), 1) << "no wave after the abort";
  EXPECT_EQ(switches_.applies() - during, 1u) << "only the canary is rolled back";
  EXPECT_EQ(Schemes(), std::set<v1::RoutingScheme>{v1::ROUTING_SCHEME_ECMP});
  // The drain survives the rollback: every switch it touched still has it.
  std::lock_guard lock(switches_.mu);
  EXPECT_FALSE(switches_.applied["z1-ctsw02"].drained_ports().empty());
}

TEST_F(ControllerTest, AnUnreachableSwitchCostsOneDeadlineAndFailsOrIsSkippedAsPolicySays) {
  auto store = OpenStore();
  FakeFleet fleet(switches_);
  switches_.unreachable = {"z1-rtsw02", "z1-rtsw03"};
  switches_.unreachable_delay_ms = 1500;
  auto core = Make("ecmp", fleet, *store);
  auto start = steady_clock::now();
  auto status = core->Status();
  const double status_s = std::chrono::duration<double>(steady_clock::now() - start).count();
  ASSERT_TRUE(status.ok());
  EXPECT_LT(status_s, 2.9) << "two unreachable switches are asked at once, not one after the other";
  int errors = 0;
  for (const auto& s : status->switches()) errors += !s.error().empty();
  EXPECT_EQ(errors, 2);

  auto failed = core->Apply(Request(), "alice");
  ASSERT_TRUE(failed.ok());
  EXPECT_FALSE(failed->ok());
  EXPECT_NE(failed->error().find("z1-rtsw02"), std::string::npos) << failed->error();
  EXPECT_EQ(switches_.applies(), 0u) << "fail: nothing applied";

  config_.set_unreachable("skip");
  auto store2 = *Store::Open(dir_ / "skip.db");
  auto skipping = Make("ecmp", fleet, *store2);
  auto applied = skipping->Apply(Request(), "alice");
  ASSERT_TRUE(applied.ok());
  EXPECT_TRUE(applied->ok()) << applied->error();
  EXPECT_EQ(applied->skipped_size(), 2);
  EXPECT_EQ(switches_.applies(), switches_.applied.size() - 0) << "every reachable switch";
}

TEST_F(ControllerTest, ACollectorThatCannotBeAskedStopsTheWavesAndRollsBack) {
  auto store = OpenStore();
  FakeFleet fleet(switches_);
  auto core = Make("ecmp", fleet, *store);
  gate_.collector_down = true;
  auto result = core->Apply(Request(/*gate_seconds=*/1), "alice");
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->rolled_back());
  EXPECT_EQ(result->waves_size(), 1);
  EXPECT_NE(result->error().find("cannot be asked"), std::string::npos) << result->error();
  EXPECT_EQ(switches_.applies(), 2u) << "the canary, and its rollback";
}

TEST_F(ControllerTest, AControllerKilledMidRolloutAndRestartedConvergesToOneGeneration) {
  {
    auto store = OpenStore();
    FakeFleet fleet(switches_);
    ASSERT_TRUE(Make("ecmp", fleet, *store)->Apply(Request(), "alice")->ok());
  }
  auto store1 = OpenStore();
  FakeFleet doomed(switches_);
  auto first = Make("eecmp", doomed, *store1);
  const size_t base = switches_.applies();
  switches_.hold = {"z1-rtsw01", "z1-rtsw02"};  // the second wave hangs
  std::thread rollout([&] { (void)first->Apply(Request(), "alice"); });
  ASSERT_TRUE(WaitApplies(base + 1));
  doomed.Kill();  // as a SIGKILL would: nothing more reaches the switches
  // Restarted: a new process, its own store connection, the same policy.
  auto store2 = OpenStore();
  FakeFleet fleet(switches_);
  {
    std::lock_guard lock(switches_.mu);
    switches_.hold.clear();
  }
  auto second = Make("eecmp", fleet, *store2);
  auto applied = second->Apply(Request(), "alice");
  ASSERT_TRUE(applied.ok() && applied->ok()) << (applied.ok() ? applied->error() : applied.status().ToString());
  switches_.release();
  rollout.join();
  std::lock_guard lock(switches_.mu);
  std::set<uint64_t> generations;
  for (const auto& [name, config] : switches_.applied) generations.insert(config.generation());
  EXPECT_EQ(generations.size(), 1u);
  EXPECT_EQ(*generations.begin(), second->generation());
  for (const auto& [name, config] : switches_.applied) EXPECT_EQ(config.scheme(), v1::ROUTING_SCHEME_EECMP) << name;
}

TEST_F(ControllerTest, ASecondApplyDuringARolloutIsRefusedWithWhoIsRollingOut) {
  auto store = OpenStore();
  FakeFleet fleet(switches_);
  auto core = Make("ecmp", fleet, *store);
  std::thread rollout([&] { (void)core->Apply(Request(/*gate_seconds=*/60), "alice"); });
  ASSERT_TRUE(WaitApplies(1));
  auto second = core->Apply(Request(), "bob");
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  EXPECT_NE(second.status().message().find("alice"), std::string::npos);
  core->Shutdown();
  rollout.join();
}

TEST(GateScope, TouchesASwitchItsPortsAndTheFarEndsOfItsLinksOnly) {
  lab::TopologyParams params;
  params.racks_per_zone = 2;
  params.hosts_per_rack = 1;
  params.nics_per_host = 2;
  params.ctsw_per_zone = 2;
  auto topology = *Topology::Build(*lab::GenerateTopology(params));
  const std::vector<std::string> wave = {"z1-rtsw01"};
  EXPECT_TRUE(TouchedBy(*topology, wave, "z1-rtsw01"));
  EXPECT_TRUE(TouchedBy(*topology, wave, "z1-rtsw01/Ethernet0"));
  // The host NIC cabled to it, and a spine port facing it.
  const std::string port0 = "z1-rtsw01/" + topology->PortsOf("z1-rtsw01").front();
  const std::string& peer = topology->PeerOf(topology->LinkOfPort(port0), port0);
  EXPECT_TRUE(TouchedBy(*topology, wave, peer)) << peer;
  EXPECT_FALSE(TouchedBy(*topology, wave, "z1-rtsw02/Ethernet0"));
  EXPECT_FALSE(TouchedBy(*topology, wave, "4711")) << "a job is not an element of the wave";
}

// A drain of a port facing a host cuts a NIC off: refused without --force,
// naming the jobs with ranks there. A fabric link's preview shows the racks'
// capacity and the jobs whose traffic crosses it, and changes nothing.
TEST_F(ControllerTest, AHostFacingDrainIsRefusedNamingTheJobsAndAPreviewShowsCapacityAndJobs) {
  auto store = OpenStore();
  FakeFleet fleet(switches_);
  auto core = Make("ecmp", fleet, *store);
  const std::string nic = "z1-r01-h1/mlx5_0";
  const std::string host_port = topology_->PeerOf(topology_->LinkOfPort(nic), nic);
  v1::Job two_racks;
  two_racks.set_id("4711");
  for (const char* host : {"z1-r01-h1", "z1-r02-h1"}) {
    auto* r = two_racks.add_ranks();
    r->set_rank(static_cast<uint32_t>(two_racks.ranks_size() - 1));
    r->set_host(host);
    r->set_nic("mlx5_0");
  }
  v1::Job elsewhere;
  elsewhere.set_id("4712");
  auto* r = elsewhere.add_ranks();
  r->set_host("z1-r03-h1");
  r->set_nic("mlx5_0");
  gate_.jobs = {two_racks, elsewhere};

  v1::DrainRequest drain;
  drain.set_kind("link");
  drain.set_name(host_port);
  drain.set_reason("typo: meant the uplink");
  const size_t before = switches_.applies();
  auto refused = core->Drain(drain, "bob");
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_FALSE(refused->ok());
  EXPECT_NE(refused->error().find("the only link of NIC " + nic), std::string::npos) << refused->error();
  EXPECT_NE(refused->error().find("stalls job(s) 4711"), std::string::npos) << refused->error();
  EXPECT_EQ(refused->error().find("4712"), std::string::npos) << refused->error();
  EXPECT_EQ(switches_.applies(), before) << "nothing pushed";
  drain.set_force(true);
  auto forced = core->Drain(drain, "bob");
  ASSERT_TRUE(forced.ok() && forced->ok()) << (forced.ok() ? forced->error() : forced.status().ToString());

  // A rack uplink: the preview lists its rack's capacity and the job that
  // leaves the rack, not the one elsewhere.
  v1::DrainRequest preview;
  preview.set_kind("link");
  for (const auto& port : topology_->PortsOf("z1-rtsw01")) {
    const std::string full = "z1-rtsw01/" + port;
    if (topology_->PeerOf(topology_->LinkOfPort(full), full).starts_with("z1-ctsw")) preview.set_name(full);
  }
  preview.set_reason("flapping");
  preview.set_dry_run(true);
  const size_t before_preview = switches_.applies();
  auto shown = core->Drain(preview, "bob");
  ASSERT_TRUE(shown.ok() && shown->ok()) << (shown.ok() ? shown->error() : shown.status().ToString());
  ASSERT_EQ(shown->capacity_size(), 1);
  EXPECT_EQ(shown->capacity(0).rtsw(), "z1-rtsw01");
  EXPECT_NEAR(shown->capacity(0).remaining_share(), 0.5, 1e-9) << "one of its two uplinks";
  EXPECT_EQ(std::vector<std::string>(shown->jobs().begin(), shown->jobs().end()), std::vector<std::string>{"4711"});
  EXPECT_GE(shown->pushed_size(), 2);
  EXPECT_EQ(switches_.applies(), before_preview) << "a preview changes nothing";
  // The collector down: the drain still runs, and says the jobs are unknown.
  gate_.collector_down = true;
  auto blind = core->Drain(preview, "bob");
  ASSERT_TRUE(blind.ok() && blind->ok());
  EXPECT_NE(blind->jobs_note().find("unknown"), std::string::npos) << blind->jobs_note();
}

}  // namespace
}  // namespace rocefab::controller

namespace rocefab::controller {
namespace {

// The TE loop over the same fake fleet and collectors: a traffic matrix in,
// overrides out through waves and gates.
class TeLoopTest : public ControllerTest {
 protected:
  // Every NIC of rack 1 sends `bytes_per_s` to rack 2 and rack 3.
  v1::TrafficMatrixResponse Matrix(double bytes_per_s) {
    v1::TrafficMatrixResponse m;
    for (const auto& host : topology_->proto().hosts()) {
      if (host.rack() != 1) continue;
      for (const auto& nic : host.nics()) {
        const std::string name = host.name() + "/" + nic.name();
        const std::string& ingress = topology_->PeerOf(topology_->LinkOfPort(name), name);
        for (int rack : {2, 3}) {
          auto* d = m.add_demands();
          d->set_ingress(ingress);
          d->set_dst_prefix(StrCat("10.1.", rack, ".0/24"));
          d->set_bytes_per_s(bytes_per_s);
        }
      }
    }
    return m;
  }
  size_t RuleItems() {
    std::lock_guard lock(switches_.mu);
    size_t n = 0;
    for (const auto& [name, config] : switches_.applied)
      for (const auto& item : config.items()) n += item.key().rfind("rule/", 0) == 0;
    return n;
  }
  v1::TeLoopConfig Config() {
    v1::TeLoopConfig c;
    c.set_gate_seconds(1);
    return c;
  }
};

TEST_F(TeLoopTest, IdlesUntilATePolicyRunsThenProgramsOverridesThroughTheGates) {
  auto store = OpenStore();
  FakeFleet fleet(switches_);
  gate_.matrix = Matrix(10e9);
  {
    auto ecmp = Make("ecmp", fleet, *store);
    TeLoop loop(*ecmp, topology_, gate_, Config(), SystemClock::Instance());
    const auto idle = loop.RunOnce();
    EXPECT_EQ(idle.result, "idle");
    EXPECT_NE(idle.detail.find("no zone"), std::string::npos) << idle.detail;
  }
  auto te = Make("te", fleet, *store);
  TeLoop loop(*te, topology_, gate_, Config(), SystemClock::Instance());
  const auto pending = loop.RunOnce();
  EXPECT_EQ(pending.result, "idle") << "an operator's policy is not rolled out by TE";
  EXPECT_NE(pending.detail.find("not been rolled out"), std::string::npos) << pending.detail;
  auto applied = te->Apply(Request(), "alice");
  ASSERT_TRUE(applied.ok() && applied->ok());
  EXPECT_EQ(RuleItems(), 0u) << "no matrix yet, no overrides";

  const uint64_t before = te->generation();
  const int asked_before = gate_.asked;
  const auto first = loop.RunOnce();
  ASSERT_EQ(first.result, "applied") << first.detail;
  EXPECT_GT(te->generation(), before);
  EXPECT_GT(first.overrides, 0u);
  EXPECT_GT(RuleItems(), 0u) << "the overrides reached the switches";
  EXPECT_GT(gate_.asked, asked_before) << "through the health gates";
  // The same matrix again: nothing to do.
  const uint64_t settled = te->generation();
  const auto second = loop.RunOnce();
  EXPECT_EQ(second.result, "unchanged") << second.detail;
  EXPECT_EQ(te->generation(), settled);
}

TEST_F(TeLoopTest, AFailedGateRollsTheOverridesBackAndTheyStayOut) {
  auto store = OpenStore();
  FakeFleet fleet(switches_);
  auto te = Make("te", fleet, *store);
  ASSERT_TRUE(te->Apply(Request(), "alice")->ok());
  TeLoop loop(*te, topology_, gate_, Config(), SystemClock::Instance());
  gate_.matrix = Matrix(10e9);
  {
    std::lock_guard lock(gate_.mu);
    for (const auto& sw : topology_->proto().switches()) gate_.sick.insert(sw.name());
  }
  const auto outcome = loop.RunOnce();
  EXPECT_EQ(outcome.result, "rolled-back") << outcome.detail;
  EXPECT_EQ(RuleItems(), 0u);
  EXPECT_TRUE(te->TeStatus().overrides.empty()) << "the desired state is what the fabric runs again";
  EXPECT_EQ(outcome.overrides, 0u);
}

TEST_F(TeLoopTest, ADownLinkTheOverridesUseIsAvoidedAndNoMatrixKeepsWhatRuns) {
  auto store = OpenStore();
  FakeFleet fleet(switches_);
  auto te = Make("te", fleet, *store);
  ASSERT_TRUE(te->Apply(Request(), "alice")->ok());
  TeLoop loop(*te, topology_, gate_, Config(), SystemClock::Instance());
  gate_.matrix = Matrix(10e9);
  ASSERT_EQ(loop.RunOnce().result, "applied");
  const auto running = te->TeStatus().overrides;
  // An uplink an RTSW override sends on goes down.
  std::string used;
  for (const auto& o : running)
    if (o.ingress.find("rtsw") != std::string::npos) used = o.egress;
  ASSERT_FALSE(used.empty());
  gate_.matrix.add_down_ports(used);
  const auto moved = loop.RunOnce();
  ASSERT_EQ(moved.result, "applied") << moved.detail;
  EXPECT_NE(moved.detail.find("unusable"), std::string::npos) << moved.detail;
  for (const auto& o : te->TeStatus().overrides) EXPECT_NE(o.egress, used);
  // The collectors cannot be asked: the overrides stay as they are.
  const auto kept = te->TeStatus().overrides;
  gate_.collector_down = true;
  const auto error = loop.RunOnce();
  EXPECT_EQ(error.result, "error");
  EXPECT_NE(error.detail.find("overrides kept"), std::string::npos);
  EXPECT_EQ(te->TeStatus().overrides, kept);
}

}  // namespace
}  // namespace rocefab::controller
