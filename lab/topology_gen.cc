#include "lab/topology_gen.h"

#include <cmath>
#include <cstdio>

#include "common/strings.h"

namespace rocefab::lab {
namespace {

std::string Padded(uint32_t n, int width) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*u", width, n);
  return buf;
}

int Width(uint32_t count) { return count >= 100 ? (count >= 1000 ? 4 : 3) : 2; }

// Hands out Ethernet0, Ethernet4, ... per switch.
class PortAllocator {
 public:
  std::string Next(const std::string& device) {
    uint32_t& next = next_[device];
    std::string port = StrCat(device, "/Ethernet", next * 4);
    ++next;
    return port;
  }

 private:
  std::unordered_map<std::string, uint32_t> next_;
};

}  // namespace

TopologyParams Llama3Params() {
  TopologyParams params;
  params.zones = 8;
  params.racks_per_zone = 192;
  params.hosts_per_rack = 2;
  params.nics_per_host = 8;
  params.ctsw_per_zone = 16;
  params.atsw = 16;
  params.uplink_ratio = 7;
  return params;
}

absl::StatusOr<v1::Topology> GenerateTopology(const TopologyParams& p) {
  if (p.zones == 0 || p.racks_per_zone == 0 || p.hosts_per_rack == 0 || p.nics_per_host == 0 ||
      p.ctsw_per_zone == 0)
    return absl::InvalidArgumentError(
        "zones, racks-per-zone, hosts-per-rack, nics-per-host and ctsw-per-zone must be >= 1");
  if (p.zones > 1 && p.atsw == 0)
    return absl::InvalidArgumentError("more than one zone needs --atsw >= 1 to join them");
  if (!(p.uplink_ratio >= 1))
    return absl::InvalidArgumentError("uplink-ratio must be >= 1 (downlink:uplink, e.g. 7)");
  if (p.nics_per_host * p.hosts_per_rack > 250)
    return absl::InvalidArgumentError("at most 250 NICs per rack (one /24 per rack)");
  if (static_cast<uint64_t>(p.zones) * p.racks_per_zone * p.hosts_per_rack * p.nics_per_host >
      1'000'000)
    return absl::InvalidArgumentError("more than a million NICs is beyond what the lab models");

  v1::Topology topo;
  PortAllocator ports;
  const int rack_width = Width(p.racks_per_zone);
  const int ctsw_width = Width(p.ctsw_per_zone);
  const uint32_t nics_per_rack = p.hosts_per_rack * p.nics_per_host;
  // Parallel links per RTSW-CTSW pair so the rack is not oversubscribed.
  const uint32_t links_per_pair = (nics_per_rack + p.ctsw_per_zone - 1) / p.ctsw_per_zone;
  const uint32_t ctsw_downlinks = p.racks_per_zone * links_per_pair;
  const uint32_t ctsw_uplinks =
      p.atsw == 0 ? 0 : static_cast<uint32_t>(std::ceil(ctsw_downlinks / p.uplink_ratio));

  for (uint32_t a = 1; a <= p.atsw; ++a) {
    auto* sw = topo.add_switches();
    sw->set_name(StrCat("atsw", Padded(a, Width(p.atsw))));
    sw->set_role(v1::SWITCH_ROLE_ATSW);
  }
  uint32_t next_atsw = 0;
  for (uint32_t z = 1; z <= p.zones; ++z) {
    const std::string zone = StrCat("z", z);
    std::vector<std::string> ctsws;
    for (uint32_t c = 1; c <= p.ctsw_per_zone; ++c) {
      auto* sw = topo.add_switches();
      sw->set_name(StrCat(zone, "-ctsw", Padded(c, ctsw_width)));
      sw->set_role(v1::SWITCH_ROLE_CTSW);
      sw->set_zone(zone);
      ctsws.push_back(sw->name());
    }
    for (uint32_t r = 1; r <= p.racks_per_zone; ++r) {
      auto* rtsw = topo.add_switches();
      rtsw->set_name(StrCat(zone, "-rtsw", Padded(r, rack_width)));
      rtsw->set_role(v1::SWITCH_ROLE_RTSW);
      rtsw->set_zone(zone);
      const std::string rtsw_name = rtsw->name();
      for (uint32_t h = 1; h <= p.hosts_per_rack; ++h) {
        auto* host = topo.add_hosts();
        host->set_name(StrCat(zone, "-r", Padded(r, rack_width), "-h", h));
        host->set_zone(zone);
        host->set_rack(r);
        for (uint32_t i = 0; i < p.nics_per_host; ++i) {
          auto* nic = host->add_nics();
          nic->set_name(StrCat("mlx5_", i));
          nic->set_netdev(StrCat("eth", i));
          nic->set_gpu(i);
          const uint32_t host_octet = (h - 1) * p.nics_per_host + i + 1;
          nic->set_ip(StrCat("10.", z + 16 * ((r - 1) / 255), ".", (r - 1) % 255 + 1, ".",
                             host_octet));
          auto* link = topo.add_links();
          link->set_a(StrCat(host->name(), "/", nic->name()));
          link->set_b(ports.Next(rtsw_name));
          link->set_speed_gbps(p.speed_gbps);
        }
      }
      for (const std::string& ctsw : ctsws) {
        for (uint32_t k = 0; k < links_per_pair; ++k) {
          auto* link = topo.add_links();
          link->set_a(ports.Next(rtsw_name));
          link->set_b(ports.Next(ctsw));
          link->set_speed_gbps(p.speed_gbps);
        }
      }
    }
    // CTSW uplinks, spread round-robin over the ATSWs.
    for (const std::string& ctsw : ctsws) {
      for (uint32_t u = 0; u < ctsw_uplinks; ++u) {
        auto* link = topo.add_links();
        link->set_a(ports.Next(ctsw));
        link->set_b(ports.Next(topo.switches(next_atsw % p.atsw).name()));
        link->set_speed_gbps(p.speed_gbps);
        ++next_atsw;
      }
    }
  }
  return topo;
}

absl::StatusOr<std::shared_ptr<const Topology>> BuildGenerated(const TopologyParams& params) {
  auto proto = GenerateTopology(params);
  if (!proto.ok()) return proto.status();
  auto topology = Topology::Build(*proto);
  if (!topology.ok()) return topology.status();
  return std::shared_ptr<const Topology>(std::move(*topology));
}

}  // namespace rocefab::lab
