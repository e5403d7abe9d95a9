#include "common/playbook_engine.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/config_loader.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

// A fabric in memory: one flapping uplink whose job recovers once drained.
class FakeEnv final : public PlaybookEnv {
 public:
  absl::StatusOr<std::vector<v1::Anomaly>> ActiveAnomalies() override {
    std::vector<v1::Anomaly> out;
    if (flapping) {
      v1::Anomaly a;
      a.set_id(3);
      a.set_kind("link_flap");
      a.set_entity("z1-rtsw03/Ethernet44");
      a.add_jobs("4711");
      out.push_back(a);
    }
    return out;
  }
  absl::StatusOr<v1::DiagnoseJobResponse> Diagnose(const std::string& job, int64_t) override {
    ++diagnose_calls;
    v1::DiagnoseJobResponse d;
    // The job recovers a few polls after the drain.
    d.set_state(drained && ++polls_after_drain >= 3 ? "healthy" : "degraded");
    return d;
  }
  absl::StatusOr<v1::DrainResponse> Drain(const std::string& port, const std::string& reason,
                                          bool dry_run) override {
    v1::DrainResponse r;
    if (!capacity) {
      r.set_error("rack z1-rtsw03 would keep 1 of 4 uplinks, below the policy's minimum");
      return r;
    }
    r.add_pushed("z1-rtsw03");
    r.add_pushed("z1-ctsw02");
    if (dry_run) {
      r.set_ok(true);
      return r;
    }
    drained = true;
    last_reason = reason;
    r.set_ok(true);
    r.set_generation(7);
    return r;
  }
  absl::StatusOr<uint64_t> Silence(const std::string&, int64_t, const std::string&) override { return ++silences; }
  absl::StatusOr<bool> IsFabricLink(const std::string& port) override { return port.find("rtsw") != std::string::npos; }
  int64_t NowUs() override { return now++; }  // a clock that moves between reads
  bool Stopping() override { return stop_before_steps; }
  bool Pause(int64_t us) override {
    if (stopping) return false;  // a stopping daemon returns at once
    now += us;
    return true;
  }
  void Progress(const v1::PlaybookRun& run) override { progress.push_back({run, diagnose_calls, now}); }
  int diagnoses() const { return diagnose_calls; }

  struct Reported {
    v1::PlaybookRun run;
    int diagnoses_before;
    int64_t at_us;
  };
  std::vector<Reported> progress;

  bool stopping = false, stop_before_steps = false;
  int diagnose_calls = 0;
  bool flapping = true, capacity = true, drained = false;
  int polls_after_drain = 0;
  uint64_t silences = 0;
  int64_t now = 1'800'000'000'000'000;
  std::string last_reason;
};

v1::Playbook Shipped() {
  auto pb = LoadPlaybook(std::string(ROCEFAB_SOURCE_DIR) + "/playbooks/auto/drain_flapping_link.yaml");
  EXPECT_TRUE(pb.ok()) << pb.status();
  return pb.ok() ? *pb : v1::Playbook();
}

TEST(PlaybookEngine, DrainsAConfirmedFlappingFabricLinkAndWaitsForTheJobs) {
  FakeEnv env;
  const v1::PlaybookRun run = RunPlaybook(Shipped(), "z1-rtsw03/Ethernet44", false, env);
  EXPECT_EQ(run.result(), "succeeded");
  EXPECT_TRUE(env.drained);
  EXPECT_NE(env.last_reason.find("playbook drain_flapping_link"), std::string::npos);
  ASSERT_EQ(run.changes_size(), 2);
  EXPECT_EQ(run.changes(0), "drained link z1-rtsw03/Ethernet44 (desired generation 7)");
  EXPECT_NE(run.log(run.log_size() - 1).find("rocefab undrain link z1-rtsw03/Ethernet44"), std::string::npos);
  EXPECT_GT(run.ended_us(), run.started_us()) << "it polled the job until healthy";
  // The drain was reported the moment it was made, before the wait for the
  // jobs began; then the silence.
  ASSERT_EQ(env.progress.size(), 2u);
  EXPECT_EQ(env.progress[0].run.result(), "running");
  EXPECT_EQ(env.progress[0].diagnoses_before, 0);
  ASSERT_EQ(env.progress[0].run.changes_size(), 1);
  EXPECT_EQ(env.progress[0].run.changes(0), run.changes(0));
  EXPECT_EQ(env.progress[1].run.changes_size(), 2);
  EXPECT_EQ(env.progress[1].diagnoses_before, 0);
}

