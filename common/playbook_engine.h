#pragma once
// Runs a machine-run playbook (playbooks/auto/*.yaml): preconditions, steps,
// verification and follow-up, against the fabric as an environment. Every
// run ends in a PlaybookRun record that the caller audits.
//
// A precondition that fails refuses the run and changes nothing. A step that
// fails stops the run (what was already changed is listed in `changes` and
// stays: a half-drained state is explicit, never silently undone). With
// dry_run, checks run and actions are only described.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rocefab/v1/control.pb.h"
#include "rocefab/v1/diagnosis.pb.h"
#include "rocefab/v1/playbook.pb.h"

namespace rocefab {

class PlaybookEnv {
 public:
  virtual ~PlaybookEnv() = default;
  virtual absl::StatusOr<std::vector<v1::Anomaly>> ActiveAnomalies() = 0;  // with their jobs
  virtual absl::StatusOr<v1::DiagnoseJobResponse> Diagnose(const std::string& job, int64_t window_us) = 0;
  // With `dry_run`, the controller runs its capacity check and says which
  // switches the drain would push, and changes nothing.
  virtual absl::StatusOr<v1::DrainResponse> Drain(const std::string& port, const std::string& reason,
                                                  bool dry_run) = 0;
  virtual absl::StatusOr<uint64_t> Silence(const std::string& entity, int64_t until_us,
                                           const std::string& comment) = 0;
  // Whether `port` ("device/port") joins two switches; an error when the
  // topology is unknown.
  virtual absl::StatusOr<bool> IsFabricLink(const std::string& port) = 0;
  virtual int64_t NowUs() = 0;
  // Waits between two polls of a verification. False when the run must stop
  // (the daemon is shutting down, the operator pressed Ctrl-C): the run ends
  // as "cancelled".
  virtual bool Pause(int64_t us) = 0;
  // True once the run must stop: no further step starts, and the run ends
  // as "cancelled" with what it changed so far.
  virtual bool Stopping() { return false; }
  // A real run's state so far (result "running"), after each step that
  // succeeded: an audit log shows a change the moment it is made, not only
  // once verification, which can wait minutes, is over. Again every 30 s
  // while a verification waits, so that a run whose process died is told
  // from one still waiting (PlaybookRun.heard_us).
  virtual void Progress(const v1::PlaybookRun& run) { (void)run; }
};

// Loads and checks a playbook YAML; every problem is reported.
absl::StatusOr<v1::Playbook> LoadPlaybook(const std::string& path);

v1::PlaybookRun RunPlaybook(const v1::Playbook& playbook, const std::string& target, bool dry_run,
                            PlaybookEnv& env);

}  // namespace rocefab
