#pragma once
// Generates AI-Zone fabrics: Z zones of R racks; each rack has one RTSW and H
// hosts of N NICs (one per GPU); each RTSW is cabled to every CTSW of its zone
// with enough parallel links to match its host-facing capacity (1:1 inside a
// zone); CTSWs reach the ATSWs with 1/uplink_ratio of their downlink capacity
// (the Llama 3 clusters are 1:7 above the pods).
//
// Names: hosts z1-r03-h1, NICs mlx5_0.. (netdev eth0..), RTSWs z1-rtsw03,
// CTSWs z1-ctsw02, ATSWs atsw01, switch ports Ethernet0, Ethernet4, ...
// (four lanes per port). Host NIC i of host h in rack r of zone z has IP
// 10.z.r.((h-1)*N + i + 1); racks past 255 continue in the next /16.

#include <cstdint>

#include <memory>

#include "absl/status/statusor.h"
#include "common/topology.h"
#include "rocefab/v1/topology.pb.h"

namespace rocefab::lab {

struct TopologyParams {
  uint32_t zones = 1;
  uint32_t racks_per_zone = 8;
  uint32_t hosts_per_rack = 2;
  uint32_t nics_per_host = 8;
  uint32_t ctsw_per_zone = 4;
  uint32_t atsw = 0;
  double uplink_ratio = 7;  // CTSW downlink:uplink capacity
  uint32_t speed_gbps = 400;
};

absl::StatusOr<v1::Topology> GenerateTopology(const TopologyParams& params);
// GenerateTopology, built (for tests and tools that need the Topology).
absl::StatusOr<std::shared_ptr<const Topology>> BuildGenerated(const TopologyParams& params);

// The Llama 3 training cluster's shape: 8 zones of 192 racks of 2 hosts with
// 8 NICs (24,576 GPUs), 16 CTSWs per zone, 16 ATSWs, 1:7 above the pods.
TopologyParams Llama3Params();

}  // namespace rocefab::lab
