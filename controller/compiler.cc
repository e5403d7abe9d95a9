#include "controller/compiler.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <openssl/evp.h>

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <cstdio>

#include "common/strings.h"

namespace rocefab::controller {
namespace {

// The /16 holding a /24: "10.1.3.0/24" -> "10.1.0.0/16".
std::string Slash16(const std::string& prefix24) {
  const size_t first = prefix24.find('.');
  const size_t second = first == std::string::npos ? first : prefix24.find('.', first + 1);
  return second == std::string::npos ? prefix24 : StrCat(prefix24.substr(0, second), ".0.0/16");
}

bool ValidIpv4(const std::string& ip) {
  unsigned a, b, c, d;
  char tail;
  return std::sscanf(ip.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a < 256 &&
         b < 256 && c < 256 && d < 256;
}

v1::RoutingScheme SchemeOfZone(const v1::Policy& policy, const std::string& zone) {
  for (const auto& z : policy.zones())
    if (z.zone() == zone) return z.scheme();
  return policy.default_scheme();
}

// The topology's graph, as the compiler sees it: per switch, its links to
// each neighbour and to hosts.
struct Fabric {
  struct Port {
    std::string name;      // Ethernet32
    std::string peer_dev;  // z1-ctsw01
    int link = -1;
    bool a_side = true;
    bool drained = false;
    bool to_host = false;
    std::string host_ip;   // for host ports
  };
  std::map<std::string, std::vector<Port>> ports;  // switch -> ports
  std::map<std::string, std::set<std::string>> prefixes;  // RTSW -> rack /24s
};

Fabric BuildFabric(const Topology& topology, const std::set<std::string>& drained) {
  Fabric fabric;
  const v1::Topology& p = topology.proto();
  for (int l = 0; l < p.links_size(); ++l) {
    const auto& link = p.links(l);
    const bool link_drained = drained.count(link.a()) || drained.count(link.b());
    for (int side = 0; side < 2; ++side) {
      const std::string& mine = side == 0 ? link.a() : link.b();
      const std::string& theirs = side == 0 ? link.b() : link.a();
      std::string_view dev, port, peer_dev, peer_port;
      SplitPortName(mine, &dev, &port);
      SplitPortName(theirs, &peer_dev, &peer_port);
      if (topology.FindSwitch(dev) == nullptr) continue;
      Fabric::Port entry;
      entry.name = std::string(port);
      entry.peer_dev = std::string(peer_dev);
      entry.link = l;
      entry.a_side = side == 0;
      entry.drained = link_drained;
      if (const v1::TopoHost* host = topology.FindHost(peer_dev)) {
        entry.to_host = true;
        for (const auto& nic : host->nics())
          if (nic.name() == peer_port) entry.host_ip = nic.ip();
        fabric.prefixes[std::string(dev)].insert(RackPrefix(entry.host_ip));
      }
      fabric.ports[std::string(dev)].push_back(entry);
    }
  }
  return fabric;
}

v1::Nexthop HopOf(const Fabric::Port& port) {
  v1::Nexthop hop;
  hop.set_port(port.name);
  hop.set_gateway(LinkAddress(port.link, !port.a_side));
  return hop;
}

void AddGroup(v1::SwitchConfig* config, uint32_t id, const std::vector<const Fabric::Port*>& ports) {
  auto* item = config->add_items();
  item->set_key(StrCat("nhg/", id));
  auto* group = item->mutable_nexthop_group();
  group->set_id(id);
  for (const auto* port : ports) *group->add_nexthops() = HopOf(*port);
}

void AddRoute(v1::SwitchConfig* config, const std::string& prefix, uint32_t group,
              const std::string& port) {
  auto* item = config->add_items();
  item->set_key(StrCat("route/", prefix));
  auto* route = item->mutable_route();
  route->set_prefix(prefix);
  route->set_nexthop_group(group);
  route->set_port(port);
}

// The TE overrides on switch `sw`: for each whose egress port is up and
// `usable` for its prefix, a policy rule (iif, prefix -> table) and, in the
// egress port's table, a route to the prefix through that port alone. One
// table (200 + the port's position) and one single-member group (500 + the
// position) per egress port. Overrides left out leave their traffic to the
// ECMP routes of the main table.
void AddTeOverrides(v1::SwitchConfig* config, const std::string& sw, const std::vector<Fabric::Port>& ports,
                    const std::vector<const TeOverride*>& te,
                    const std::function<bool(const Fabric::Port&, const std::string&)>& usable) {
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < ports.size(); ++i) position[ports[i].name] = i;
  std::set<std::pair<size_t, std::string>> routes;
  std::set<size_t> groups;
  uint32_t priority = 1000;
  for (const TeOverride* override : te) {
    const TeOverride& o = *override;
    std::string_view dev, ingress, out_dev, out_port;
    SplitPortName(o.ingress, &dev, &ingress);
    SplitPortName(o.egress, &out_dev, &out_port);
    if (dev != sw || out_dev != sw) continue;
    const auto at = position.find(std::string(out_port));
    if (at == position.end() || at->second >= 499 || ports[at->second].drained || !position.count(std::string(ingress)) ||
        !usable(ports[at->second], o.dst_prefix))
      continue;
    const uint32_t table = 200 + static_cast<uint32_t>(at->second);
    const uint32_t group = 500 + static_cast<uint32_t>(at->second);
    if (groups.insert(at->second).second) AddGroup(config, group, {&ports[at->second]});
    if (routes.insert({at->second, o.dst_prefix}).second) {
      auto* item = config->add_items();
      item->set_key(StrCat("route/t", table, "/", o.dst_prefix));
      item->mutable_route()->set_prefix(o.dst_prefix);
      item->mutable_route()->set_nexthop_group(group);
      item->mutable_route()->set_table(table);
    }
    auto* item = config->add_items();
    item->set_key(StrCat("rule/", ingress, "/", o.dst_prefix));
    auto* rule = item->mutable_rule();
    rule->set_priority(priority++);
    rule->set_iif(std::string(ingress));
    rule->set_prefix(o.dst_prefix);
    rule->set_table(table);
  }
}

}  // namespace

std::string LinkAddress(int link_index, bool a_side) {
  const uint32_t base = (100u << 24) | (64u << 16);
  const uint32_t addr = base + static_cast<uint32_t>(link_index) * 2 + (a_side ? 0 : 1);
  return StrCat(addr >> 24, ".", (addr >> 16) & 255, ".", (addr >> 8) & 255, ".", addr & 255);
}

absl::StatusOr<v1::Policy> ValidatePolicy(v1::Policy policy) {
  std::vector<std::string> problems;
  if (policy.default_scheme() == v1::ROUTING_SCHEME_UNSPECIFIED)
    policy.set_default_scheme(v1::ROUTING_SCHEME_ECMP);
  std::set<std::string> zones;
  for (auto& zone : *policy.mutable_zones()) {
    if (zone.zone().empty()) problems.push_back("a zones entry has no zone name");
    if (!zones.insert(zone.zone()).second) problems.push_back(StrCat("zone ", zone.zone(), " listed twice"));
    if (zone.scheme() == v1::ROUTING_SCHEME_UNSPECIFIED) zone.set_scheme(policy.default_scheme());
    if ((zone.scheme() == v1::ROUTING_SCHEME_EECMP || zone.scheme() == v1::ROUTING_SCHEME_TE) &&
        zone.qp_scaling() == 0)
      zone.set_qp_scaling(4);
    if (zone.qp_scaling() > 256) problems.push_back(StrCat("zone ", zone.zone(), ": qp_scaling above 256"));
  }
  if (policy.min_uplink_capacity() == 0) policy.set_min_uplink_capacity(0.5);
  if (!(policy.min_uplink_capacity() > 0 && policy.min_uplink_capacity() <= 1))
    problems.push_back("min_uplink_capacity must be in (0, 1]");
  v1::QosPolicy& qos = *policy.mutable_qos();
  std::set<uint32_t> dscps;
  for (const auto& map : qos.dscp_to_tc()) {
    if (map.dscp() > 63) problems.push_back(StrCat("dscp ", map.dscp(), " is not 0-63"));
    if (map.tc() > 7) problems.push_back(StrCat("dscp ", map.dscp(), ": tc ", map.tc(), " is not 0-7"));
    if (!dscps.insert(map.dscp()).second) problems.push_back(StrCat("dscp ", map.dscp(), " is mapped twice"));
  }
  std::set<uint32_t> pfc(qos.pfc_priorities().begin(), qos.pfc_priorities().end());
  for (uint32_t prio : pfc)
    if (prio > 7) problems.push_back(StrCat("pfc priority ", prio, " is not 0-7"));
  for (uint32_t tc : qos.lossless_tcs())
    if (!pfc.count(tc))
      problems.push_back(StrCat("lossless tc ", tc, " has no PFC: add it to pfc_priorities"));
  std::set<uint32_t> ecn_tcs;
  for (const auto& ecn : qos.ecn()) {
    if (ecn.min_bytes() > ecn.max_bytes())
      problems.push_back(StrCat("ecn tc ", ecn.tc(), ": min_bytes ", ecn.min_bytes(),
                                " is above max_bytes ", ecn.max_bytes()));
    if (!(ecn.probability() >= 0 && ecn.probability() <= 1))
      problems.push_back(StrCat("ecn tc ", ecn.tc(), ": probability must be in [0, 1]"));
    if (!ecn_tcs.insert(ecn.tc()).second) problems.push_back(StrCat("ecn tc ", ecn.tc(), " set twice"));
  }
  if (qos.strict_priority_tc() > 7) problems.push_back("strict_priority_tc is not 0-7");
  if (pfc.count(qos.strict_priority_tc()) && qos.strict_priority_tc() != 0)
    problems.push_back("the strict-priority class for CNPs must not be a PFC priority");
  const auto& wd = qos.pfc_watchdog();
  if (!wd.action().empty() && wd.action() != "drop" && wd.action() != "forward" && wd.action() != "alert")
    problems.push_back(StrCat("pfc_watchdog action '", wd.action(), "' is not drop, forward or alert"));
  for (const auto& buffer : qos.buffer_profiles()) {
    if (buffer.xoff_bytes() + buffer.headroom_bytes() > buffer.pool_bytes() && buffer.pool_bytes() > 0)
      problems.push_back("a buffer profile's xoff plus headroom exceed its pool");
    const int threshold_fields =
        (buffer.xoff_bytes() != 0) + (buffer.pg_xon_bytes() != 0) + (buffer.pg_headroom_bytes() != 0);
    if (threshold_fields != 0 && threshold_fields != 3)
      problems.push_back(
          "a buffer profile's xoff_bytes goes with pg_xon_bytes and pg_headroom_bytes (the PG's reservation "
          "under the threshold): set all three or none");
    if (buffer.xoff_bytes() != 0 && qos.lossless_tcs().empty() && qos.pfc_priorities().empty())
      problems.push_back("a buffer profile's xoff_bytes needs lossless_tcs: no priority group to bind it to");
    if (!buffer.lossless_pgs().empty())
      problems.push_back("a buffer profile's lossless_pgs come from lossless_tcs; leave them out");
  }
  if (!problems.empty()) {
    std::string message = "invalid policy:";
    for (const auto& p : problems) StrAppend(&message, "\n  ", p);
    return absl::InvalidArgumentError(message);
  }
  return policy;
}

std::string ContentHash(const v1::SwitchConfig& config) {
  // "<size>:<item>" per item, in place. Deterministic serialisation keeps
  // the hash stable across runs.
  std::string bytes;
  for (const auto& item : config.items()) {
    const size_t size = item.ByteSizeLong();
    StrAppend(&bytes, size, ":");
    const size_t at = bytes.size();
    bytes.resize(at + size);
    google::protobuf::io::ArrayOutputStream array(bytes.data() + at, static_cast<int>(size));
    google::protobuf::io::CodedOutputStream coded(&array);
    coded.SetSerializationDeterministic(true);
    item.SerializeWithCachedSizes(&coded);
  }
  StrAppend(&bytes, "scheme:", static_cast<int>(config.scheme()), "qp:", config.qp_scaling_hint());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  char buf[3];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", digest[i]);
    hex += buf;
  }
  return hex;
}

