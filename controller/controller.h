#pragma once
// rocefab-controllerd's core: owns the topology, the policies and the
// desired state, and rolls configs out safely: canary first, then waves,
// each followed by a health gate; a failed apply or gate, or an abort,
// rolls every touched switch back.
//
// Concurrency. One mutex guards the state and is never held across a call
// to a switch, a gate or a wait, so a drain or `Status` during a rollout
// answers at once. One rollout runs at a time. Every push to a switch goes
// through that switch's own push lock and carries the newest config for it
// at the moment of sending, so a drain and a wave meeting on one switch
// cannot undo each other.
//
// Policies. `target` is what the fabric should run; `running` what it ran
// after the last rollout that completed. Until a rollout completes, a drain
// changes switches the rollout has not reached in terms of `running`, so a
// pending policy never leaks out through a drain. A rollback makes the
// running policy the target again.
//
// Files: rollout.cc (Apply, Abort), drains.cc (Drain), controller.cc (the
// rest); service.h is the gRPC face.

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "common/clock.h"
#include "common/topology.h"
#include "controller/fleet.h"
#include "controller/gate.h"
#include "controller/store.h"
#include "controller/te.h"
#include "rocefab/v1/control.pb.h"

namespace rocefab::controller {

class Controller final {
 public:
  // `gate` may be null: gates then check only the agents' item states.
  Controller(std::shared_ptr<const Topology> topology, v1::Policy policy, Store& store, Fleet& fleet,
             Gate* gate, const v1::ControllerdConfig& config, const Clock& clock);

  // Loads the running policy and the latest desired generation, then
  // compiles the target policy; returns the desired generation.
  absl::StatusOr<uint64_t> Start(const std::string& who, const std::string& why);

  absl::StatusOr<v1::PlanResponse> Plan();
  absl::StatusOr<v1::ApplyResponse> Apply(const v1::ApplyRequest& request, const std::string& who);
  v1::AbortResponse Abort(const std::string& why, const std::string& who);
  absl::StatusOr<v1::StatusResponse> Status();
  absl::StatusOr<v1::HistoryResponse> History(uint32_t limit);
  absl::StatusOr<v1::DrainResponse> Drain(const v1::DrainRequest& request, const std::string& who);
  // Stops a running rollout at its next step (daemon shutdown).
  void Shutdown();

  // Centralized TE (te_loop.h). Overrides are part of the desired state
  // like drains: `running_te` is what the last completed rollout put on
  // the fabric, and a rollback restores it.
  struct TeState {
    bool enabled = false;
    std::string why_not;  // when not enabled
    std::vector<TeOverride> overrides;
    std::set<std::string> drained;
  };
  // Enabled when the target policy has a zone on `scheme: te`, it is the
  // running one (no operator change pending) and no rollout is running.
  TeState TeStatus() const;
  // Makes `overrides` the desired TE overrides: a new generation when they
  // change. FailedPrecondition when TeStatus() is not enabled.
  absl::StatusOr<uint64_t> SetTeOverrides(std::vector<TeOverride> overrides, const std::string& who,
                                          const std::string& why);

  uint64_t generation() const;

  // What the controller has done since it started, for /metrics.
  struct Activity {
    bool rollout_active = false;
    size_t wave = 0, waves = 0;
    uint64_t rollouts_applied = 0, rollouts_rolled_back = 0, rollouts_aborted = 0;
    uint64_t drains = 0, undrains = 0;
  };
  Activity activity() const;

 private:
  struct Rollout {
    bool active = false;
    bool abort = false;
    std::string abort_reason;
    uint64_t generation = 0;
    std::string who;
    size_t wave = 0, waves = 0;
    std::set<std::string> on_target;  // switches this rollout has reached
  };

  TeState TeStatusLocked() const;
  absl::StatusOr<uint64_t> RecompileLocked(const std::string& who, const std::string& why);
  // The config a push to `name` sends now.
  v1::SwitchConfig ConfigForLocked(const std::string& name) const;
  // Pushes the newest config of each switch, in parallel; failures by switch.
  std::map<std::string, std::string> PushNewest(const std::vector<std::string>& names,
                                                std::set<std::string>* unreachable = nullptr);
  std::mutex& PushLock(const std::string& name);
  // Item failures the agents report, and the detectors' verdict.
  std::string HealthGate(const std::vector<std::string>& switches, int64_t since_us, bool ask_detectors);
  void Audit(const std::string& who, const std::string& action, const std::string& target,
             const std::string& why, const std::string& detail, uint64_t generation);
  void AuditLocked(const std::string& who, const std::string& action, const std::string& target,
                   const std::string& why, const std::string& detail, uint64_t generation);
  void RollBack(const std::vector<std::string>& touched, const std::map<std::string, v1::SwitchConfig>& previous,
                const std::string& who, const std::string& why, std::string* failure, v1::ApplyResponse* response);

  std::shared_ptr<const Topology> topology_;
  Store& store_;
  Fleet& fleet_;
  Gate* gate_;
  v1::ControllerdConfig config_;
  const Clock& clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // an abort wakes a gate's wait
  v1::Policy target_;
  std::optional<v1::Policy> running_;
  uint64_t generation_ = 0;
  std::map<std::string, v1::SwitchConfig> desired_;   // target + drains, at generation_
  std::map<std::string, v1::SwitchConfig> fallback_;  // running + drains, while they differ
  // After a rollback with no running policy known: the restored configs,
  // which drains cannot recompute.
  bool frozen_ = false;
  Rollout rollout_;
  Activity activity_;  // its counters; the rollout fields come from rollout_
  std::map<std::string, std::unique_ptr<std::mutex>> push_locks_;
  std::vector<TeOverride> te_, running_te_;  // desired, and as of the last completed rollout
};

}  // namespace rocefab::controller
