#include "common/topology.h"

#include "common/nearest.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>

#include "common/config_loader.h"
#include "common/fs_root.h"
#include "common/strings.h"

namespace rocefab {
namespace {

constexpr size_t kMaxReportedProblems = 25;
constexpr double kEthernetSpeeds[] = {1, 10, 25, 40, 50, 100, 200, 400, 800, 1600};

bool IsEthernetSpeed(double gbps) {
  for (double speed : kEthernetSpeeds)
    if (gbps == speed) return true;
  return false;
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (unsigned char c : name)
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

// Which tiers may be cabled together.
bool TiersMayConnect(v1::SwitchRole a, v1::SwitchRole b) {
  auto pair = [&](v1::SwitchRole x, v1::SwitchRole y) {
    return (a == x && b == y) || (a == y && b == x);
  };
  return pair(v1::SWITCH_ROLE_RTSW, v1::SWITCH_ROLE_CTSW) ||
         pair(v1::SWITCH_ROLE_CTSW, v1::SWITCH_ROLE_ATSW);
}

std::string_view RoleName(v1::SwitchRole role) {
  switch (role) {
    case v1::SWITCH_ROLE_RTSW: return "rtsw";
    case v1::SWITCH_ROLE_CTSW: return "ctsw";
    case v1::SWITCH_ROLE_ATSW: return "atsw";
    default: return "unspecified";
  }
}

}  // namespace

std::string RackPrefix(const std::string& ip) {
  const size_t last_dot = ip.rfind('.');
  return last_dot == std::string::npos ? "" : StrCat(ip.substr(0, last_dot), ".0/24");
}

bool SplitPortName(std::string_view full, std::string_view* device, std::string_view* port) {
  const size_t slash = full.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 >= full.size() ||
      full.find('/', slash + 1) != std::string_view::npos)
    return false;
  *device = full.substr(0, slash);
  *port = full.substr(slash + 1);
  return true;
}

absl::StatusOr<std::shared_ptr<const Topology>> Topology::Build(v1::Topology proto) {
  std::shared_ptr<Topology> topo(new Topology());
  topo->proto_ = std::move(proto);
  const v1::Topology& p = topo->proto_;
  std::vector<std::string> problems;
  auto problem = [&](std::string text) {
    if (problems.size() < kMaxReportedProblems) problems.push_back(std::move(text));
    else if (problems.size() == kMaxReportedProblems) problems.push_back("... more problems not shown");
  };

  for (int i = 0; i < p.switches_size(); ++i) {
    const v1::TopoSwitch& sw = p.switches(i);
    if (!ValidName(sw.name())) problem(StrCat("switches[", i, "]: bad name '", sw.name(), "'"));
    if (sw.role() == v1::SWITCH_ROLE_UNSPECIFIED)
      problem(StrCat("switch ", sw.name(), ": role must be rtsw, ctsw or atsw"));
    if (sw.role() != v1::SWITCH_ROLE_ATSW && sw.zone().empty())
      problem(StrCat("switch ", sw.name(), ": ", RoleName(sw.role()), " needs a zone"));
    if (!topo->switch_index_.emplace(sw.name(), i).second)
      problem(StrCat("switch ", sw.name(), ": duplicate name"));
  }
  for (int i = 0; i < p.hosts_size(); ++i) {
    const v1::TopoHost& host = p.hosts(i);
    if (!ValidName(host.name())) problem(StrCat("hosts[", i, "]: bad name '", host.name(), "'"));
    if (!topo->host_index_.emplace(host.name(), i).second)
      problem(StrCat("host ", host.name(), ": duplicate name"));
    if (topo->switch_index_.count(host.name()))
      problem(StrCat("host ", host.name(), ": a switch has the same name"));
    if (host.nics_size() == 0) problem(StrCat("host ", host.name(), ": has no nics"));
    std::set<std::string> nic_names;
    for (const v1::TopoNic& nic : host.nics()) {
      if (!ValidName(nic.name())) problem(StrCat("host ", host.name(), ": bad nic name '", nic.name(), "'"));
      if (!nic_names.insert(nic.name()).second)
        problem(StrCat("host ", host.name(), ": nic ", nic.name(), " twice"));
    }
  }
  for (int i = 0; i < p.links_size(); ++i) {
    const v1::TopoLink& link = p.links(i);
    const std::string where = StrCat("links[", i, "] ", link.a(), " - ", link.b());
    if (!(link.speed_gbps() > 0) || !IsEthernetSpeed(link.speed_gbps()))
      problem(StrCat(where, ": speed_gbps ", link.speed_gbps(),
                     " is not an Ethernet speed (1, 10, 25, 40, 50, 100, 200, 400, 800, 1600)"));
    std::string_view dev[2], port[2];
    const std::string* ends[2] = {&link.a(), &link.b()};
    bool ok = true;
    const v1::TopoSwitch* sw[2] = {nullptr, nullptr};
    for (int e = 0; e < 2; ++e) {
      if (!SplitPortName(*ends[e], &dev[e], &port[e])) {
        problem(StrCat(where, ": '", *ends[e], "' is not <device>/<port>"));
        ok = false;
        continue;
      }
      if (auto it = topo->switch_index_.find(std::string(dev[e])); it != topo->switch_index_.end()) {
        sw[e] = &p.switches(it->second);
      } else if (auto h = topo->host_index_.find(std::string(dev[e])); h != topo->host_index_.end()) {
        bool has_nic = false;
        for (const auto& nic : p.hosts(h->second).nics()) has_nic |= nic.name() == port[e];
        if (!has_nic) {
          problem(StrCat(where, ": host ", dev[e], " has no nic ", port[e]));
          ok = false;
        }
      } else {
        problem(StrCat(where, ": no switch or host named ", dev[e]));
        ok = false;
      }
      if (!topo->port_link_.emplace(*ends[e], i).second) {
        problem(StrCat(where, ": port ", *ends[e], " is already cabled"));
        ok = false;
      }
    }
    if (!ok) continue;
    if (dev[0] == dev[1]) {
      problem(StrCat(where, ": links a device to itself"));
      continue;
    }
    if (sw[0] == nullptr && sw[1] == nullptr) {
      problem(StrCat(where, ": links two hosts"));
    } else if (sw[0] == nullptr || sw[1] == nullptr) {
      const v1::TopoSwitch* s = sw[0] ? sw[0] : sw[1];
      if (s->role() != v1::SWITCH_ROLE_RTSW)
        problem(StrCat(where, ": a nic must connect to an rtsw, not a ", RoleName(s->role())));
    } else if (!TiersMayConnect(sw[0]->role(), sw[1]->role())) {
      problem(StrCat(where, ": ", RoleName(sw[0]->role()), " to ", RoleName(sw[1]->role()),
                     " is not a fabric link (rtsw-ctsw or ctsw-atsw)"));
    }
    for (int e = 0; e < 2; ++e)
      if (sw[e]) topo->switch_ports_[std::string(dev[e])].push_back(std::string(port[e]));
  }
  for (const v1::TopoHost& host : p.hosts())
    for (const v1::TopoNic& nic : host.nics())
      if (!topo->port_link_.count(StrCat(host.name(), "/", nic.name())))
        problem(StrCat("host ", host.name(), ": nic ", nic.name(), " has no link"));

  if (!problems.empty()) {
    std::string message = StrCat("invalid topology (", problems.size(), " problem",
                                 problems.size() == 1 ? "" : "s", "):");
    for (const std::string& line : problems) StrAppend(&message, "\n  ", line);
    return absl::InvalidArgumentError(message);
  }
  return std::shared_ptr<const Topology>(std::move(topo));
}

absl::StatusOr<std::shared_ptr<const Topology>> Topology::FromYaml(std::string_view text,
                                                                    std::string_view source_name) {
  v1::Topology proto;
  if (auto status = LoadYamlConfig(text, source_name, &proto); !status.ok()) return status;
  auto topo = Build(std::move(proto));
  if (!topo.ok())
    return absl::InvalidArgumentError(StrCat(source_name, ": ", topo.status().message()));
  return topo;
}

absl::StatusOr<std::shared_ptr<const Topology>> Topology::Load(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text.ok())
    return absl::NotFoundError(StrCat("topology file ", path, ": ", text.status().message()));
  return FromYaml(*text, path);
}