TEST(PlaybookEngine, ALongVerificationReportsTheRunEveryThirtySeconds) {
  // A job that takes 50 polls (100 s) to recover: the record of the run under
  // way is refreshed while it waits, so that `playbook runs` can tell a run
  // still waiting from one whose process died.
  FakeEnv env;
  env.polls_after_drain = -47;
  const auto run = RunPlaybook(Shipped(), "z1-rtsw03/Ethernet44", false, env);
  ASSERT_EQ(run.result(), "succeeded");
  ASSERT_GE(env.progress.size(), 2u + 3u) << "after each step, then at least every 30 s of 100";
  ASSERT_LE(env.progress.size(), 2u + 4u);
  for (size_t i = 2; i < env.progress.size(); ++i) {
    EXPECT_EQ(env.progress[i].run.result(), "running");
    EXPECT_EQ(env.progress[i].run.changes_size(), 2);
    const int64_t gap = env.progress[i].at_us - env.progress[i - 1].at_us;
    EXPECT_GE(gap, 30'000'000) << i;
    EXPECT_LE(gap, 32'000'100) << i << ": one 2 s poll late at most";
  }
}

TEST(PlaybookEngine, RefusesWithoutTheAnomalyOrOnAHostPortAndChangesNothing) {
  FakeEnv env;
  env.flapping = false;
  EXPECT_EQ(RunPlaybook(Shipped(), "z1-rtsw03/Ethernet44", false, env).result(), "refused");
  FakeEnv host;
  EXPECT_EQ(RunPlaybook(Shipped(), "z1-r03-h1/mlx5_3", false, host).result(), "refused");
  EXPECT_FALSE(env.drained || host.drained);
  EXPECT_EQ(env.silences + host.silences, 0u);
  EXPECT_TRUE(env.progress.empty() && host.progress.empty()) << "nothing under way to report";
}

TEST(PlaybookEngine, DryRunDescribesAndAFailedDrainStopsTheRun) {
  FakeEnv dry;
  const auto run = RunPlaybook(Shipped(), "z1-rtsw03/Ethernet44", true, dry);
  EXPECT_EQ(run.result(), "dry_run");
  EXPECT_FALSE(dry.drained);
  EXPECT_EQ(run.changes_size(), 0);
  EXPECT_TRUE(dry.progress.empty()) << "a dry run changes nothing, so reports nothing under way";
  bool capacity_shown = false;
  for (const auto& line : run.log()) capacity_shown |= line.find("capacity check passes; it would push 2") != std::string::npos;
  EXPECT_TRUE(capacity_shown) << run.DebugString();
  // The silence's length as the playbook states it, not as two clock reads
  // a microsecond apart make it.
  bool silence_shown = false;
  for (const auto& line : run.log()) silence_shown |= line == "would silence alerts on z1-rtsw03/Ethernet44 for 1d";
  EXPECT_TRUE(silence_shown) << run.DebugString();
  // A dry run that a precondition refuses still checks the others and
  // previews the steps, and says it would be refused.
  FakeEnv quiet;
  quiet.flapping = false;
  const auto preview = RunPlaybook(Shipped(), "z1-rtsw03/Ethernet44", true, quiet);
  EXPECT_EQ(preview.result(), "refused");
  EXPECT_TRUE(preview.dry_run());
  bool fabric_checked = false, drain_previewed = false;
  for (const auto& line : preview.log()) {
    fabric_checked |= line.starts_with("check fabric_link:");
    drain_previewed |= line.starts_with("would drain link");
  }
  EXPECT_TRUE(fabric_checked && drain_previewed) << preview.DebugString();
  EXPECT_FALSE(quiet.drained);
  EXPECT_EQ(quiet.silences, 0u);
  FakeEnv full;
  full.capacity = false;
  const auto refused = RunPlaybook(Shipped(), "z1-rtsw03/Ethernet44", false, full);
  EXPECT_EQ(refused.result(), "failed");
  EXPECT_EQ(full.silences, 0u) << "steps after the failed drain do not run";
  EXPECT_NE(refused.log(refused.log_size() - 1).find("below the policy's minimum"), std::string::npos);
}

