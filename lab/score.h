#pragma once
// `rocefab-lab score` and `rocefab-lab suite`: how well the collector's
// detectors and diagnoses found the faults a run injected (docs/lab.md,
// "Scoring").
//
// Per fault of truth.json:
//  - detected: some anomaly names the fault's target (either end of a
//    faulty link, any port of a faulty switch, the straggling GPU) and was
//    raised between the fault's start and its end (plus the clear time);
//  - detection latency: when the collector raised the first such anomaly,
//    minus the fault's start;
//  - top-1: `job diagnose` of each job whose paths cross the target, over
//    the fault's first seconds (or until it was first named, when that came
//    later) with only findings that started then and had been raised by
//    then, puts a finding on the target first, of a kind whose playbook
//    handles the fault (FindingFitsFault). With k faults on a job's paths at once, each
//    must be among its first k findings. A fault on no job's path is judged
//    on the fabric-wide ranking.
// False positives: anomalies raised by no fault. A root cause (storm, link,
// ECN, drop, straggler, drift) that names no fault's target is one; a
// consequence (pause victim, loss, busbw regression, buffer level) is one
// only when no fault was active around it.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace rocefab::lab {

struct FaultScore {
  std::string kind, target;
  double start_s = 0;
  bool detected = false;
  // Found without a detection of its own: its target was already named,
  // by a finding of its kind, when it began (the same condition laid twice
  // over one element, as two lossy-link faults on the two ends of one
  // link). Such a fault has no detection latency.
  bool already_named = false;
  double latency_s = -1;
  // How long the lab slipped behind the wall clock from the run's start to
  // the fault's detection (truth.json "lab_slip"). Truth's times are the
  // model's laid on the wall clock from the start, so all of it is in the
  // measured latency: before the onset it moved the fault later, after it
  // the counters and records that showed it.
  double lab_slip_s = 0;
  bool top1 = false;
  std::string top1_kind, top1_entity;
  std::string tier;  // TargetTier of the target
  std::vector<std::string> jobs;  // judged through these jobs' diagnoses
};

struct RunScore {
  std::string scenario;
  std::vector<FaultScore> faults;
  std::vector<std::string> false_positives;  // "kind entity"
  int unobservable = 0;  // faults that could not show (truth.json "observable": false)
  double lab_late_s = 0;  // how long the lab itself ran behind the wall clock (truth.json "lab_late")
  nlohmann::json ToJson() const;
};

struct ScoreOptions {
  double top1_horizon_s = 15;  // diagnose over the fault's first seconds
  double clear_grace_s = 10;   // symptoms may outlast their fault this long
};

// Whether a finding of `finding_kind` sends the operator to the playbook
// that handles a fault of `fault_kind` (strict top-1).
bool FindingFitsFault(const std::string& fault_kind, const std::string& finding_kind);

absl::StatusOr<RunScore> ScoreRun(const std::string& run_dir, const ScoreOptions& options = {});

// Totals over runs: top1_accuracy, recall, false_positives,
// detection_latency_s {p50, p95}.
nlohmann::json Summarize(const std::vector<RunScore>& runs);

// Human-readable table of runs and the summary.
std::string FormatScores(const std::vector<RunScore>& runs);

}  // namespace rocefab::lab
