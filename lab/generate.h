#pragma once
// `rocefab-lab generate` and `rocefab-lab suite --generate N --seed S`:
// scenarios drawn at random, so that the detectors are judged on faults
// nobody picked (docs/lab.md, "Generated scenarios").
//
// Each scenario draws its fabric size, poll interval, jobs (count, size,
// placement, collective, message size, compute time) and 0 to 3 faults
// (kind, tier, target, severity, onset, duration, overlap) from its own
// seed. A fault is placed where it can show at all: links and switch
// queues that carry traffic on the healthy fabric, NICs and GPUs of running
// jobs, ECN on queues that mark. Nothing else about the detectors is known
// to the generator.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/topology.h"
#include "rocefab/v1/lab.pb.h"

namespace rocefab::lab {

struct GenerateOptions {
  uint64_t seed = 1;
  int count = 100;
  uint32_t max_hosts = 32;     // per fabric: each host is an agent process
  uint32_t max_nics = 128;
  double clean_share = 0.1;    // scenarios without a fault
  double duration_s = 60;
};

// Scenario `index` of the suite seeded `seed`: the same pair always gives
// the same scenario, whatever the count.
absl::StatusOr<v1::Scenario> GenerateScenario(const GenerateOptions& options, int index);

// Writes options.count scenarios as <dir>/gen-<seed>-<index>.yaml and
// returns their paths.
absl::StatusOr<std::vector<std::string>> WriteGeneratedScenarios(const GenerateOptions& options,
                                                                 const std::string& dir);

// The tier a fault target sits on, for per-tier accuracy: "gpu", "nic"
// (a NIC, or its RTSW port), "rtsw-ctsw", "ctsw-atsw", or a whole switch's
// role ("rtsw", "ctsw", "atsw"); "other" when the topology does not know it.
std::string TargetTier(const Topology& topology, const std::string& target);

}  // namespace rocefab::lab
