#include "lab/study.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "common/strings.h"
#include "controller/compiler.h"
#include "controller/te.h"
#include "lab/fabric_model.h"

namespace rocefab::lab {
namespace {

struct Scheme {
  const char* name;
  v1::RoutingScheme scheme;
  uint32_t qps;
};
constexpr Scheme kSchemes[] = {
    {"ecmp", v1::ROUTING_SCHEME_ECMP, 1},   {"path_pinning", v1::ROUTING_SCHEME_PATH_PINNING, 1},
    {"eecmp", v1::ROUTING_SCHEME_EECMP, 1}, {"eecmp", v1::ROUTING_SCHEME_EECMP, 4},
    {"eecmp", v1::ROUTING_SCHEME_EECMP, 16}, {"te", v1::ROUTING_SCHEME_TE, 4},
};

// The job's hosts: `n` consecutive hosts of the first zone from a seeded
// rack (packed), or `n` seeded picks over the whole zone (fragmented).
std::vector<std::string> Place(const Topology& topo, uint32_t n, bool packed, std::mt19937& rng) {
  std::vector<const v1::TopoHost*> zone;
  for (const auto& h : topo.proto().hosts())
    if (h.zone() == topo.proto().hosts(0).zone()) zone.push_back(&h);
  std::vector<std::string> out;
  if (n > zone.size()) n = static_cast<uint32_t>(zone.size());
  if (packed) {
    // Start at the first host of a rack, so that the job fills whole racks.
    std::vector<size_t> rack_starts;
    for (size_t i = 0; i < zone.size(); ++i)
      if ((i == 0 || zone[i]->rack() != zone[i - 1]->rack()) && i + n <= zone.size()) rack_starts.push_back(i);
    const size_t start = rack_starts.empty() ? 0 : rack_starts[rng() % rack_starts.size()];
    for (size_t i = start; i < start + n; ++i) out.push_back(zone[i]->name());
    return out;
  }
  std::shuffle(zone.begin(), zone.end(), rng);
  for (uint32_t i = 0; i < n; ++i) out.push_back(zone[i]->name());
  return out;
}

// `k` seeded rack uplinks (RTSW port to a CTSW) of the racks `hosts` sit in.
std::set<std::string> FailedUplinks(const Topology& topo, const std::vector<std::string>& hosts, uint32_t k,
                                    std::mt19937& rng) {
  std::set<std::string> rtsws;
  for (const auto& host : hosts) {
    const v1::TopoHost* h = topo.FindHost(host);
    if (h == nullptr || h->nics().empty()) continue;
    const std::string nic = StrCat(host, "/", h->nics(0).name());
    rtsws.insert(EntityDevice(topo.PeerOf(topo.LinkOfPort(nic), nic)));
  }
  std::vector<std::string> uplinks;
  for (const auto& rtsw : rtsws)
    for (const auto& port : topo.PortsOf(rtsw)) {
      const std::string full = StrCat(rtsw, "/", port);
      const v1::TopoSwitch* peer = topo.FindSwitch(EntityDevice(topo.PeerOf(topo.LinkOfPort(full), full)));
      if (peer != nullptr && peer->role() == v1::SWITCH_ROLE_CTSW) uplinks.push_back(full);
    }
  std::shuffle(uplinks.begin(), uplinks.end(), rng);
  if (uplinks.size() > k) uplinks.resize(k);
  return {uplinks.begin(), uplinks.end()};
}

v1::Policy PolicyFor(const Topology& topo, const Scheme& s) {
  v1::Policy policy;
  policy.set_default_scheme(s.scheme);
  std::set<std::string> zones;
  for (const auto& sw : topo.proto().switches())
    if (!sw.zone().empty()) zones.insert(sw.zone());
  for (const auto& zone : zones) {
    auto* z = policy.add_zones();
    z->set_zone(zone);
    z->set_scheme(s.scheme);
    if (s.scheme == v1::ROUTING_SCHEME_EECMP || s.scheme == v1::ROUTING_SCHEME_TE) z->set_qp_scaling(s.qps);
  }
  return *controller::ValidatePolicy(policy);
}

// The job's footprint above the racks: the uplinks of the RTSWs its hosts
// sit under and the CTSW links down to them, both used and idle (an idle
// uplink beside a full one is what hashing costs), minus failed ones.
std::vector<int> FootprintChannels(const FabricModel& model, const std::vector<std::string>& hosts,
                                   const std::set<std::string>& failed) {
  const Topology& topo = model.topology();
  std::set<std::string> rtsws;
  for (const auto& host : hosts) {
    const v1::TopoHost* h = topo.FindHost(host);
    if (h == nullptr || h->nics().empty()) continue;
    const std::string nic = StrCat(host, "/", h->nics(0).name());
    rtsws.insert(EntityDevice(topo.PeerOf(topo.LinkOfPort(nic), nic)));
  }
  std::vector<int> out;
  for (const auto& port : model.ports()) {
    if (port.sw < 0 || port.link < 0) continue;
    const std::string full = StrCat(port.device, "/", port.name);
    const std::string& peer_port = topo.PeerOf(port.link, full);
    if (failed.count(full) || failed.count(peer_port)) continue;
    const v1::TopoSwitch* self = topo.FindSwitch(port.device);
    const v1::TopoSwitch* peer = topo.FindSwitch(EntityDevice(peer_port));
    if (self == nullptr || peer == nullptr) continue;
    const bool up = self->role() == v1::SWITCH_ROLE_RTSW && peer->role() == v1::SWITCH_ROLE_CTSW &&
                    rtsws.count(port.device);
    const bool down = self->role() == v1::SWITCH_ROLE_CTSW && peer->role() == v1::SWITCH_ROLE_RTSW &&
                      rtsws.count(peer->name());
    if (up || down) out.push_back(port.out_channel);
  }
  return out;
}

}  // namespace

std::vector<controller::TeDemand> OfferedDemands(const FabricModel& model) {
  const Topology& topo = model.topology();
  std::map<std::pair<std::string, std::string>, double> matrix;
  for (const auto& [pair, bytes] : model.OfferedTraffic()) {
    const auto& [src, dst] = pair;
    const std::string ingress = topo.PeerOf(topo.LinkOfPort(src), src);
    std::string_view host, nic;
    SplitPortName(dst, &host, &nic);
    for (const auto& x : topo.FindHost(host)->nics())
      if (x.name() == nic) matrix[{ingress, RackPrefix(x.ip())}] += bytes;
  }
  std::vector<controller::TeDemand> out;
  for (const auto& [key, bytes] : matrix) out.push_back({key.first, key.second, bytes});
  return out;
}

double EcmpMaxToMean(uint32_t flows, uint32_t links, uint32_t trials, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> pick(0, links - 1);
  double sum = 0;
  for (uint32_t t = 0; t < trials; ++t) {
    std::vector<uint32_t> load(links, 0);
    for (uint32_t f = 0; f < flows; ++f) ++load[pick(rng)];
    sum += *std::max_element(load.begin(), load.end()) / (static_cast<double>(flows) / links);
  }
  return sum / trials;
}

namespace {

// Every scheme for one case: `hosts` running `collective`, `failed` uplinks out.
absl::StatusOr<std::vector<StudyRow>> RunCase(const std::shared_ptr<const Topology>& topo,
                                              const std::vector<std::string>& hosts, v1::Collective collective,
                                              const std::set<std::string>& failed, double seconds) {
  std::vector<StudyRow> rows;
  std::vector<controller::TeDemand> demands;  // from the E-ECMP run, for TE
  for (const Scheme& s : kSchemes) {
    v1::Scenario scenario;
    auto* job = scenario.add_jobs();
    job->set_id("study");
    job->set_collective(collective);
    job->set_qps_per_connection(s.qps);
    for (const auto& h : hosts) job->add_hosts(h);
    auto model = FabricModel::Create(topo, scenario);
    if (!model.ok()) return model.status();
    std::vector<controller::TeOverride> overrides;
    if (s.scheme == v1::ROUTING_SCHEME_TE) {
      auto te = controller::AllocateTe(*topo, demands, failed);
      if (!te.ok()) return te.status();
      overrides = std::move(te->overrides);
    }
    auto configs = controller::Compile(*topo, PolicyFor(*topo, s), failed, 1,
                                       s.scheme == v1::ROUTING_SCHEME_TE ? &overrides : nullptr);
    if (!configs.ok()) return configs.status();
    for (const auto& [name, config] : *configs) (*model)->SetAppliedConfig(config);
    for (double t = 0; t < seconds; t += 0.5) (*model)->Step(0.5, nullptr);
    if (s.scheme == v1::ROUTING_SCHEME_EECMP && s.qps == 4) {
      demands = OfferedDemands(**model);
    }
    StudyRow row;
    row.collective = collective == v1::COLLECTIVE_ALL_TO_ALL    ? "all_to_all"
                     : collective == v1::COLLECTIVE_ALL_GATHER   ? "all_gather"
                     : collective == v1::COLLECTIVE_REDUCE_SCATTER ? "reduce_scatter"
                                                                 : "all_reduce";
    row.failures = static_cast<uint32_t>(failed.size());
    row.scheme = s.name;
    row.qps = s.qps;
    row.hosts = static_cast<uint32_t>(hosts.size());
    double sum = 0, used_sum = 0;
    int used = 0;
    const std::vector<int> footprint = FootprintChannels(**model, hosts, failed);
    for (int ch : footprint) {
      const double u = (*model)->ChannelUtilization(ch);
      row.max_utilization = std::max(row.max_utilization, u);
      sum += u;
      if (u > 0) {
        used_sum += u;
        ++used;
      }
    }
    row.mean_utilization = footprint.empty() ? 0 : sum / static_cast<double>(footprint.size());
    row.max_to_mean = used > 0 ? row.max_utilization / (used_sum / used) : 0;
    row.busbw_gbs = (*model)->jobs()[0].busbw_gbs;
    row.ideal_busbw_gbs = (*model)->jobs()[0].ideal_busbw_gbs;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

absl::StatusOr<std::vector<StudyRow>> RunStudy(const StudyOptions& options) {
  auto topo = BuildGenerated(options.topology);
  if (!topo.ok()) return topo.status();
  std::vector<StudyRow> rows;
  for (const auto collective : {v1::COLLECTIVE_ALL_REDUCE, v1::COLLECTIVE_ALL_TO_ALL}) {
    const uint32_t n = collective == v1::COLLECTIVE_ALL_TO_ALL ? options.alltoall_hosts : options.allreduce_hosts;
    for (const bool packed : {true, false}) {
      std::mt19937 rng(options.seed * 7919 + (packed ? 1 : 2) + (collective == v1::COLLECTIVE_ALL_TO_ALL ? 10 : 0));
      const std::vector<std::string> hosts = Place(**topo, n, packed, rng);
      for (const uint32_t k : options.failures) {
        std::mt19937 fail_rng(options.seed * 104729 + k);
        const std::set<std::string> failed = FailedUplinks(**topo, hosts, k, fail_rng);
        auto rows_of_case = RunCase(*topo, hosts, collective, failed, options.seconds);
        if (!rows_of_case.ok()) return rows_of_case.status();
        for (auto& row : *rows_of_case) {
          row.placement = packed ? "packed" : "fragmented";
          row.failures = k;
          rows.push_back(std::move(row));
        }
      }
    }
  }
  return rows;
}

absl::StatusOr<WhatIf> RunWhatIf(const std::shared_ptr<const Topology>& topology, const std::vector<std::string>& hosts,
                                 v1::Collective collective, const std::set<std::string>& drained) {
  for (const auto& host : hosts)
    if (topology->FindHost(host) == nullptr)
      return absl::InvalidArgumentError(StrCat("host ", host, " of the job is not in the topology"));
  if (hosts.size() < 2) return absl::InvalidArgumentError("a job on one host sends nothing over the fabric");
  auto rows = RunCase(topology, hosts, collective, drained, 2);
  if (!rows.ok()) return rows.status();
  WhatIf out;
  out.rows = std::move(*rows);
  for (auto& r : out.rows) r.placement = "registry";
  // The best bandwidth; among schemes within 2% of it, the simplest (the
  // study's order: fewer QPs, and E-ECMP before TE).
  double best = 0;
  for (const auto& r : out.rows) best = std::max(best, r.busbw_gbs);
  for (size_t i = 0; i < out.rows.size(); ++i)
    if (out.rows[i].scheme != "path_pinning" && out.rows[i].busbw_gbs >= best * 0.98) {
      out.recommended = i;
      break;
    }
  return out;
}

}  // namespace rocefab::lab
