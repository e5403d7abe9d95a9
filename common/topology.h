#pragma once
// The fabric topology (proto/rocefab/v1/topology.proto), loaded from YAML and
// validated, with the lookups every component needs. Immutable after Build;
// share it as std::shared_ptr<const Topology> across threads.
//
// YAML schema:
//   switches: [{name: z1-rtsw01, role: rtsw, zone: z1}, ...]
//   hosts:    [{name: z1-r01-h1, zone: z1, rack: 1,
//               nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.1.1}]}, ...]
//   links:    [{a: z1-r01-h1/mlx5_0, b: z1-rtsw01/Ethernet0, speed_gbps: 400}, ...]

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "rocefab/v1/topology.pb.h"

namespace rocefab {

class Topology final {
 public:
  // Validates `proto`. Every problem is reported, one per line: duplicate
  // names, dangling or self links, a port used twice, a NIC with no link,
  // speeds that are not Ethernet speeds, links between the wrong tiers.
  static absl::StatusOr<std::shared_ptr<const Topology>> Build(v1::Topology proto);
  static absl::StatusOr<std::shared_ptr<const Topology>> FromYaml(std::string_view text,
                                                                  std::string_view source_name);
  static absl::StatusOr<std::shared_ptr<const Topology>> Load(const std::string& path);

  const v1::Topology& proto() const { return proto_; }

  // nullptr when absent.
  const v1::TopoSwitch* FindSwitch(std::string_view name) const;
  const v1::TopoHost* FindHost(std::string_view name) const;
  // The index into proto().links() of the link on `port` ("dev/port"), or -1.
  int LinkOfPort(std::string_view port) const;
  // The far end of link `link` as seen from `port`.
  const std::string& PeerOf(int link, std::string_view port) const;
  // Ports of a switch, in link order ("Ethernet0", ...).
  const std::vector<std::string>& PortsOf(std::string_view switch_name) const;

  // Whether `entity` names something of this fabric: a host or switch, a
  // host's NIC or GPU ("z1-r01-h1/mlx5_0", ".../gpu3"), a switch port, or a
  // switch's buffer pool (".../*_pool"). InvalidArgument otherwise, naming
  // the nearest known names.
  absl::Status CheckEntity(std::string_view entity) const;

 private:
  Topology() = default;
  v1::Topology proto_;
  std::unordered_map<std::string, int> switch_index_, host_index_, port_link_;
  std::unordered_map<std::string, std::vector<std::string>> switch_ports_;
};

// Whether `port` ("dev/port") is the end of a link between two switches (a
// fabric link, never a host port); NotFound when it is no port of the
// topology.
absl::StatusOr<bool> IsSwitchToSwitchLink(const Topology& topology, const std::string& port);

// The device of an entity name: "z1-rtsw01" of "z1-rtsw01/Ethernet8"; the
// name itself when it has no '/'.
std::string EntityDevice(const std::string& entity);

// The rack prefix of a host address: "10.1.3.7" -> "10.1.3.0/24"; empty
// without a dot. Racks are /24s (docs/controller.md, "Addressing").
std::string RackPrefix(const std::string& ip);

// "dev/port" -> ("dev", "port"); false without exactly one '/'.
bool SplitPortName(std::string_view full, std::string_view* device, std::string_view* port);

// Writes the YAML schema above (yaml-cpp emitter).
void WriteTopologyYaml(const v1::Topology& topology, std::ostream& out);

}  // namespace rocefab