const v1::TopoSwitch* Topology::FindSwitch(std::string_view name) const {
  auto it = switch_index_.find(std::string(name));
  return it == switch_index_.end() ? nullptr : &proto_.switches(it->second);
}

const v1::TopoHost* Topology::FindHost(std::string_view name) const {
  auto it = host_index_.find(std::string(name));
  return it == host_index_.end() ? nullptr : &proto_.hosts(it->second);
}

int Topology::LinkOfPort(std::string_view port) const {
  auto it = port_link_.find(std::string(port));
  return it == port_link_.end() ? -1 : it->second;
}

const std::string& Topology::PeerOf(int link, std::string_view port) const {
  const v1::TopoLink& l = proto_.links(link);
  return l.a() == port ? l.b() : l.a();
}

const std::vector<std::string>& Topology::PortsOf(std::string_view switch_name) const {
  static const std::vector<std::string> kNone;
  auto it = switch_ports_.find(std::string(switch_name));
  return it == switch_ports_.end() ? kNone : it->second;
}

void WriteTopologyYaml(const v1::Topology& topology, std::ostream& out) {
  YAML::Emitter yaml(out);
  yaml << YAML::BeginMap;
  yaml << YAML::Key << "switches" << YAML::Value << YAML::BeginSeq;
  for (const auto& sw : topology.switches()) {
    yaml << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << sw.name()
         << YAML::Key << "role" << YAML::Value << std::string(RoleName(sw.role()));
    if (!sw.zone().empty()) yaml << YAML::Key << "zone" << YAML::Value << sw.zone();
    yaml << YAML::EndMap;
  }
  yaml << YAML::EndSeq;
  yaml << YAML::Key << "hosts" << YAML::Value << YAML::BeginSeq;
  for (const auto& host : topology.hosts()) {
    yaml << YAML::BeginMap << YAML::Key << "name" << YAML::Value << host.name() << YAML::Key
         << "zone" << YAML::Value << host.zone() << YAML::Key << "rack" << YAML::Value
         << host.rack() << YAML::Key << "nics" << YAML::Value << YAML::BeginSeq;
    for (const auto& nic : host.nics())
      yaml << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << nic.name()
           << YAML::Key << "netdev" << YAML::Value << nic.netdev() << YAML::Key << "gpu"
           << YAML::Value << nic.gpu() << YAML::Key << "ip" << YAML::Value << nic.ip()
           << YAML::EndMap;
    yaml << YAML::EndSeq << YAML::EndMap;
  }
  yaml << YAML::EndSeq;
  yaml << YAML::Key << "links" << YAML::Value << YAML::BeginSeq;
  for (const auto& link : topology.links())
    yaml << YAML::Flow << YAML::BeginMap << YAML::Key << "a" << YAML::Value << link.a()
         << YAML::Key << "b" << YAML::Value << link.b() << YAML::Key << "speed_gbps"
         << YAML::Value << static_cast<int64_t>(link.speed_gbps()) << YAML::EndMap;
  yaml << YAML::EndSeq << YAML::EndMap;
  out << "\n";
}

