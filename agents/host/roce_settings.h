#pragma once
// A NIC's RoCE QoS settings, as the kernel and the mlx5 driver expose them
// (docs/counters.md, "RoCE settings"; `rocefab check roce` compares them
// with the switch port they face):
//   class/net/<netdev>/mtu                                      the MTU
//   kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_tos   rdma_cm's default ToS (upstream, 4.11+;
//                                                               only once the directory was created)
//   class/net/<netdev>/ecn/roce_rp/enable/<prio>                DCQCN reaction point on (MLNX_OFED only)
//   class/net/<netdev>/ecn/roce_np/enable/<prio>                CNPs sent for CE-marked packets (MLNX_OFED)
//   class/net/<netdev>/ecn/roce_np/cnp_dscp, cnp_802p_prio      the CNPs' DSCP and 802.1p priority (MLNX_OFED)
//   kernel/debug/mlx5/<pci>/cc_params/np_cnp_dscp, np_cnp_prio  the same, upstream debugfs (root only)
// and, over netlink dcbnl (DCB_CMD_IEEE_GET), PFC per priority (ieee_pfc's
// pfc_en bitmap) and the APP table: mlx5 trusts DSCP exactly when the table
// holds DSCP entries (selector IEEE_8021QAZ_APP_SEL_DSCP), and maps each to
// a priority. Absent files are normal (which exist depends on the driver);
// they are left out, never sent as 0. Garbage counts as a parse error.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "agents/host/rdma_sysfs.h"
#include "common/dcb.h"
#include "absl/status/statusor.h"
#include "common/fs_root.h"

struct nlmsghdr;
struct nl_sock;

namespace rocefab::hostd {

struct RoceSettings {
  std::optional<uint64_t> mtu_bytes, roce_tos, cnp_dscp, cnp_prio;
  std::map<uint32_t, uint64_t> ecn_rp_enabled, ecn_np_enabled;  // prio -> 0/1
  // From dcbnl.
  std::map<uint32_t, uint64_t> pfc_enabled;  // prio -> 0/1, all eight
  std::optional<uint64_t> dscp_trust;        // 1: the APP table maps DSCPs
  std::map<uint32_t, uint32_t> dscp_to_prio;  // the APP table's DSCP entries
};

// The files above for one RDMA port (its netdev may be empty).
RoceSettings ReadRoceFiles(const FsRoot& sysfs, const std::string& device, uint32_t port,
                           const std::string& netdev, ReadHealth* health);

// Fills the dcbnl part of `settings` from `dcb`.
void MergeDcb(const DcbSettings& dcb, RoceSettings* settings);

// The settings as the NIC gauges of the vocabulary: mtu_bytes, roce_tos,
// cnp_dscp, cnp_prio, dscp_trust, roce_prio (the priority the APP table
// gives RoCE's DSCP) and, per priority, roce_ecn_rp_enabled,
// roce_ecn_np_enabled and pfc_enabled.
void AddRoceSettings(const RoceSettings& settings, NicReading* nic);

}  // namespace rocefab::hostd
