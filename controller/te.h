#pragma once
// Centralized traffic engineering (`scheme: te`, docs/controller.md "TE"):
// a CSPF-style allocator that places each (ingress port, destination rack)
// demand of a traffic matrix on the path (an RTSW uplink, then one of its
// CTSW's parallel links down to the destination rack) that keeps the most
// loaded link least loaded, largest demands first. Its output is
// (ingress port, destination prefix) -> egress port overrides on the RTSW
// and on the CTSW the path crosses, which the controller programs as policy
// rules over the ECMP fallback (compiler.h): a demand whose link dies falls
// back to ECMP at once, without a new config.
//
// Demands between zones, and within a rack, stay on ECMP. Pure and
// deterministic.

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/topology.h"

namespace rocefab::controller {

struct TeDemand {
  std::string ingress;     // the RTSW port the traffic enters by: "z1-rtsw01/Ethernet0"
  std::string dst_prefix;  // the destination rack: "10.1.3.0/24"
  double bytes_per_s = 0;
};

struct TeOverride {
  std::string ingress;     // "z1-rtsw01/Ethernet0", or on a CTSW the port facing the uplink
  std::string dst_prefix;  // "10.1.3.0/24"
  std::string egress;      // "z1-rtsw01/Ethernet32"; the same switch as ingress
  bool operator==(const TeOverride&) const = default;
};

struct TeResult {
  std::vector<TeOverride> overrides;
  // The utilisation of the busiest RTSW uplink or CTSW downlink under the
  // placement, as the allocator predicts it.
  double max_utilization = 0;
  double spread = 0;      // the sum of squared link utilisations: lower is more even
  size_t placed = 0;      // demands given an override
  size_t left_ecmp = 0;   // demands left to ECMP (other zone, no usable path)
};

// `unusable` holds "switch/port" names (drained or down) no override may use.
absl::StatusOr<TeResult> AllocateTe(const Topology& topology, std::vector<TeDemand> demands,
                                    const std::set<std::string>& unusable);

// How `overrides` would carry `demands`: the busiest RTSW uplink or CTSW
// downlink, with demands no override matches spread as ECMP spreads them
// in expectation (its collisions are what it cannot show). The TE loop
// compares the overrides it runs with a new allocation by this.
struct TeEvaluation {
  double max_utilization = 0;
  size_t broken = 0;     // overrides whose egress link is unusable
  // Demands of at least 1% of a link that no override carries, and RTSW
  // overrides that carry no such demand: the traffic moved.
  size_t uncovered = 0;
  size_t stale = 0;
};
TeEvaluation EvaluateTe(const Topology& topology, const std::vector<TeDemand>& demands,
                        const std::vector<TeOverride>& overrides, const std::set<std::string>& unusable);

}  // namespace rocefab::controller