std::string EntityDevice(const std::string& entity) {
  const size_t slash = entity.find('/');
  return slash == std::string::npos ? entity : entity.substr(0, slash);
}

absl::Status Topology::CheckEntity(std::string_view entity) const {
  const size_t slash = entity.find('/');
  const std::string device(entity.substr(0, slash));
  const v1::TopoHost* host = FindHost(device);
  const v1::TopoSwitch* sw = host ? nullptr : FindSwitch(device);
  if (host == nullptr && sw == nullptr) {
    std::vector<std::string> names;
    for (const auto& h : proto_.hosts()) names.push_back(h.name());
    for (const auto& x : proto_.switches()) names.push_back(x.name());
    return absl::InvalidArgumentError(
        StrCat("'", device, "' is no host or switch of the topology", NearestHint(device, names)));
  }
  if (slash == std::string_view::npos) return absl::OkStatus();
  const std::string_view part = entity.substr(slash + 1);
  std::vector<std::string> names;
  if (host != nullptr) {
    for (const auto& nic : host->nics()) {
      if (nic.name() == part || StrCat("gpu", nic.gpu()) == part) return absl::OkStatus();
      names.push_back(StrCat(device, "/", nic.name()));
    }
  } else {
    if (part.ends_with("_pool")) return absl::OkStatus();
    for (const std::string& port : PortsOf(device)) {
      if (port == part) return absl::OkStatus();
      names.push_back(StrCat(device, "/", port));
    }
  }
  return absl::InvalidArgumentError(StrCat("'", entity, "': ", device, " has no ", host ? "NIC or GPU" : "port", " '",
                                           part, "' in the topology", NearestHint(entity, names)));
}

absl::StatusOr<bool> IsSwitchToSwitchLink(const Topology& topology, const std::string& port) {
  const int link = topology.LinkOfPort(port);
  if (link < 0) return absl::NotFoundError(StrCat(port, " is not a port of the topology"));
  return topology.FindSwitch(EntityDevice(port)) != nullptr &&
         topology.FindSwitch(EntityDevice(topology.PeerOf(link, port))) != nullptr;
}

}  // namespace rocefab
