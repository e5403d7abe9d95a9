#pragma once
// `rocefab-lab study`: a flow-level routing study on a generated fabric (by
// default the Llama 3 cluster's shape, 24,576 GPUs, 1:7 above the pods),
// docs/routing-study.md. For AllReduce and AllToAll jobs, packed and
// fragmented placements, and 0, 1 or several failed rack uplinks, it
// compiles each routing scheme with the real compiler (ECMP, path pinning,
// E-ECMP with 1, 4 and 16 QPs, and TE over E-ECMP with 4), applies the
// configs to the fabric model and measures the rack uplinks the job uses and
// its bus bandwidth.
//
// A failure is a rack uplink (RTSW to CTSW) of the job's racks that is out,
// as after routing has converged around it: every scheme is compiled with
// it drained, and TE allocates around it. Transients (QP timeouts while the
// fabric reconverges) are what `rocefab-lab run` with a link_flap shows.

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/topology.h"
#include "controller/te.h"
#include "lab/fabric_model.h"
#include "lab/topology_gen.h"
#include "rocefab/v1/lab.pb.h"

namespace rocefab::lab {

struct StudyOptions {
  TopologyParams topology = Llama3Params();
  uint32_t allreduce_hosts = 128;
  // AllToAll connects every host pair on every rail, so its modelled flows
  // grow as hosts^2 x QPs: 32 hosts at 16 QPs are 127k flows.
  uint32_t alltoall_hosts = 32;
  std::vector<uint32_t> failures = {0, 1, 4};
  uint32_t seed = 1;
  double seconds = 2;  // model time per case, after the configs apply
};

struct StudyRow {
  std::string collective;  // all_reduce, all_to_all
  std::string placement;   // packed, fragmented
  uint32_t failures = 0;
  std::string scheme;      // ecmp, path_pinning, eecmp, te
  uint32_t qps = 1;
  uint32_t hosts = 0;
  // Over the job's footprint above the racks (the uplinks of its racks'
  // RTSWs and the CTSW links down to them): max/mean over the links that
  // carry traffic, the busiest link, and the mean over all of them, idle
  // ones included (a ring leaves some idle by its shape, hashing by chance).
  double max_to_mean = 0;
  double max_utilization = 0;
  double mean_utilization = 0;
  double busbw_gbs = 0;
  double ideal_busbw_gbs = 0;  // on an idle, healthy fabric
};

absl::StatusOr<std::vector<StudyRow>> RunStudy(const StudyOptions& options);

// What-if for a real placement (`rocefab-lab study --placement-from-registry
// --job ID`): every scheme for `hosts` running `collective`, with `drained`
// links out, and the scheme to recommend: the simplest (fewest QPs, E-ECMP
// before TE, never path pinning) within 2% of the best bandwidth.
struct WhatIf {
  std::vector<StudyRow> rows;
  size_t recommended = 0;  // index into rows
};
absl::StatusOr<WhatIf> RunWhatIf(const std::shared_ptr<const Topology>& topology, const std::vector<std::string>& hosts,
                                 v1::Collective collective, const std::set<std::string>& drained = {});

// The traffic matrix TE allocates over, exactly: what each NIC of `model`
// offers each peer, by RTSW ingress port and destination rack (the lab's
// oracle; the collector's measured matrix is collector/traffic_matrix.h).
std::vector<controller::TeDemand> OfferedDemands(const FabricModel& model);

// The balls-in-bins check of ECMP's entropy the paper quotes: `flows` flows
// hashed onto `links` links, the mean over `trials` of max/mean flows per link.
double EcmpMaxToMean(uint32_t flows, uint32_t links, uint32_t trials, uint32_t seed);

}  // namespace rocefab::lab
