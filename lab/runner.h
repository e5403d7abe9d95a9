#pragma once
// `rocefab-lab run`: loads a scenario, builds the fabric model, starts the
// real daemons (one rocefab-collectord, a rocefab-hostd per host and a
// rocefab-switchd per switch) on ephemeral loopback ports, advances the
// model in real time while writing the files those daemons read, prints a
// timeline, and at the end stops everything.
//
// The ground truth (faults with exact times and targets) goes only to
// <run-dir>/truth.json; no daemon is given that path.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/topology.h"
#include "rocefab/v1/lab.pb.h"

namespace rocefab::lab {

struct RunOptions {
  std::string scenario_path;
  std::string run_dir;
  std::string bin_dir;        // where rocefab-collectord etc. are
  double duration_s = 0;      // 0: the scenario's
  bool daemons = true;        // false: model only (--no-daemons)
  bool keep = false;          // keep running after the duration until interrupted
  bool realtime = true;       // pace ticks to the wall clock
  bool write_files = true;    // false: pure model (--no-files), for scale runs
  double timeline_every_s = 5;
  // Where the files the daemons poll live while the run goes on: a tmpfs
  // (like the real sysfs) keeps thousands of small rewrites per tick cheap.
  // Empty: /dev/shm when writable, else the run directory. At the end the
  // trees are moved into the run directory.
  std::string live_dir;
  // rocefab CLI commands (arguments after `rocefab --collector ADDR`) to run
  // and print when the scenario ends, before the daemons stop.
  std::vector<std::string> show_commands;
  // Extra flags for rocefab-collectord, e.g. --alertmanager URL.
  std::vector<std::string> collector_args;
  // Scales every time of the scenario (its length, job starts, fault times
  // and flap periods), not the tick or the agents' poll interval.
  double time_scale = 1;
};

void ScaleScenarioTime(v1::Scenario* scenario, double factor);

// Loads and checks a scenario; fills defaults.
absl::StatusOr<v1::Scenario> LoadScenario(const std::string& path);

// The scenario's topology: its file (relative to the scenario) or generated.
absl::StatusOr<std::shared_ptr<const Topology>> TopologyForScenario(const v1::Scenario& scenario,
                                                                   const std::string& scenario_path);

// Returns the process exit code.
int Run(const RunOptions& options);

}  // namespace rocefab::lab
