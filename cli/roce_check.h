#pragma once
// `rocefab check roce`: each NIC's RoCE settings (the gauges rocefab-hostd
// reports, agents/host/roce_settings.h) against the QoS the switch port it
// faces reports applied, as NetQ's `check roce` does for its fabrics. Pure:
// the command (control_commands.cc) fetches both sides.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/topology.h"
#include "rocefab/v1/control.pb.h"

namespace rocefab::cli {

// One NIC's settings: gauge name -> value, and the per-priority ones.
struct NicRoce {
  std::map<std::string, uint64_t> values;
  std::map<std::string, std::map<uint32_t, uint64_t>> per_prio;
};

struct RoceMismatch {
  std::string nic;          // "z1-r01-h1/mlx5_0"
  std::string switch_port;  // "z1-rtsw01/Ethernet0"
  std::string setting;      // "pfc_enabled"
  std::string nic_value, switch_value;
  std::string why;
};

struct RoceCheck {
  size_t nics_checked = 0;
  std::vector<RoceMismatch> mismatches;
  // Settings NICs did not report, with how many (the driver does not expose
  // them, or dcbnl is unavailable): not checked, not assumed.
  std::map<std::string, size_t> unknown;
  std::vector<std::string> notes;
};

// `nics` by entity ("host/device"); `switch_qos` by switch name, only the
// switches that reported applied QoS.
RoceCheck CheckRoce(const Topology& topology, const std::map<std::string, NicRoce>& nics,
                    const std::map<std::string, v1::QosPolicy>& switch_qos);

// The gauges the check reads.
const std::vector<std::string>& RoceSettingNames();

}  // namespace rocefab::cli
