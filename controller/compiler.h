#pragma once
// Compiles the routing and QoS policy over the topology into the desired
// config of every switch: routes to host prefixes through ECMP nexthop
// groups (ecmp, eecmp) or pinned single-uplink groups (path-pinning), the
// hash fields, and QoS. Pure: same inputs, same output, byte for byte.

#include <map>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "common/topology.h"
#include "controller/te.h"
#include "rocefab/v1/control.pb.h"

namespace rocefab::controller {

// Checks a policy and fills defaults. Every problem is reported (ECN min >
// max, a lossless class without PFC, a DSCP mapped twice, ...).
absl::StatusOr<v1::Policy> ValidatePolicy(v1::Policy policy);

// The point-to-point addresses the compiler gives each end of a
// switch-to-switch link: 100.64.0.0/10, a /31 per link.
std::string LinkAddress(int link_index, bool a_side);

// The hash of a config's items (sha256 over their deterministic encoding).
std::string ContentHash(const v1::SwitchConfig& config);

// Desired config per switch, stamped with `generation`. `drained` holds
// "switch/port" names whose links are out of every group. Under `scheme:
// te`, the switches route like `eecmp` (the fallback) and each RTSW also
// gets the TE overrides on it from `te`: a policy rule (iif <ingress> to
// <prefix> lookup <table>) per override, and in each uplink's table a route
// to the prefix through that uplink alone (docs/controller.md, "TE").
absl::StatusOr<std::map<std::string, v1::SwitchConfig>> Compile(const Topology& topology,
                                                                const v1::Policy& policy,
                                                                const std::set<std::string>& drained,
                                                                uint64_t generation,
                                                                const std::vector<TeOverride>* te = nullptr);

// Whether the policy's default or any zone runs `scheme: te`.
bool UsesTe(const v1::Policy& policy);

// The share of each rack's uplink capacity left with `drained` out, by RTSW.
std::map<std::string, double> RemainingUplinkShare(const Topology& topology,
                                                   const std::set<std::string>& drained);

}  // namespace rocefab::controller