TEST(PlaybookEngine, VerificationThatNeverHoldsFailsAfterItsTimeout) {
  FakeEnv env;
  v1::Playbook pb = Shipped();
  env.polls_after_drain = -1'000'000;  // never healthy
  const auto run = RunPlaybook(pb, "z1-rtsw03/Ethernet44", false, env);
  EXPECT_EQ(run.result(), "failed");
  EXPECT_TRUE(env.drained) << "what was changed stays, and is listed";
  EXPECT_EQ(run.changes_size(), 2);
}

TEST(PlaybookEngine, AStopDuringVerificationCancelsTheRunInsteadOfSpinning) {
  // Before: Pause returned at once while stopping, and the wait loop called
  // Diagnose as fast as it could until its 5-minute timeout.
  FakeEnv env;
  env.polls_after_drain = -1'000'000;  // never healthy
  env.stopping = true;
  const auto run = RunPlaybook(Shipped(), "z1-rtsw03/Ethernet44", false, env);
  EXPECT_EQ(run.result(), "cancelled");
  EXPECT_EQ(env.diagnoses(), 1) << "one poll, then the stop is seen";
  EXPECT_TRUE(env.drained) << "what was changed stays, and is listed";
  EXPECT_EQ(run.changes_size(), 2);
  EXPECT_NE(run.log(run.log_size() - 1).find("cancelled"), std::string::npos);
}

TEST(PlaybookEngine, AStopBeforeTheStepsChangesNothing) {
  // Ctrl-C while the preconditions were checked: the drain must not follow.
  FakeEnv env;
  env.stop_before_steps = true;
  const auto run = RunPlaybook(Shipped(), "z1-rtsw03/Ethernet44", false, env);
  EXPECT_EQ(run.result(), "cancelled");
  EXPECT_FALSE(env.drained);
  EXPECT_EQ(env.silences, 0u);
  EXPECT_EQ(run.changes_size(), 0);
  EXPECT_NE(run.log(run.log_size() - 1).find("cancelled before step 1 (drain_link)"), std::string::npos)
      << run.DebugString();
  // A dry run changes nothing either way, and previews to the end.
  FakeEnv dry;
  dry.stop_before_steps = true;
  EXPECT_EQ(RunPlaybook(Shipped(), "z1-rtsw03/Ethernet44", true, dry).result(), "dry_run");
}

TEST(PlaybookLoad, NamesEveryProblem) {
  testing::TempDir dir;
  const std::string path = dir / "bad.yaml";
  std::ofstream(path) << "name: x\nsteps:\n  - {action: reboot_switch}\n  - {check: fabric_link}\n"
                         "preconditions:\n  - {check: anomaly_active}\n";
  auto pb = LoadPlaybook(path);
  ASSERT_FALSE(pb.ok());
  const std::string m(pb.status().message());
  EXPECT_NE(m.find("reboot_switch"), std::string::npos) << m;
  EXPECT_NE(m.find("steps[1]"), std::string::npos) << m;
  EXPECT_NE(m.find("needs kind"), std::string::npos) << m;
}

}  // namespace
}  // namespace rocefab