std::map<std::string, double> RemainingUplinkShare(const Topology& topology,
                                                   const std::set<std::string>& drained) {
  std::map<std::string, double> share;
  const Fabric fabric = BuildFabric(topology, drained);
  for (const auto& sw : topology.proto().switches()) {
    if (sw.role() != v1::SWITCH_ROLE_RTSW) continue;
    double total = 0, left = 0;
    for (const auto& port : fabric.ports.at(sw.name())) {
      if (port.to_host) continue;
      const double speed = topology.proto().links(port.link).speed_gbps();
      total += speed;
      if (!port.drained) left += speed;
    }
    share[sw.name()] = total > 0 ? left / total : 1.0;
  }
  return share;
}

absl::StatusOr<std::map<std::string, v1::SwitchConfig>> Compile(const Topology& topology,
                                                                const v1::Policy& policy,
                                                                const std::set<std::string>& drained,
                                                                uint64_t generation,
                                                                const std::vector<TeOverride>* te) {
  for (const auto& host : topology.proto().hosts())
    for (const auto& nic : host.nics())
      if (!ValidIpv4(nic.ip()))
        return absl::InvalidArgumentError(
            StrCat("host ", host.name(), " nic ", nic.name(), ": ip '", nic.ip(), "' is not IPv4"));
  const Fabric fabric = BuildFabric(topology, drained);
  std::map<std::string, v1::SwitchConfig> configs;
  // Which RTSW owns each rack prefix, and in which zone.
  std::map<std::string, std::string> prefix_owner;
  for (const auto& [rtsw, prefixes] : fabric.prefixes)
    for (const auto& prefix : prefixes) prefix_owner[prefix] = rtsw;

  // Racks of other zones are routed by /16 where a /16 holds racks of other
  // zones only (for a rack or spine switch) or of one zone only (for an
  // aggregation switch): their next hops are the same for every rack of it,
  // and a /16 route per zone instead of a /24 per rack keeps an RTSW's
  // table at its own zone's size (docs/controller.md, "Addressing").
  //
  // Everything a switch's loop over the prefixes asks is indexed here once:
  // switches and zones by number, each prefix's owner, zone and /16, and
  // which switch still has an undrained link to which.
  std::unordered_map<std::string, int> switch_index, zone_index;
  std::vector<const v1::TopoSwitch*> switch_list;
  for (const auto& s : topology.proto().switches()) {
    switch_index.emplace(s.name(), static_cast<int>(switch_list.size()));
    switch_list.push_back(&s);
    zone_index.emplace(s.zone(), static_cast<int>(zone_index.size()));
  }
  struct PrefixInfo {
    const std::string* prefix;
    int owner;  // switch index
    int zone;   // zone index
    int p16;    // index into p16_names
  };
  std::vector<PrefixInfo> infos;
  std::vector<std::string> p16_names;
  std::map<std::string, int> p16_index;
  std::vector<std::vector<char>> p16_has_zone;  // [p16][zone]
  std::vector<int> p16_zone_count;
  for (const auto& [prefix, owner] : prefix_owner) {
    const int o = switch_index.at(owner);
    const int z = zone_index.at(switch_list[o]->zone());
    auto [it, added] = p16_index.emplace(Slash16(prefix), static_cast<int>(p16_names.size()));
    if (added) {
      p16_names.push_back(it->first);
      p16_has_zone.emplace_back(zone_index.size(), 0);
      p16_zone_count.push_back(0);
    }
    if (!p16_has_zone[it->second][z]) {
      p16_has_zone[it->second][z] = 1;
      ++p16_zone_count[it->second];
    }
    infos.push_back({&prefix, o, z, it->second});
  }

  // What each switch still reaches over undrained links (its neighbour
  // switches), and which reach an ATSW: asked once per (uplink, prefix).
  std::map<std::string, std::set<std::string>> reach;
  std::set<std::string> reaches_atsw;
  // The TE overrides of each switch (by the ingress port's device).
  std::unordered_map<std::string, std::vector<const TeOverride*>> te_of;
  if (te != nullptr)
    for (const TeOverride& o : *te) te_of[EntityDevice(o.ingress)].push_back(&o);
  const std::vector<const TeOverride*> no_overrides;
  auto overrides_of = [&](const std::string& name) -> const std::vector<const TeOverride*>& {
    auto it = te_of.find(name);
    return it == te_of.end() ? no_overrides : it->second;
  };
  const size_t n_switches = switch_list.size();
  std::vector<char> links_to(n_switches * n_switches, 0);  // [from * n + to]: an undrained link
  std::vector<char> reaches_atsw_bit(n_switches, 0);
  for (const auto& [name, list] : fabric.ports)
    for (const auto& port : list) {
      if (port.drained || port.to_host) continue;
      reach[name].insert(port.peer_dev);
      const v1::TopoSwitch* peer = topology.FindSwitch(port.peer_dev);
      if (peer != nullptr && peer->role() == v1::SWITCH_ROLE_ATSW) {
        reaches_atsw.insert(name);
        reaches_atsw_bit[switch_index.at(name)] = 1;
      }
      if (auto to = switch_index.find(port.peer_dev); to != switch_index.end())
        links_to[static_cast<size_t>(switch_index.at(name)) * n_switches + static_cast<size_t>(to->second)] = 1;
    }
  for (const auto& sw : topology.proto().switches()) {
    v1::SwitchConfig config;
    config.set_switch_name(sw.name());
    config.set_generation(generation);
    const v1::RoutingScheme scheme =
        SchemeOfZone(policy, sw.zone().empty() ? std::string() : sw.zone());
    config.set_scheme(sw.zone().empty() ? policy.default_scheme() : scheme);
    for (const auto& z : policy.zones())
      if (z.zone() == sw.zone() && (z.scheme() == v1::ROUTING_SCHEME_EECMP || z.scheme() == v1::ROUTING_SCHEME_TE))
        config.set_qp_scaling_hint(z.qp_scaling());
    // TE's fallback is E-ECMP: the QP entropy in the hash, and QP scaling.
    const bool entropy = config.scheme() == v1::ROUTING_SCHEME_EECMP || config.scheme() == v1::ROUTING_SCHEME_TE;
    if (entropy && config.qp_scaling_hint() == 0) config.set_qp_scaling_hint(4);
    const auto it = fabric.ports.find(sw.name());
    if (it == fabric.ports.end()) {
      configs[sw.name()] = config;
      continue;
    }
    const std::vector<Fabric::Port>& ports = it->second;
    for (const auto& port : ports)
      if (port.drained) config.add_drained_ports(port.name);

    // Usable links to each neighbour switch.
    std::map<std::string, std::vector<const Fabric::Port*>> to_neighbor;
    for (const auto& port : ports)
      if (!port.to_host && !port.drained) to_neighbor[port.peer_dev].push_back(&port);
    auto role_of = [&](const std::string& dev) {
      const v1::TopoSwitch* s = topology.FindSwitch(dev);
      return s ? s->role() : v1::SWITCH_ROLE_UNSPECIFIED;
    };
    auto zone_of = [&](const std::string& dev) {
      const v1::TopoSwitch* s = topology.FindSwitch(dev);
      return s ? s->zone() : std::string();
    };
    // Interface addresses: the /31 of each fabric link; on a rack switch's
    // host ports, the rack gateway (.254 of the rack's /24), which the hosts
    // route through.
    for (const auto& port : ports) {
      if (port.drained) continue;
      auto* item = config.add_items();
      item->set_key(StrCat("addr/", port.name));
      auto* address = item->mutable_address();
      address->set_port(port.name);
      if (port.to_host) {
        const std::string prefix = RackPrefix(port.host_ip);
        address->set_address(StrCat(prefix.substr(0, prefix.rfind('.')), ".254/32"));
      } else {
        address->set_address(StrCat(LinkAddress(port.link, port.a_side), "/31"));
      }
    }
    uint32_t next_group = 1;
    if (sw.role() == v1::SWITCH_ROLE_RTSW) {
      for (const auto& port : ports)
        if (port.to_host && !port.drained) AddRoute(&config, StrCat(port.host_ip, "/32"), 0, port.name);
      std::vector<const Fabric::Port*> uplinks;
      for (const auto& [peer, links] : to_neighbor)
        if (role_of(peer) == v1::SWITCH_ROLE_CTSW) uplinks.insert(uplinks.end(), links.begin(), links.end());
      // An uplink is usable for a destination rack only if its CTSW still
      // has an undrained link down to that rack (or, for another zone, up
      // to an ATSW): otherwise draining a CTSW-RTSW link would blackhole
      // the traffic other racks keep sending through that CTSW.
      auto ctsw_reaches = [&](const std::string& ctsw, const std::string& owner) {
        const auto r = reach.find(ctsw);
        if (r == reach.end()) return false;
        if (r->second.count(owner)) return true;
        return zone_of(owner) != sw.zone() && reaches_atsw.count(ctsw) > 0;
      };
      std::map<std::vector<const Fabric::Port*>, uint32_t> group_ids;
      size_t slice = 0;
      const int self = switch_index.at(sw.name());
      const int my_zone = zone_index.at(sw.zone());
      std::vector<int> up_peer;
      for (const auto* up : uplinks) up_peer.push_back(switch_index.at(up->peer_dev));
      std::vector<char> aggregated(p16_names.size(), 0);
      for (const PrefixInfo& info : infos) {
        if (info.owner == self) continue;
        const bool remote = info.zone != my_zone;
        // Every rack of another zone has the same usable uplinks (those to
        // a CTSW that reaches an ATSW). Path pinning slices by rack, so it
        // keeps its /24s.
        const std::string* route_prefix = info.prefix;
        if (remote && config.scheme() != v1::ROUTING_SCHEME_PATH_PINNING && !p16_has_zone[info.p16][my_zone]) {
          if (aggregated[info.p16]) continue;
          aggregated[info.p16] = 1;
          route_prefix = &p16_names[info.p16];
        }
        std::vector<const Fabric::Port*> usable;
        for (size_t u = 0; u < uplinks.size(); ++u) {
          const size_t ctsw = static_cast<size_t>(up_peer[u]);
          if (links_to[ctsw * n_switches + static_cast<size_t>(info.owner)] || (remote && reaches_atsw_bit[ctsw]))
            usable.push_back(uplinks[u]);
        }
        if (usable.empty()) continue;  // unreachable: no route rather than a blackhole
        if (config.scheme() == v1::ROUTING_SCHEME_PATH_PINNING) {
          // Each remote rack prefix rides one uplink: destination slices.
          usable = {usable[slice++ % usable.size()]};
        }
        auto [it, inserted] = group_ids.emplace(usable, 0);
        if (inserted) {
          it->second = config.scheme() == v1::ROUTING_SCHEME_PATH_PINNING ? 100 + next_group++ : next_group++;
          AddGroup(&config, it->second, usable);
        }
        AddRoute(&config, *route_prefix, it->second, "");
      }
      if (config.scheme() == v1::ROUTING_SCHEME_TE && te != nullptr)
        AddTeOverrides(&config, sw.name(), ports, overrides_of(sw.name()), [&](const Fabric::Port& out, const std::string& prefix) {
          const auto owner = prefix_owner.find(prefix);
          return !out.to_host && role_of(out.peer_dev) == v1::SWITCH_ROLE_CTSW && owner != prefix_owner.end() &&
                 ctsw_reaches(out.peer_dev, owner->second);
        });
    } else {
      // CTSW: each rack of its zone through the parallel links to its RTSW;
      // everything else up to the ATSWs. ATSW: each zone through its CTSWs.
      std::map<std::string, std::vector<const Fabric::Port*>> toward;  // RTSW or zone -> links
      std::vector<const Fabric::Port*> up;
      for (const auto& [peer, links] : to_neighbor) {
        const v1::SwitchRole role = role_of(peer);
        if (sw.role() == v1::SWITCH_ROLE_CTSW && role == v1::SWITCH_ROLE_RTSW) toward[peer] = links;
        else if (sw.role() == v1::SWITCH_ROLE_CTSW && role == v1::SWITCH_ROLE_ATSW)
          up.insert(up.end(), links.begin(), links.end());
        else if (sw.role() == v1::SWITCH_ROLE_ATSW && role == v1::SWITCH_ROLE_CTSW) {
          auto& zone_links = toward["zone:" + zone_of(peer)];
          zone_links.insert(zone_links.end(), links.begin(), links.end());
        }
      }
      std::map<std::string, uint32_t> group_of;
      for (const auto& [target, links] : toward) {
        group_of[target] = next_group;
        AddGroup(&config, next_group++, links);
      }
      uint32_t up_group = 0;
      if (!up.empty()) {
        up_group = next_group++;
        AddGroup(&config, up_group, up);
      }
      std::vector<char> aggregated(p16_names.size(), 0);
      const int my_zone = zone_index.at(sw.zone());
      // The group toward each owner (CTSW) or each zone (ATSW), by index.
      std::vector<uint32_t> group_by_owner(n_switches, 0), group_by_zone(zone_index.size(), 0);
      for (const auto& [target, id] : group_of) {
        if (target.rfind("zone:", 0) == 0) {
          if (auto z = zone_index.find(target.substr(5)); z != zone_index.end()) group_by_zone[z->second] = id;
        } else if (auto o = switch_index.find(target); o != switch_index.end()) {
          group_by_owner[o->second] = id;
        }
      }
      auto route = [&](const PrefixInfo& info, uint32_t group, bool aggregate) {
        if (!aggregate) return AddRoute(&config, *info.prefix, group, "");
        if (aggregated[info.p16]) return;
        aggregated[info.p16] = 1;
        AddRoute(&config, p16_names[info.p16], group, "");
      };
      for (const PrefixInfo& info : infos) {
        const uint32_t g = sw.role() == v1::SWITCH_ROLE_CTSW ? group_by_owner[info.owner] : group_by_zone[info.zone];
        if (g != 0) {
          // An ATSW reaches a zone through the same CTSWs for all its racks.
          route(info, g, sw.role() == v1::SWITCH_ROLE_ATSW && p16_zone_count[info.p16] == 1 &&
                             !p16_has_zone[info.p16][my_zone]);
        } else if (up_group != 0 && info.zone != my_zone) {
          route(info, up_group, !p16_has_zone[info.p16][my_zone]);
        }
      }
      if (sw.role() == v1::SWITCH_ROLE_CTSW && config.scheme() == v1::ROUTING_SCHEME_TE && te != nullptr)
        AddTeOverrides(&config, sw.name(), ports, overrides_of(sw.name()), [&](const Fabric::Port& out, const std::string& prefix) {
          const auto owner = prefix_owner.find(prefix);
          return owner != prefix_owner.end() && out.peer_dev == owner->second;
        });
    }
    auto* hash = config.add_items();
    hash->set_key("hash");
    for (const char* field : {"src_ip", "dst_ip", "ip_proto", "src_port", "dst_port"})
      hash->mutable_hash()->add_fields(field);
    // E-ECMP: the RoCE destination QP adds entropy between the QPs of one
    // connection, which share their addresses and ports.
    if (entropy) hash->mutable_hash()->add_fields("roce_dst_qp");
    // QoS item by item, so that a switch reports each as applied or
    // unsupported on its own (a Linux port without DCB takes ECN but not
    // PFC). Only what the policy sets.
    const v1::QosPolicy& q = policy.qos();
    auto add_qos = [&](const char* part) {
      auto* item = config.add_items();
      item->set_key(StrCat("qos/", part));
      return item->mutable_qos();
    };
    if (!q.dscp_to_tc().empty()) *add_qos("dscp")->mutable_qos()->mutable_dscp_to_tc() = q.dscp_to_tc();
    if (!q.pfc_priorities().empty() || !q.lossless_tcs().empty()) {
      auto* pfc = add_qos("pfc")->mutable_qos();
      *pfc->mutable_pfc_priorities() = q.pfc_priorities();
      *pfc->mutable_lossless_tcs() = q.lossless_tcs();
    }
    if (q.strict_priority_tc() != 0) add_qos("ets")->mutable_qos()->set_strict_priority_tc(q.strict_priority_tc());
    if (!q.ecn().empty()) *add_qos("ecn")->mutable_qos()->mutable_ecn() = q.ecn();
    if (q.pfc_watchdog().detect_ms() != 0 || !q.pfc_watchdog().action().empty())
      *add_qos("pfc_watchdog")->mutable_qos()->mutable_pfc_watchdog() = q.pfc_watchdog();
    for (const auto& buffer : q.buffer_profiles()) {
      if (buffer.role() != sw.role()) continue;
      auto* item = add_qos("buffer")->mutable_buffer();
      *item = buffer;
      if (buffer.xoff_bytes() != 0)
        *item->mutable_lossless_pgs() = q.lossless_tcs().empty() ? q.pfc_priorities() : q.lossless_tcs();
    }
    config.set_content_hash(ContentHash(config));
    configs[sw.name()] = std::move(config);
  }
  return configs;
}

bool UsesTe(const v1::Policy& policy) {
  if (policy.default_scheme() == v1::ROUTING_SCHEME_TE) return true;
  for (const auto& zone : policy.zones())
    if (zone.scheme() == v1::ROUTING_SCHEME_TE) return true;
  return false;
}

}  // namespace rocefab::controller
