#include "lab/fabric_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/stats.h"
#include "common/strings.h"

namespace rocefab::lab {
namespace {

uint64_t HashString(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

constexpr uint16_t kRoceUdpPort = 4791;

// Offered load over capacity past which a queue holds an excess. Flows that
// share a line evenly (capacity / n each) sum to the capacity give or take
// a rounding error; a link offered exactly its capacity carries it all and
// holds no standing queue.
constexpr double kOverFull = 1 + 1e-9;

}  // namespace

double BusBwFactor(v1::Collective collective, int n) {
  if (n <= 0) return 0;
  switch (collective) {
    case v1::COLLECTIVE_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case v1::COLLECTIVE_ALL_GATHER:
    case v1::COLLECTIVE_REDUCE_SCATTER: return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

absl::StatusOr<std::unique_ptr<FabricModel>> FabricModel::Create(
    std::shared_ptr<const Topology> topology, const v1::Scenario& scenario,
    ModelConstants constants) {
  std::unique_ptr<FabricModel> model(new FabricModel());
  if (auto status = model->Init(std::move(topology), scenario, constants); !status.ok())
    return status;
  return model;
}

absl::Status FabricModel::Init(std::shared_ptr<const Topology> topology,
                               const v1::Scenario& scenario, ModelConstants constants) {
  topology_ = std::move(topology);
  k_ = constants;
  seed_ = scenario.seed() == 0 ? 1 : scenario.seed();
  // mlx5e sets the minor watermark at 85% of the timeout, at least 80 ms.
  const uint32_t stall_ms = scenario.has_nic_stall_timeout_ms() ? scenario.nic_stall_timeout_ms() : 8000;
  nic_stall_timeout_s_ = stall_ms / 1000.0;
  nic_stall_warn_s_ = stall_ms == 0 ? 0 : std::max(0.08, 0.85 * nic_stall_timeout_s_);
  poll_interval_s_ = scenario.poll_interval_s() > 0 ? scenario.poll_interval_s() : 1;
  const v1::Topology& topo = topology_->proto();
  for (int i = 0; i < topo.switches_size(); ++i) {
    const auto& sw = topo.switches(i);
    switches_.push_back({sw.name(), sw.role(), sw.zone(), SplitMix64(HashString(sw.name()) ^ seed_), {}, true});
    switch_index_[sw.name()] = i;
  }
  sw_out_.resize(switches_.size());
  for (int h = 0; h < topo.hosts_size(); ++h) {
    host_index_[topo.hosts(h).name()] = h;
    host_zone_.push_back(topo.hosts(h).zone());
  }
  host_nic_ports_.resize(topo.hosts_size());

  auto add_port = [&](const std::string& full, int link, double speed) {
    std::string_view device, name;
    SplitPortName(full, &device, &name);
    PortState port;
    port.device = std::string(device);
    port.name = std::string(name);
    port.link = link;
    port.speed_gbps = speed;
    if (auto it = switch_index_.find(port.device); it != switch_index_.end()) {
      port.sw = it->second;
    } else {
      port.host = host_index_.at(port.device);
      const auto& nics = topo.hosts(port.host).nics();
      for (int n = 0; n < nics.size(); ++n)
        if (nics[n].name() == port.name) port.nic = n;
    }
    const int id = static_cast<int>(ports_.size());
    ports_.push_back(port);
    port_index_[full] = id;
    if (port.sw >= 0) switches_[port.sw].ports.push_back(id);
    return id;
  };
  for (int l = 0; l < topo.links_size(); ++l) {
    const auto& link = topo.links(l);
    const int a = add_port(link.a(), l, link.speed_gbps());
    const int b = add_port(link.b(), l, link.speed_gbps());
    Channel ab, ba;
    ab.from = a, ab.to = b, ba.from = b, ba.to = a;
    ab.capacity_Bps = ba.capacity_Bps = link.speed_gbps() * 1e9 / 8;
    const int c_ab = static_cast<int>(channels_.size());
    channels_.push_back(ab);
    channels_.push_back(ba);
    ports_[a].out_channel = c_ab, ports_[a].in_channel = c_ab + 1;
    ports_[b].out_channel = c_ab + 1, ports_[b].in_channel = c_ab;
    if (ports_[a].sw >= 0) sw_out_[ports_[a].sw].push_back(c_ab);
    if (ports_[b].sw >= 0) sw_out_[ports_[b].sw].push_back(c_ab + 1);
  }
  applied_.assign(switches_.size(), std::nullopt);
  SwitchQos factory;
  factory.kmin_bytes = k_.ecn_kmin_bytes;
  factory.kmax_bytes = k_.ecn_kmax_bytes;
  factory.pmax = k_.ecn_pmax;
  factory.wd_detect_s = k_.pfcwd_detect_s;
  qos_.assign(switches_.size(), factory);
  nic_ip_.assign(ports_.size(), 0);
  for (int p = 0; p < static_cast<int>(ports_.size()); ++p) {
    if (ports_[p].host < 0) continue;
    unsigned a = 0, b = 0, c = 0, d = 0;
    std::sscanf(topo.hosts(ports_[p].host).nics(ports_[p].nic).ip().c_str(), "%u.%u.%u.%u", &a, &b, &c, &d);
    nic_ip_[p] = (a << 24) | (b << 16) | (c << 8) | d;
  }
  nic_rtsw_.assign(ports_.size(), -1);
  for (int p = 0; p < static_cast<int>(ports_.size()); ++p) {
    if (ports_[p].host < 0) continue;
    nic_rtsw_[p] = ports_[channels_[ports_[p].out_channel].to].sw;
  }
  for (int h = 0; h < topo.hosts_size(); ++h)
    for (const auto& nic : topo.hosts(h).nics())
      host_nic_ports_[h].push_back(port_index_.at(StrCat(topo.hosts(h).name(), "/", nic.name())));

  for (const auto& fault : scenario.faults()) {
    if (auto status = CheckFaultTarget(fault); !status.ok()) return status;
    ActiveFault active;
    active.spec = fault;
    active.start_s = fault.at_s();
    active.end_s = fault.duration_s() > 0 ? fault.at_s() + fault.duration_s() : 1e18;
    active.acts_on_traffic = ActsOnTraffic(fault.kind());
    faults_.push_back(active);
  }
  if (auto status = PlaceJobs(scenario); !status.ok()) return status;
  // A noisy neighbour names two jobs of the scenario, the one that runs
  // while the fault lasts and the one it slows.
  for (const ActiveFault& fault : faults_) {
    if (fault.spec.kind() != v1::FAULT_KIND_JOB_CONTENTION) continue;
    auto job_named = [&](const std::string& id) {
      for (const Job& job : jobs_)
        if (job.spec.id() == id) return true;
      return false;
    };
    const std::string prefix = StrCat("fault FAULT_KIND_JOB_CONTENTION target '", fault.spec.target(), "': ");
    if (!job_named(fault.spec.target())) return absl::InvalidArgumentError(StrCat(prefix, "must be a job id of the scenario"));
    if (!job_named(fault.spec.victim()) || fault.spec.victim() == fault.spec.target())
      return absl::InvalidArgumentError(StrCat(prefix, "victim '", fault.spec.victim(), "' must be another job of the scenario"));
  }
  return absl::OkStatus();
}

absl::Status FabricModel::CheckFaultTarget(const v1::FaultSpec& fault) const {
  const std::string& t = fault.target();
  auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(
        StrCat("fault ", v1::FaultKind_Name(fault.kind()), " target '", t, "': ", what));
  };
  switch (fault.kind()) {
    case v1::FAULT_KIND_PFC_STORM:
    case v1::FAULT_KIND_NIC_DOWN: {
      auto it = port_index_.find(t);
      if (it == port_index_.end() || ports_[it->second].host < 0)
        return bad("must be a NIC of the topology, host/mlx5_N");
      return absl::OkStatus();
    }
    case v1::FAULT_KIND_LINK_FLAP:
    case v1::FAULT_KIND_LOSSY_LINK:
    case v1::FAULT_KIND_DEGRADED_LINK:
      if (!port_index_.count(t)) return bad("must be a cabled port, device/port");
      if (fault.kind() == v1::FAULT_KIND_LOSSY_LINK && (fault.drop_rate() < 0 || fault.drop_rate() >= 1))
        return bad("drop_rate must be in [0, 1)");
      return absl::OkStatus();
    case v1::FAULT_KIND_BUFFER_THRESHOLD:
    case v1::FAULT_KIND_ECMP_SKEW:
      if (!switch_index_.count(t)) return bad("must be a switch");
      return absl::OkStatus();
    case v1::FAULT_KIND_LATENCY_REGRESSION:
      if (!switch_index_.count(t)) return bad("must be a switch");
      if (fault.added_latency_us() < 0 || fault.added_latency_us() > 1e6)
        return bad("added_latency_us must be in [0, 1e6]");
      if (fault.os_version().size() > 128) return bad("os_version is longer than 128 characters");
      return absl::OkStatus();
    case v1::FAULT_KIND_ECN_MISCONFIG:
    case v1::FAULT_KIND_PFC_MISCONFIG:
      if (switch_index_.count(t)) return absl::OkStatus();
      if (auto it = port_index_.find(t); it != port_index_.end() && ports_[it->second].sw >= 0)
        return absl::OkStatus();
      return bad("must be a switch or a switch port");
    case v1::FAULT_KIND_STRAGGLER: {
      std::string_view host, gpu;
      if (!SplitPortName(t, &host, &gpu) || !host_index_.count(std::string(host)) ||
          !gpu.starts_with("gpu"))
        return bad("must be a GPU, host/gpuN");
      return absl::OkStatus();
    }
    case v1::FAULT_KIND_JOB_CONTENTION:
      return absl::OkStatus();  // a job of the scenario: checked once the jobs are placed
    default: return bad("unknown fault kind");
  }
}

absl::Status FabricModel::PlaceJobs(const v1::Scenario& scenario) {
  const v1::Topology& topo = topology_->proto();
  std::set<int> used_hosts;
  for (const v1::JobSpec& spec : scenario.jobs()) {
    Job job;
    job.spec = spec;
    if (job.spec.id().empty()) return absl::InvalidArgumentError("every job needs an id");
    if (job.spec.collective() == v1::COLLECTIVE_UNSPECIFIED)
      job.spec.set_collective(v1::COLLECTIVE_ALL_REDUCE);
    if (job.spec.message_bytes() == 0) job.spec.set_message_bytes(256ULL << 20);
    if (job.spec.qps_per_connection() == 0) job.spec.set_qps_per_connection(1);
    if (job.spec.qps_per_connection() > 256)
      return absl::InvalidArgumentError(
          StrCat("job ", spec.id(), ": qps_per_connection above 256 is not modelled"));
    if (job.spec.compute_ms() <= 0) job.spec.set_compute_ms(20);
    const std::string transport = !spec.transport().empty() ? spec.transport()
                                  : !scenario.transport().empty() ? scenario.transport()
                                                                  : "dcqcn";
    if (transport != "dcqcn" && transport != "cts")
      return absl::InvalidArgumentError(
          StrCat("job ", spec.id(), ": transport '", transport, "' is not dcqcn or cts"));
    job.cts = transport == "cts";
    if (!spec.hosts().empty()) {
      for (const std::string& name : spec.hosts()) {
        auto it = host_index_.find(name);
        if (it == host_index_.end())
          return absl::InvalidArgumentError(StrCat("job ", spec.id(), ": no host ", name));
        job.hosts.push_back(it->second);
      }
    } else {
      const uint32_t want = spec.num_hosts();
      if (want < 2) return absl::InvalidArgumentError(StrCat("job ", spec.id(), ": needs num_hosts >= 2 or hosts"));
      std::vector<int> free;
      for (int h = 0; h < topo.hosts_size(); ++h)
        if (!used_hosts.count(h)) free.push_back(h);
      if (spec.placement() == "spread") {
        // Round-robin over racks: the first host of every rack, then the second...
        std::stable_sort(free.begin(), free.end(), [&](int a, int b) {
          auto rank_in_rack = [&](int h) {
            int n = 0;
            for (int o = 0; o < h; ++o)
              n += topo.hosts(o).rack() == topo.hosts(h).rack() &&
                   topo.hosts(o).zone() == topo.hosts(h).zone();
            return n;
          };
          return rank_in_rack(a) < rank_in_rack(b);
        });
      } else if (!spec.placement().empty() && spec.placement() != "packed") {
        return absl::InvalidArgumentError(
            StrCat("job ", spec.id(), ": placement must be packed or spread"));
      }
      if (free.size() < want)
        return absl::InvalidArgumentError(
            StrCat("job ", spec.id(), ": wants ", want, " hosts, ", free.size(), " are free"));
      job.hosts.assign(free.begin(), free.begin() + want);
    }
    for (int h : job.hosts) {
      if (!used_hosts.insert(h).second)
        return absl::InvalidArgumentError(
            StrCat("job ", spec.id(), ": host ", topo.hosts(h).name(), " is in another job"));
    }
    job.gpus = topo.hosts(job.hosts[0]).nics_size();
    for (int h : job.hosts)
      if (topo.hosts(h).nics_size() != job.gpus)
        return absl::InvalidArgumentError(StrCat("job ", spec.id(), ": hosts differ in NIC count"));
    const int H = static_cast<int>(job.hosts.size());
    if (job.spec.collective() == v1::COLLECTIVE_ALL_TO_ALL && H > 256)
      return absl::InvalidArgumentError(StrCat("job ", spec.id(), ": all_to_all is modelled up to 256 hosts"));
    // Rail-aligned rings: NIC k of every host forms ring k (NCCL's channels);
    // all-to-all connects NIC k of every host pair.
    for (int g = 0; g < job.gpus; ++g) {
      if (job.spec.collective() == v1::COLLECTIVE_ALL_TO_ALL) {
        for (int i = 0; i < H; ++i)
          for (int j = 0; j < H; ++j)
            if (i != j)
              job.conns.emplace_back(host_nic_ports_[job.hosts[i]][g], host_nic_ports_[job.hosts[j]][g]);
      } else {
        for (int i = 0; i < H; ++i)
          job.conns.emplace_back(host_nic_ports_[job.hosts[i]][g],
                                 host_nic_ports_[job.hosts[(i + 1) % H]][g]);
      }
    }
    JobStatus status;
    status.id = spec.id();
    status.name = spec.name().empty() ? spec.id() : spec.name();
    jobs_.push_back(std::move(job));
    job_status_.push_back(status);
  }
  return absl::OkStatus();
}

int FabricModel::PortIndex(const std::string& full_name) const {
  auto it = port_index_.find(full_name);
  return it == port_index_.end() ? -1 : it->second;
}

int FabricModel::ChannelOf(const std::string& from_port) const {
  const int p = PortIndex(from_port);
  return p < 0 ? -1 : ports_[p].out_channel;
}

double FabricModel::ChannelUtilization(int channel) const {
  const Channel& c = channels_[channel];
  return c.capacity_Bps > 0 ? c.carried / c.capacity_Bps : 0;
}

double FabricModel::UplinkImbalance() const {
  double max_u = 0, sum = 0;
  int n = 0;
  for (const Channel& ch : channels_) {
    const int from = ports_[ch.from].sw, to = ports_[ch.to].sw;
    if (from < 0 || to < 0 || switches_[from].role != v1::SWITCH_ROLE_RTSW) continue;
    const double u = ch.capacity_Bps > 0 ? ch.carried / ch.capacity_Bps : 0;
    max_u = std::max(max_u, u);
    sum += u;
    ++n;
  }
  return n > 0 && sum > 0 ? max_u / (sum / n) : 0;
}

uint64_t FabricModel::buffer_used_bytes(int sw) const {
  double used = 0;
  for (int ch : sw_out_[sw]) used += channels_[ch].queue;
  return static_cast<uint64_t>(std::min(used, k_.buffer_bytes));
}

std::vector<int> FabricModel::UpChannelsToward(int sw, int neighbor_sw) const {
  std::vector<int> out;
  for (int ch : sw_out_[sw])
    if (channels_[ch].up && ports_[channels_[ch].to].sw == neighbor_sw) out.push_back(ch);
  return out;
}

bool FabricModel::SwitchReaches(int sw, int rtsw) const {
  const SwitchState& s = switches_[sw];
  if (sw == rtsw) return true;
  for (int ch : sw_out_[sw]) {
    if (!channels_[ch].up) continue;
    const int next = ports_[channels_[ch].to].sw;
    if (next < 0) continue;
    const SwitchState& n = switches_[next];
    if (s.role == v1::SWITCH_ROLE_CTSW && next == rtsw) return true;
    if (s.role == v1::SWITCH_ROLE_ATSW && n.role == v1::SWITCH_ROLE_CTSW &&
        n.zone == switches_[rtsw].zone && SwitchReaches(next, rtsw))
      return true;
  }
  return false;
}

int FabricModel::PickChannel(int sw, const std::vector<int>& candidates, int src, int dst,
                             uint16_t sport, uint32_t qp) const {
  if (candidates.empty()) return -1;
  if (candidates.size() == 1) return candidates[0];
  // ecmp_skew: the group's first members only.
  const size_t members = switches_[sw].ecmp_members > 0
                             ? std::min<size_t>(switches_[sw].ecmp_members, candidates.size())
                             : candidates.size();
  // The 5-tuple: addresses (NIC identities stand for their IPs), UDP ports
  // and protocol, hashed with the switch's own seed as real ASICs do.
  uint64_t h = switches_[sw].seed;
  h = SplitMix64(h ^ static_cast<uint64_t>(src) * 0x100000001b3ULL);
  h = SplitMix64(h ^ static_cast<uint64_t>(dst) * 0x9e3779b1ULL);
  h = SplitMix64(h ^ (static_cast<uint64_t>(sport) << 16 | kRoceUdpPort) ^ 17);
  if (qp != 0) h = SplitMix64(h ^ (static_cast<uint64_t>(qp) << 32));
  return candidates[h % members];
}

std::vector<int> FabricModel::DefaultNextHops(int sw, int dst) const {
  // What a healthy fabric's routing protocol would install: up towards a
  // switch that still reaches the destination rack, down once there.
  const int rd = nic_rtsw_[dst];
  const SwitchState& s = switches_[sw];
  std::vector<int> out;
  if (sw == rd) {
    out.push_back(ports_[dst].in_channel);
    return out;
  }
  for (int ch : sw_out_[sw]) {
    if (!channels_[ch].up) continue;
    const int next = ports_[channels_[ch].to].sw;
    if (next < 0) continue;
    const SwitchState& n = switches_[next];
    bool useful = false;
    if (s.role == v1::SWITCH_ROLE_RTSW) {
      // Up to a CTSW: in the destination's zone it must reach the rack;
      // elsewhere it must reach an ATSW that does.
      if (s.zone == switches_[rd].zone) {
        useful = SwitchReaches(next, rd);
      } else {
        for (int up : sw_out_[next]) {
          const int a = ports_[channels_[up].to].sw;
          useful |= channels_[up].up && a >= 0 && switches_[a].role == v1::SWITCH_ROLE_ATSW &&
                    SwitchReaches(a, rd);
        }
      }
    } else if (s.role == v1::SWITCH_ROLE_CTSW) {
      useful = s.zone == switches_[rd].zone
                   ? next == rd
                   : n.role == v1::SWITCH_ROLE_ATSW && SwitchReaches(next, rd);
    } else {  // ATSW: down to a CTSW of the destination zone that reaches it
      useful = n.zone == switches_[rd].zone && SwitchReaches(next, rd);
    }
    if (useful) out.push_back(ch);
  }
  return out;
}

std::vector<int> FabricModel::AppliedNextHops(int sw, int dst) const {
  const AppliedRouting& applied = *applied_[sw];
  const uint32_t ip = nic_ip_[dst];
  const std::vector<int>* ports = nullptr;
  if (auto it = applied.host_routes.find(ip); it != applied.host_routes.end()) ports = &it->second;
  else if (auto it24 = applied.rack_routes.find(ip & 0xffffff00u); it24 != applied.rack_routes.end())
    ports = &it24->second;
  else if (auto it16 = applied.zone_routes.find(ip & 0xffff0000u); it16 != applied.zone_routes.end())
    ports = &it16->second;
  std::vector<int> out;
  if (ports == nullptr) return out;  // no route: the switch drops it
  for (int port : *ports)
    if (channels_[ports_[port].out_channel].up) out.push_back(ports_[port].out_channel);
  return out;
}

std::vector<int> FabricModel::RuleNextHops(int sw, int ingress, int dst) const {
  const AppliedRouting& applied = *applied_[sw];
  if (applied.rules.empty()) return {};
  const uint32_t rack = nic_ip_[dst] & 0xffffff00u;
  const auto rule = applied.rules.find({ingress, rack});
  if (rule == applied.rules.end()) return {};
  const auto table = applied.tables.find(rule->second);
  if (table == applied.tables.end()) return {};
  const auto route = table->second.find(rack);
  if (route == table->second.end()) return {};
  std::vector<int> out;
  for (int port : route->second)
    if (channels_[ports_[port].out_channel].up) out.push_back(ports_[port].out_channel);
  return out;
}

std::map<std::pair<std::string, std::string>, double> FabricModel::OfferedTraffic() const {
  std::map<std::pair<std::string, std::string>, double> out;
  for (const Flow& f : flows_)
    if (f.demand > 0)
      out[{StrCat(ports_[f.src].device, "/", ports_[f.src].name), StrCat(ports_[f.dst].device, "/", ports_[f.dst].name)}] +=
          f.demand;
  return out;
}

std::vector<int> FabricModel::Route(int src, int dst, uint16_t sport, uint16_t conn_sport,
                                    uint32_t qp) const {
  std::vector<int> path;
  const int first = ports_[src].out_channel;
  if (!channels_[first].up) return {};
  path.push_back(first);
  int sw = nic_rtsw_[src];
  // Hop by hop, as packets go: each switch uses the routes it has applied,
  // or the default fabric routing when it has none.
  for (int hop = 0; hop < 8; ++hop) {
    const bool has_applied = applied_[sw].has_value();
    std::vector<int> candidates;
    if (has_applied) candidates = RuleNextHops(sw, channels_[path.back()].to, dst);
    if (candidates.empty()) candidates = has_applied ? AppliedNextHops(sw, dst) : DefaultNextHops(sw, dst);
    // Plain ECMP hashes the 5-tuple, which all QPs of one connection share;
    // E-ECMP also hashes the destination QP. Without applied config the
    // NIC's per-QP source port gives the entropy.
    uint16_t key_port = sport;
    uint32_t key_qp = 0;
    if (has_applied) {
      if (applied_[sw]->scheme == v1::ROUTING_SCHEME_EECMP || applied_[sw]->scheme == v1::ROUTING_SCHEME_TE)
        key_qp = qp + 1;
      else key_port = conn_sport;
    }
    const int ch = PickChannel(sw, candidates, src, dst, key_port, key_qp);
    if (ch < 0) return {};
    path.push_back(ch);
    const int next = ports_[channels_[ch].to].sw;
    if (next < 0) return ports_[channels_[ch].to].host >= 0 && channels_[ch].to == dst
                             ? path
                             : std::vector<int>{};
    sw = next;
  }
  return {};  // a loop: routes that do not converge
}

void FabricModel::SetAppliedConfig(const v1::SwitchConfig& config) {
  auto it = switch_index_.find(config.switch_name());
  if (it == switch_index_.end()) return;
  AppliedRouting routing;
  routing.scheme = config.scheme();
  routing.qp_scaling_hint = config.qp_scaling_hint();
  std::map<uint32_t, std::vector<int>> groups;
  for (const auto& item : config.items()) {
    if (!item.has_nexthop_group()) continue;
    auto& ports = groups[item.nexthop_group().id()];
    for (const auto& hop : item.nexthop_group().nexthops()) {
      const int port = PortIndex(StrCat(config.switch_name(), "/", hop.port()));
      if (port >= 0) ports.push_back(port);
    }
  }
  for (const auto& item : config.items()) {
    if (!item.has_route()) continue;
    const auto& route = item.route();
    unsigned a, b, c, d, len;
    if (std::sscanf(route.prefix().c_str(), "%u.%u.%u.%u/%u", &a, &b, &c, &d, &len) != 5) continue;
    const uint32_t ip = (a << 24) | (b << 16) | (c << 8) | d;
    std::vector<int> ports;
    if (route.nexthop_group() != 0) {
      ports = groups[route.nexthop_group()];
    } else {
      const int port = PortIndex(StrCat(config.switch_name(), "/", route.port()));
      if (port >= 0) ports.push_back(port);
    }
    if (route.table() != 0) {
      if (len == 24) routing.tables[route.table()][ip & 0xffffff00u] = ports;
    } else if (len == 32) {
      routing.host_routes[ip] = ports;
    } else if (len == 24) {
      routing.rack_routes[ip & 0xffffff00u] = ports;
    } else if (len == 16) {
      routing.zone_routes[ip & 0xffff0000u] = ports;
    }
  }
  for (const auto& item : config.items()) {
    if (!item.has_rule()) continue;
    unsigned a, b, c, d, len;
    const int ingress = PortIndex(StrCat(config.switch_name(), "/", item.rule().iif()));
    if (ingress < 0 || std::sscanf(item.rule().prefix().c_str(), "%u.%u.%u.%u/%u", &a, &b, &c, &d, &len) != 5 ||
        len != 24)
      continue;
    routing.rules[{ingress, (a << 24) | (b << 16) | (c << 8)}] = item.rule().table();
  }
  applied_[it->second] = std::move(routing);
  // The QoS items together (qos/dscp, qos/pfc, qos/ecn, ...). A policy that
  // leaves QoS alone leaves the switch's own.
  v1::QosPolicy policy;
  bool managed = false;
  for (const auto& item : config.items()) {
    if (!item.has_qos()) continue;
    policy.MergeFrom(item.qos().qos());
    managed = true;
  }
  if (managed) qos_[it->second] = QosFromPolicy(policy, k_);
  routes_dirty_ = true;
}

int FabricModel::SwitchIndex(const std::string& name) const {
  auto it = switch_index_.find(name);
  return it == switch_index_.end() ? -1 : it->second;
}

SwitchQos QosFromPolicy(const v1::QosPolicy& policy, const ModelConstants& k) {
  SwitchQos q;
  q.managed = true;
  q.roce_tc = 3;
  for (const auto& map : policy.dscp_to_tc())
    if (map.dscp() == k.roce_dscp) q.roce_tc = map.tc();
  q.lossless = std::find(policy.pfc_priorities().begin(), policy.pfc_priorities().end(), q.roce_tc) !=
               policy.pfc_priorities().end();
  q.ecn = false;
  for (const auto& ecn : policy.ecn()) {
    if (ecn.tc() != q.roce_tc || ecn.max_bytes() == 0) continue;
    q.ecn = true;
    q.kmin_bytes = static_cast<double>(ecn.min_bytes());
    q.kmax_bytes = static_cast<double>(std::max(ecn.max_bytes(), ecn.min_bytes() + 1));
    q.pmax = ecn.probability() > 0 ? std::min(1.0, ecn.probability()) : k.ecn_pmax;
  }
  const auto& wd = policy.pfc_watchdog();
  q.wd_detect_s = wd.detect_ms() / 1e3;
  q.wd_restore_s = wd.restore_ms() > 0 ? wd.restore_ms() / 1e3 : 2 * q.wd_detect_s;
  q.wd_action = wd.action().empty() ? "drop" : wd.action();  // SONiC's default action
  // tc 0 is best effort: a strict-priority class of 0 is none.
  q.control_priority = policy.strict_priority_tc() != 0 && policy.strict_priority_tc() != q.roce_tc;
  return q;
}

void FabricModel::Reroute() {
  flows_.clear();
  for (int j = 0; j < static_cast<int>(jobs_.size()); ++j) {
    const Job& job = jobs_[j];
    // A scheduler that honours the controller's QP-scaling hint opens that
    // many QPs per connection on the rack switches that ask for it.
    uint32_t qps = job.spec.qps_per_connection();
    for (int h : job.hosts) {
      const int rtsw = nic_rtsw_[host_nic_ports_[h][0]];
      if (applied_[rtsw]) qps = std::max(qps, applied_[rtsw]->qp_scaling_hint);
    }
    for (int c = 0; c < static_cast<int>(job.conns.size()); ++c) {
      for (uint32_t q = 0; q < qps; ++q) {
        Flow flow;
        flow.job = j;
        flow.conn = c;
        flow.src = job.conns[c].first;
        flow.dst = job.conns[c].second;
        // The NIC derives the UDP source port from the QP number.
        auto sport_of = [&](uint32_t qp) {
          return static_cast<uint16_t>(
              0xC000 | (SplitMix64(seed_ ^ (static_cast<uint64_t>(j) << 40) ^ (static_cast<uint64_t>(c) << 16) ^ qp) & 0x3fff));
        };
        flow.sport = sport_of(q);
        flow.path = Route(flow.src, flow.dst, flow.sport, sport_of(0), q);
        flows_.push_back(std::move(flow));
      }
    }
  }
  routes_dirty_ = false;
}

void FabricModel::ApplyFaults() {
  // Start from the healthy fabric, then lay every active fault over it.
  std::vector<bool> was_up(ports_.size());
  for (size_t p = 0; p < ports_.size(); ++p) {
    was_up[p] = ports_[p].up;
    ports_[p].up = true;
    ports_[p].speed_gbps = topology_->proto().links(ports_[p].link).speed_gbps();
  }
  for (PortState& p : ports_) p.pfc_on = p.sw < 0 || qos_[p.sw].lossless;
  for (Channel& ch : channels_) {
    ch.ecn_ok = true;
    ch.pfc_off = false;
    ch.drop_rate = 0;
    ch.stuck = false;
    ch.storm_fraction = 0;
    ch.queue_limit = 0;
  }
  for (Job& job : jobs_) {
    job.late_ranks.clear();
    job.straggler_delay_s = 0;
  }
  std::vector<uint32_t> was_members(switches_.size());
  for (size_t sw = 0; sw < switches_.size(); ++sw) {
    was_members[sw] = switches_[sw].ecmp_members;
    switches_[sw].ecmp_members = 0;
  }
  auto link_ports = [&](int port) {
    const int link = ports_[port].link;
    return std::pair<int, int>(channels_[2 * link].from, channels_[2 * link].to);
  };
  for (ActiveFault& fault : faults_) {
    fault.active = now_s_ >= fault.start_s && now_s_ < fault.end_s;
    if (!fault.active) continue;
    const v1::FaultSpec& spec = fault.spec;
    const int port = PortIndex(spec.target());
    switch (spec.kind()) {
      case v1::FAULT_KIND_PFC_STORM: {
        Channel& ch = channels_[ports_[port].in_channel];
        ch.stuck = true;
        ch.storm_fraction = spec.pause_fraction() > 0 ? std::min(1.0, spec.pause_fraction()) : 0.8;
        break;
      }
      case v1::FAULT_KIND_NIC_DOWN: {
        auto [a, b] = link_ports(port);
        ports_[a].up = ports_[b].up = false;
        break;
      }
      case v1::FAULT_KIND_LINK_FLAP: {
        const double down = spec.flap_down_s() > 0 ? spec.flap_down_s() : 2;
        const double up = spec.flap_up_s() > 0 ? spec.flap_up_s() : 3;
        if (std::fmod(now_s_ - fault.start_s, down + up) < down) {
          auto [a, b] = link_ports(port);
          ports_[a].up = ports_[b].up = false;
        }
        break;
      }
      case v1::FAULT_KIND_LOSSY_LINK: {
        const double rate = spec.drop_rate() > 0 ? spec.drop_rate() : 1e-3;
        const int link = ports_[port].link;
        channels_[2 * link].drop_rate = channels_[2 * link + 1].drop_rate = rate;
        break;
      }
      case v1::FAULT_KIND_DEGRADED_LINK: {
        auto [a, b] = link_ports(port);
        ports_[a].speed_gbps = ports_[b].speed_gbps = spec.speed_gbps() > 0 ? spec.speed_gbps() : 100;
        break;
      }
      case v1::FAULT_KIND_ECN_MISCONFIG:
        if (auto it = switch_index_.find(spec.target()); it != switch_index_.end()) {
          for (int ch : sw_out_[it->second]) channels_[ch].ecn_ok = false;
        } else {
          channels_[ports_[port].out_channel].ecn_ok = false;
        }
        break;
      case v1::FAULT_KIND_PFC_MISCONFIG: {
        // PFC is a link's agreement: with it off at one end, neither
        // direction of the link holds its class back.
        auto off = [&](int p) {
          ports_[p].pfc_on = false;
          const int link = ports_[p].link;
          channels_[2 * link].pfc_off = channels_[2 * link + 1].pfc_off = true;
        };
        if (auto it = switch_index_.find(spec.target()); it != switch_index_.end()) {
          for (int ch : sw_out_[it->second]) off(channels_[ch].from);
        } else {
          off(port);
        }
        break;
      }
      case v1::FAULT_KIND_ECMP_SKEW:
        switches_[switch_index_.at(spec.target())].ecmp_members = spec.ecmp_members() > 0 ? spec.ecmp_members() : 1;
        break;
      case v1::FAULT_KIND_BUFFER_THRESHOLD: {
        const double limit = spec.queue_limit_bytes() > 0 ? static_cast<double>(spec.queue_limit_bytes()) : 100e3;
        for (int ch : sw_out_[switch_index_.at(spec.target())]) channels_[ch].queue_limit = limit;
        break;
      }
      case v1::FAULT_KIND_STRAGGLER: {
        std::string_view host, gpu;
        SplitPortName(spec.target(), &host, &gpu);
        const int h = host_index_.at(std::string(host));
        const int g = std::atoi(std::string(gpu.substr(3)).c_str());
        for (Job& job : jobs_) {
          auto it = std::find(job.hosts.begin(), job.hosts.end(), h);
          if (it == job.hosts.end()) continue;
          const int rank = static_cast<int>(it - job.hosts.begin()) * job.gpus + g;
          double& delay = job.late_ranks[rank];
          delay = std::max(delay, job.spec.compute_ms() / 1e3 * (spec.slowdown() > 0 ? spec.slowdown() : 0.5));
          job.straggler_delay_s = std::max(job.straggler_delay_s, delay);
        }
        break;
      }
      default: break;
    }
  }
  for (size_t p = 0; p < ports_.size(); ++p) {
    if (was_up[p] && !ports_[p].up) {
      // A carrier loss, as each side's counters see it.
      PortCounters& c = ports_[p].c;
      if (ports_[p].host >= 0) {
        c.link_downed += 1;
        c.link_down_events += 1;
      } else {
        c.link_flaps += 1;
      }
    }
    if (was_up[p] != ports_[p].up) routes_dirty_ = true;
  }
  for (size_t sw = 0; sw < switches_.size(); ++sw)
    if (was_members[sw] != switches_[sw].ecmp_members) routes_dirty_ = true;
  // Connections with a QP on a path that just died stall for the QP timeout.
  for (const Flow& f : flows_) {
    for (int ch : f.path) {
      const int a = channels_[ch].from, b = channels_[ch].to;
      if ((was_up[a] && !ports_[a].up) || (was_up[b] && !ports_[b].up)) {
        std::vector<double>& until = jobs_[f.job].conn_stall_until;
        if (until.size() < jobs_[f.job].conns.size()) until.resize(jobs_[f.job].conns.size(), 0);
        until[f.conn] = std::max(until[f.conn], now_s_ + k_.qp_timeout_s);
        break;
      }
    }
  }
  for (size_t i = 0; i < channels_.size(); ++i) {
    Channel& ch = channels_[i];
    ch.up = ports_[ch.from].up && ports_[ch.to].up;
    ch.capacity_Bps = std::min(ports_[ch.from].speed_gbps, ports_[ch.to].speed_gbps) * 1e9 / 8;
  }
}

void FabricModel::ComputeRates() {
  // Demand: each NIC sends at line rate, shared among the QPs leaving it.
  std::vector<int> flows_from(ports_.size(), 0);
  for (const Flow& f : flows_)
    if (!f.path.empty()) ++flows_from[f.src];
  for (Flow& f : flows_) {
    const bool routable = !f.path.empty() && job_status_[f.job].running;
    f.demand = routable ? channels_[ports_[f.src].out_channel].capacity_Bps / flows_from[f.src] : 0;
    if (routable)
      for (int ch : f.path)
        if (!channels_[ch].up) f.demand = 0;
    // A ring with a connection waiting out its QP timeout cannot progress:
    // every rank waits, and the whole job sends nothing until it recovers.
    for (double until : jobs_[f.job].conn_stall_until)
      if (now_s_ < until) f.demand = 0;
  }
  // Nor can one with a dead connection (no route, or a link of its path
  // down): NCCL hangs, and the ranks that finished their chunks wait with
  // nothing to send.
  {
    std::vector<bool> dead(jobs_.size(), false);
    for (const Flow& f : flows_) {
      if (!job_status_[f.job].running) continue;
      bool up = !f.path.empty();
      for (int ch : f.path) up = up && channels_[ch].up;
      if (!up) dead[f.job] = true;
    }
    for (Flow& f : flows_)
      if (dead[f.job]) f.demand = 0;
  }
  // Receiver-driven admission: a receiver grants clear-to-send for no more
  // than its own line rate, shared by the CTS flows coming to it, so their
  // incast never queues at its last hop.
  {
    std::vector<double> cts_into(ports_.size(), 0);
    for (const Flow& f : flows_)
      if (jobs_[f.job].cts && f.demand > 0) cts_into[f.dst] += f.demand;
    for (Flow& f : flows_) {
      if (!jobs_[f.job].cts || f.demand <= 0) continue;
      const double line = channels_[ports_[f.dst].in_channel].capacity_Bps;
      if (cts_into[f.dst] > line) f.demand *= line / cts_into[f.dst];
    }
  }
  // Which switch queues marking can hold: ECN on for the class (by fault
  // and by QoS), marking that starts before XOFF, and most of the queue's
  // load from DCQCN senders (CTS senders ignore marks).
  std::vector<bool> marks(channels_.size(), false);
  std::vector<bool> marks_if_on(channels_.size(), false);  // ... were ECN on where a fault took it off
  {
    std::vector<double> dcqcn_load(channels_.size(), 0), all_load(channels_.size(), 0);
    for (const Flow& f : flows_)
      for (int ch : f.path) {
        all_load[ch] += f.demand;
        if (!jobs_[f.job].cts) dcqcn_load[ch] += f.demand;
      }
    for (size_t i = 0; i < channels_.size(); ++i) {
      const SwitchQos* q = SenderQos(channels_[i]);
      // A queue that tail-drops below Kmin never grows deep enough to mark.
      const bool limited = channels_[i].queue_limit > 0 && q != nullptr && channels_[i].queue_limit <= q->kmin_bytes;
      marks_if_on[i] = q != nullptr && q->ecn && q->kmin_bytes < k_.xoff_bytes &&
                       dcqcn_load[i] >= 0.5 * all_load[i] && !limited;
      marks[i] = marks_if_on[i] && channels_[i].ecn_ok;
    }
  }
  // What each sender does with its receiver's pause requests: a NIC always
  // obeys; a switch obeys on a lossless class, ignores them on a lossy one
  // (no PFC on the priority), and stops obeying once its watchdog has
  // called the queue stormed and acts on it (drop or forward).
  std::vector<double> obey(channels_.size(), 1), watchdog_drop(channels_.size(), 0);
  for (size_t i = 0; i < channels_.size(); ++i) {
    const Channel& ch = channels_[i];
    const SwitchQos* q = SenderQos(ch);
    if (q == nullptr) continue;
    if (!q->lossless || ch.pfc_off) obey[i] = 0;
    if (ch.wd_stormed && q->wd_mitigates()) {
      obey[i] = 0;
      // Drop discards the queue's packets; forward sends them to a receiver
      // that has no room, which discards them. Either way they are lost,
      // and nothing backs up behind them.
      watchdog_drop[i] = 1;
    }
  }
  std::vector<double> request(channels_.size(), 0), next(channels_.size(), 0), share(channels_.size(), 1),
      paused(channels_.size(), 0), drop(channels_.size(), 0);
  std::vector<char> limit_dropped(channels_.size(), 0);
  for (size_t i = 0; i < channels_.size(); ++i) {
    request[i] = StormRequest(channels_[i]);
    paused[i] = request[i] * obey[i];
  }
  // Each round lets PFC climb one more hop; a fabric is at most 6 hops deep.
  for (int round = 0; round < 8; ++round) {
    for (Channel& ch : channels_) ch.load = 0;
    for (const Flow& f : flows_)
      for (int ch : f.path) channels_[ch].load += f.demand;
    for (size_t i = 0; i < channels_.size(); ++i) {
      const Channel& ch = channels_[i];
      const double cap = ch.up && watchdog_drop[i] == 0 ? ch.capacity_Bps * (1 - paused[i]) : 0;
      share[i] = ch.load <= cap ? 1.0 : (ch.load > 0 ? cap / ch.load : 1.0);
    }
    for (Flow& f : flows_) {
      double s = 1;
      for (int ch : f.path) s = std::min(s, share[ch]);
      f.rate = f.demand * s;
    }
    // What actually arrives at each queue: flows as limited by the hops
    // before it (not their demand, which upstream bottlenecks already cut).
    std::vector<double> arrival(channels_.size(), 0);
    for (const Flow& f : flows_) {
      double s = 1;
      for (int ch : f.path) {
        arrival[ch] += f.demand * s;
        s = std::min(s, share[ch]);
      }
    }
    // Which egress queues fill up to XOFF and pause the hop before them, or
    // on a lossy class drop what does not fit.
    std::fill(next.begin(), next.end(), 0.0);
    std::vector<double> pause_from(channels_.size(), 0);
    for (size_t i = 0; i < channels_.size(); ++i) {
      Channel& ch = channels_[i];
      next[i] = StormRequest(ch);
      if (ports_[ch.from].sw < 0 || arrival[i] <= 0 || watchdog_drop[i] > 0) continue;  // only switches send PFC upstream
      const SwitchQos& q = qos_[ports_[ch.from].sw];
      const double cap = ch.up ? ch.capacity_Bps * (1 - paused[i]) : 0;
      const double u = cap > 0 ? arrival[i] / cap : 1e9;
      const double ecn_holds = q.control_priority ? k_.incast_pfc_utilization : k_.incast_pfc_utilization_shared_cnp;
      double f = 0;
      if (cap <= 0 || paused[i] > 0.01 || !marks[i]) {
        // A paused or unmarked queue cannot slow its senders by ECN: it fills
        // to XOFF and holds back the excess with pause frames.
        if (u > kOverFull) f = 1 - 1 / u;
      } else if (u > ecn_holds) {
        f = 1 - ecn_holds / u;
      }
      if (!q.lossless) {
        // No PFC on the class: the excess is tail-dropped at the queue.
        drop[i] = std::max(drop[i], f);
        f = 0;
      }
      // The depth a queue shows follows what is offered to it (its load);
      // the limit bites on the same measure, so that a queue shown at its
      // limit drops.
      const double u_limit = std::max(u, cap > 0 ? ch.load / cap : 1e9);
      if (ch.queue_limit > 0 && u_limit > kOverFull) {
        // The depth the queue needs to hold the excess: ECN's marking band
        // while DCQCN holds it, else XOFF. A drop threshold below that
        // tail-drops, and the queue never reaches XOFF to pause. Below
        // Kmin nothing marks and the whole excess is lost; inside the band
        // DCQCN still slows the senders, less the lower the limit.
        const bool ecn_holding = cap > 0 && paused[i] <= 0.01 && marks[i] && u_limit <= ecn_holds;
        const double needed = ecn_holding ? q.kmin_bytes + (q.kmax_bytes - q.kmin_bytes) * std::min(1.0, u_limit - 1)
                                          : k_.xoff_bytes;
        if (needed > ch.queue_limit) {
          const double lost = ecn_holding ? std::min(1.0, (needed - ch.queue_limit) / std::max(1.0, needed - q.kmin_bytes))
                                          : 1.0;
          drop[i] = std::max(drop[i], (1 - 1 / u_limit) * lost);
          limit_dropped[i] = 1;
          f = 0;
        }
      }
      pause_from[i] = f;
    }
    for (const Flow& f : flows_)
      for (size_t h = 1; h < f.path.size(); ++h)
        if (pause_from[f.path[h]] > 0) {
          // Arriving over a link without PFC for the class, the excess
          // cannot be held back: the queue drops it.
          if (channels_[f.path[h - 1]].pfc_off) drop[f.path[h]] = std::max(drop[f.path[h]], pause_from[f.path[h]]);
          else next[f.path[h - 1]] = std::max(next[f.path[h - 1]], pause_from[f.path[h]]);
        }
    // Pauses only grow within a tick: the queue that caused one stays at
    // XOFF for as long as the excess lasts, even though the pause itself
    // lowers what arrives. Monotone rounds also converge.
    double change = 0;
    for (size_t i = 0; i < channels_.size(); ++i) {
      next[i] = std::max(next[i], request[i]);
      change = std::max(change, next[i] - request[i]);
    }
    request.swap(next);
    for (size_t i = 0; i < channels_.size(); ++i) paused[i] = request[i] * obey[i];
    if (change < 1e-3) break;
  }
  for (size_t i = 0; i < channels_.size(); ++i) {
    channels_[i].request = request[i];
    channels_[i].congestion_drop = std::max(drop[i], watchdog_drop[i]);
    channels_[i].limit_dropped = limit_dropped[i] != 0;
    // A NIC past its stall prevention timeout no longer pauses: what it
    // cannot take, it drops.
    channels_[i].rx_stall_drop =
        channels_[i].stuck && channels_[i].stall_tripped ? channels_[i].storm_fraction : 0;
  }
  // Loss costs goodput: every drop is paid for by a go-back-N retransmit.
  for (Flow& f : flows_) {
    double keep = 1;
    for (int ch : f.path)
      keep *= (1 - channels_[ch].drop_rate) * (1 - channels_[ch].congestion_drop) * (1 - channels_[ch].rx_stall_drop);
    f.rate = keep <= 0 ? 0 : f.rate / (1 + (1 - keep) * k_.gbn_cost_packets);
  }
  for (size_t i = 0; i < channels_.size(); ++i) {
    Channel& ch = channels_[i];
    ch.paused = paused[i];
    ch.carried = 0;
  }
  for (const Flow& f : flows_)
    for (int ch : f.path) channels_[ch].carried += f.rate;
  for (size_t i = 0; i < channels_.size(); ++i) {
    Channel& ch = channels_[i];
    const double cap = ch.up ? ch.capacity_Bps * (1 - ch.paused) : 0;
    const double u = cap > 0 ? ch.load / cap : (ch.load > 0 ? 1e9 : 0);
    ch.mark = 0;
    ch.ecn_missed = false;
    const SwitchQos* q = SenderQos(ch);
    if (q == nullptr) {
      ch.queue = 0;
    } else if (ch.wd_stormed && q->wd_mitigates()) {
      ch.queue = 0;  // the watchdog empties it
    } else if (StormRequest(ch) > 0 || ch.paused > 0.5) {
      ch.queue = k_.xoff_bytes * 1.5;
    } else if (u > kOverFull && !marks[i]) {
      ch.queue = k_.xoff_bytes;
      ch.ecn_missed = marks_if_on[i];
    } else if (u > kOverFull) {
      // DCQCN holds the queue between Kmin and Kmax while marking, at up
      // to Pmax of the packets.
      ch.mark = std::min(q->pmax, 0.01 + 0.05 * (u - 1));
      ch.queue = q->kmin_bytes + (q->kmax_bytes - q->kmin_bytes) * std::min(1.0, u - 1);
    } else {
      ch.queue = std::min(q->kmin_bytes, k_.ecn_kmin_bytes) * 0.5 * std::pow(u, 6);
    }
    if (ch.queue_limit > 0) ch.queue = std::min(ch.queue, ch.queue_limit);
  }
}

void FabricModel::Accumulate(double dt, std::vector<CollectiveRecord>* records) {
  // Collective progress per job, from its slowest connection.
  std::vector<double> duty(jobs_.size(), 0);
  for (int j = 0; j < static_cast<int>(jobs_.size()); ++j) {
    Job& job = jobs_[j];
    JobStatus& status = job_status_[j];
    if (!status.running) continue;
    std::vector<double> conn_rate(job.conns.size(), 0);
    for (const Flow& f : flows_)
      if (f.job == j) conn_rate[f.conn] += f.rate;
    const double min_rate = conn_rate.empty() ? 0 : *std::min_element(conn_rate.begin(), conn_rate.end());
    const int H = static_cast<int>(job.hosts.size());
    const int G = job.gpus;
    const int n = H * G;
    const double m = static_cast<double>(job.spec.message_bytes());
    double per_conn_bytes = 0, traffic_bytes = 0, steps = 0;
    switch (job.spec.collective()) {
      case v1::COLLECTIVE_ALL_REDUCE:
        per_conn_bytes = 2.0 * (H - 1) / H * m / G, traffic_bytes = m, steps = 2.0 * (H - 1);
        break;
      case v1::COLLECTIVE_ALL_GATHER:
      case v1::COLLECTIVE_REDUCE_SCATTER:
        per_conn_bytes = (H - 1.0) / H * m * n / G, traffic_bytes = m * n, steps = H - 1.0;
        break;
      default:
        per_conn_bytes = m / H, traffic_bytes = m, steps = 1;
        break;
    }
    const double line = channels_[ports_[job.conns[0].first].out_channel].capacity_Bps;
    // All-to-all: each NIC's H-1 connections share its line; a ring's NIC
    // sends on one.
    const double sharing = job.spec.collective() == v1::COLLECTIVE_ALL_TO_ALL ? std::max(1, H - 1) : 1;
    const double ideal_comm = per_conn_bytes * sharing / line + steps * k_.step_latency_s;
    // CTS costs each step the wait for its grant. With a strict-priority
    // class the grant overtakes data; without one it queues behind the data
    // going to the sender, at the sender's rack switch.
    double grant_wait_s = 0;
    if (job.cts)
      for (const auto& [src, dst] : job.conns) {
        const Channel& down = channels_[ports_[src].in_channel];
        const SwitchQos* q = SenderQos(down);
        if (q != nullptr && !q->control_priority && down.capacity_Bps > 0)
          grant_wait_s = std::max(grant_wait_s, down.queue / down.capacity_Bps);
      }
    status.ideal_busbw_gbs =
        traffic_bytes / ideal_comm / 1e9 * BusBwFactor(job.spec.collective(), n);
    if (min_rate <= 1) {
      // A ring with a dead connection hangs: NCCL waits, nothing completes.
      status.stalled = true;
      status.busbw_gbs = 0;
      continue;
    }
    status.stalled = false;
    const double comm = per_conn_bytes / min_rate + steps * (k_.step_latency_s + grant_wait_s + job.added_latency_s);
    job.bare_iteration_s = comm + job.spec.compute_ms() / 1e3;
    const double iteration = job.bare_iteration_s + job.straggler_delay_s;
    // The flows send for the communication share of the iteration; a
    // latency_regression's extra wait at each step sends nothing.
    duty[j] = (comm - steps * job.added_latency_s) / iteration;
    const double before = job.progress;
    job.progress += dt / iteration;
    const uint64_t done = static_cast<uint64_t>(job.progress) - static_cast<uint64_t>(before);
    // Ranks that wait for a late straggler see the wait inside the kernel.
    const double waited = comm + job.straggler_delay_s;
    status.busbw_gbs = traffic_bytes / waited / 1e9 * BusBwFactor(job.spec.collective(), n);
    if (done == 0) continue;
    job.seq += done;
    status.completed += done;
    if (records == nullptr) continue;
    // One record per rank for every collective completed in this step, as
    // NCCL Inspector writes them (at most 64 per step: longer bursts are
    // the same timing repeated).
    const uint64_t first = job.seq - std::min<uint64_t>(done, 64) + 1;
    for (uint64_t seq = first; seq <= job.seq; ++seq)
    for (int r = 0; r < n; ++r) {
      CollectiveRecord rec;
      rec.job = j;
      rec.rank = r;
      rec.host = job.hosts[r / G];
      rec.gpu = r % G;
      rec.seq = seq;
      rec.msg_bytes = job.spec.message_bytes();
      // Kernel times jitter from one collective to the next (launch and
      // clock noise), so which rank is fastest is chance on a healthy job.
      const uint64_t h = SplitMix64(seed_ ^ (static_cast<uint64_t>(j) << 48) ^ (seq << 16) ^ static_cast<uint64_t>(r));
      const double u1 = (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;
      const double u2 = (static_cast<double>(SplitMix64(h) >> 11) + 0.5) / 9007199254740992.0;
      const double z = std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      const auto late = job.late_ranks.find(r);
      const double kernel = late == job.late_ranks.end() ? waited : waited - late->second;
      rec.exec_time_us = kernel * 1e6 * std::max(0.5, 1 + k_.kernel_jitter * z);
      rec.algbw_gbs = traffic_bytes / (rec.exec_time_us / 1e6) / 1e9;
      rec.busbw_gbs = rec.algbw_gbs * BusBwFactor(job.spec.collective(), n);
      records->push_back(rec);
    }
  }

  // Traffic counters: each flow runs for its job's communication share.
  for (const Flow& f : flows_) {
    const JobStatus& status = job_status_[f.job];
    if (status.running && status.stalled) {
      // A job hung on a NIC that drops all it receives (its stall
      // prevention gave up pausing): its QPs still send what they have in
      // flight again at each timeout, and the NIC drops that too.
      for (int ch_id : f.path)
        if (channels_[ch_id].rx_stall_drop > 0) {
          ports_[channels_[ch_id].to].c.rx_discards_phy += k_.qp_inflight_bytes / k_.mtu_bytes * dt / k_.qp_timeout_s;
          break;
        }
      continue;
    }
    if (!Sends(f)) continue;
    const double bytes = f.rate * duty[f.job] * dt;
    const double packets = bytes / k_.mtu_bytes;
    double unmarked = 1, kept = 1;
    for (int ch_id : f.path) {
      const Channel& ch = channels_[ch_id];
      PortCounters& from = ports_[ch.from].c;
      PortCounters& to = ports_[ch.to].c;
      from.tx_bytes += bytes, from.tx_packets += packets;
      to.rx_bytes += bytes, to.rx_packets += packets;
      // CTS senders do not set ECT (DCQCN is off): nothing to mark.
      const double mark = jobs_[f.job].cts ? 0 : ch.mark;
      if (ports_[ch.from].sw >= 0) {
        from.queue_tx_bytes += bytes;
        from.queue_tx_packets += packets;
        from.queue_ecn_marked += packets * unmarked * mark;
      }
      if (ch.congestion_drop > 0 && ports_[ch.from].sw >= 0) {
        from.queue_drops += packets * kept * ch.congestion_drop;
        kept *= 1 - ch.congestion_drop;
      }
      if (ch.drop_rate > 0) {
        const double dropped = packets * kept * ch.drop_rate;
        if (ports_[ch.to].sw >= 0) {
          to.rx_fcs_errors += dropped;
          to.rx_symbol_errors += dropped * 3;
        } else {
          to.symbol_errors += dropped * 3;
        }
      }
      unmarked *= 1 - mark;
      kept *= 1 - ch.drop_rate;
      if (ch.rx_stall_drop > 0) {
        to.rx_discards_phy += packets * kept * ch.rx_stall_drop;
        kept *= 1 - ch.rx_stall_drop;
      }
    }
    PortCounters& src = ports_[f.src].c;
    PortCounters& dst = ports_[f.dst].c;
    const double marked = packets * (1 - unmarked);
    const double cnps = std::min(marked, duty[f.job] * dt / k_.cnp_interval_s);
    dst.ecn_marked_packets += marked;
    dst.cnp_sent += cnps;
    src.cnp_handled += cnps;
    const double drops = packets * (1 - kept);
    if (drops > 0) {
      // Receivers see the hole as out-of-sequence packets and NAK it;
      // senders retransmit (go back N) and sometimes time out.
      dst.out_of_sequence += drops;
      dst.implied_nak_seq_errors += drops * 0.5;
      src.packet_seq_errors += drops;
      src.retransmits += drops * 8;
      src.retransmit_timeouts += drops * 0.02;
      src.local_ack_timeouts += drops * 0.01;
    }
  }

  // PFC: a paused channel's sender receives pauses; its receiver sends them.
  for (size_t i = 0; i < channels_.size(); ++i) {
    Channel& ch = channels_[i];
    PortCounters& from = ports_[ch.from].c;
    PortCounters& to = ports_[ch.to].c;
    if (ch.request > 0) {
      // The frames on the wire are what the receiver asks for; the time
      // paused (and a NIC's tx_wait) is what the sender obeyed.
      const double frames = k_.pause_frames_per_s * ch.request * dt;
      const double us = ch.paused * dt * 1e6;
      from.pfc_rx_frames += frames, from.pfc_rx_us += us;
      to.pfc_tx_frames += frames, to.pfc_tx_us += ch.request * dt * 1e6;
      if (ports_[ch.from].host >= 0) from.tx_wait += us;
    }
    if (ports_[ch.from].sw >= 0) {
      from.queue_depth_bytes = ch.queue;
      from.queue_watermark_bytes = std::min(k_.buffer_bytes, ch.queue * 1.2);
      // The PFC watchdog calls a queue stormed once it has been held paused
      // (it cannot drain) for the detection time, and restored once no
      // pause has held it for the restoration time.
      const SwitchQos& q = qos_[ports_[ch.from].sw];
      if (q.wd_detect_s > 0) {
        if (ch.request >= k_.pfcwd_paused_share) {
          ch.wd_calm_s = 0;
          ch.wd_paused_s += dt;
          if (!ch.wd_stormed && ch.wd_paused_s + 1e-9 >= q.wd_detect_s) {
            ch.wd_stormed = true;
            from.pfcwd_detected += 1;
          }
        } else {
          ch.wd_paused_s = 0;
          if (ch.wd_stormed) {
            ch.wd_calm_s += dt;
            if (ch.wd_calm_s + 1e-9 >= q.wd_restore_s) {
              ch.wd_stormed = false;
              from.pfcwd_restored += 1;
            }
          }
        }
      }
    }
    if (ports_[ch.to].host >= 0) {
      // The NIC's stall prevention (mlx5's device stall watermarks): a run
      // of pausing without a break (a stuck receive that cannot drain,
      // not pauses now and then) counts one warning event past the minor
      // watermark and one error event at the timeout, when the NIC stops
      // sending pauses. The run ends when the NIC drains again.
      const bool stalled = ch.stuck && ch.storm_fraction >= k_.pfcwd_paused_share && nic_stall_timeout_s_ > 0;
      if (!stalled) {
        ch.stall_s = 0;
        ch.stall_warned = ch.stall_tripped = false;
      } else {
        ch.stall_s += dt;
        if (!ch.stall_warned && ch.stall_s + 1e-9 >= nic_stall_warn_s_) {
          ch.stall_warned = true;
          to.pause_storm_warnings += 1;
        }
        if (!ch.stall_tripped && ch.stall_s + 1e-9 >= nic_stall_timeout_s_) {
          ch.stall_tripped = true;
          to.pause_storm_errors += 1;
        }
      }
    }
  }
}

void FabricModel::Step(double dt, std::vector<CollectiveRecord>* records) {
  for (size_t j = 0; j < jobs_.size(); ++j) {
    bool running = now_s_ >= jobs_[j].spec.start_s();
    // A noisy neighbour runs while its fault lasts.
    for (const ActiveFault& fault : faults_)
      if (fault.spec.kind() == v1::FAULT_KIND_JOB_CONTENTION && fault.spec.target() == jobs_[j].spec.id())
        running = now_s_ >= fault.start_s && now_s_ < fault.end_s;
    if (running != job_status_[j].running) routes_dirty_ = true;
    job_status_[j].running = running;
  }
  ApplyFaults();
  if (routes_dirty_) Reroute();
  AddLatency();
  ComputeRates();
  RecordCollisions(dt);
  Accumulate(dt, records);
  // After Accumulate: whether a fault shows depends on this step's job
  // status too (a job a dead link stalls shows none of its ranks' delays).
  MarkObservable(dt);
  now_s_ += dt;
}

void FabricModel::AddLatency() {
  std::vector<double> added(switches_.size(), 0);
  bool any = false;
  for (const ActiveFault& fault : faults_)
    if (fault.active && fault.spec.kind() == v1::FAULT_KIND_LATENCY_REGRESSION) {
      added[switch_index_.at(fault.spec.target())] +=
          (fault.spec.added_latency_us() > 0 ? fault.spec.added_latency_us() : 20) / 1e6;
      any = true;
    }
  for (Job& job : jobs_) job.added_latency_s = 0;
  if (!any) return;
  // A step waits for its slowest connection: the most the added latency
  // delays any of the job's flows, summed over the switches it crosses.
  for (const Flow& f : flows_) {
    double sum = 0;
    for (int ch : f.path)
      if (const int sw = ports_[channels_[ch].from].sw; sw >= 0) sum += added[static_cast<size_t>(sw)];
    jobs_[f.job].added_latency_s = std::max(jobs_[f.job].added_latency_s, sum);
  }
}

std::string FabricModel::SwitchOsVersion(int sw) const {
  std::string version = "lab-1.0";
  for (const ActiveFault& fault : faults_)
    if (fault.active && fault.spec.kind() == v1::FAULT_KIND_LATENCY_REGRESSION &&
        switch_index_.at(fault.spec.target()) == sw)
      version = fault.spec.os_version().empty() ? "lab-2.0" : fault.spec.os_version();
  return version;
}

void FabricModel::MarkObservable(double dt) {
  for (ActiveFault& fault : faults_) {
    if (!fault.active) {
      fault.acting_since_s = -1;
      continue;
    }
    // First: whether a fault on traffic can show is whether it touched a job.
    if (fault.acts_on_traffic) {
      if (!NoteTouchedJobs(fault)) fault.acting_since_s = -1;
      else if (fault.acting_since_s < 0) fault.acting_since_s = now_s_;
    }
    if (!fault.observable && CanShow(fault, dt)) {
      fault.observable = true;
      // A fault on traffic shows from when it began to act (ECN off only
      // after a whole interval of it: CanShow).
      fault.observable_from_s = fault.acts_on_traffic ? fault.acting_since_s : now_s_;
    }
  }
}

bool FabricModel::ActsOnTraffic(v1::FaultKind kind) {
  return kind == v1::FAULT_KIND_ECN_MISCONFIG || kind == v1::FAULT_KIND_ECMP_SKEW ||
         kind == v1::FAULT_KIND_BUFFER_THRESHOLD || kind == v1::FAULT_KIND_LATENCY_REGRESSION;
}

FabricModel::TrafficTarget FabricModel::TrafficTargetOf(const ActiveFault& fault) const {
  TrafficTarget target;
  if (const auto sw = switch_index_.find(fault.spec.target()); sw != switch_index_.end()) target.sw = sw->second;
  else target.port = PortIndex(fault.spec.target());
  target.ecn = fault.spec.kind() == v1::FAULT_KIND_ECN_MISCONFIG;
  target.limit = fault.spec.kind() == v1::FAULT_KIND_BUFFER_THRESHOLD;
  return target;
}

bool FabricModel::Sends(const Flow& f) const {
  const JobStatus& status = job_status_[static_cast<size_t>(f.job)];
  return f.rate > 0 && !f.path.empty() && status.running && !status.stalled;
}

bool FabricModel::NoteTouchedJobs(ActiveFault& fault) const {
  const TrafficTarget target = TrafficTargetOf(fault);
  std::vector<bool> seen(jobs_.size(), false);
  bool acted = false;
  for (const Flow& f : flows_) {
    if (!Sends(f) || seen[static_cast<size_t>(f.job)]) continue;
    for (int ch : f.path)
      if (target.ActsOn(ports_, channels_[ch])) {
        seen[static_cast<size_t>(f.job)] = true;
        fault.touched_jobs.insert(jobs_[f.job].spec.id());
        acted = true;
        break;
      }
  }
  return acted;
}

bool FabricModel::CanShow(const ActiveFault& fault, double dt) const {
  // Whether a flow that sends crosses a channel `on` accepts.
  auto crossed = [&](auto on) {
    for (const Flow& f : flows_) {
      if (!Sends(f)) continue;
      for (int ch : f.path)
        if (on(channels_[ch])) return true;
    }
    return false;
  };
  switch (fault.spec.kind()) {
    // Loss on a link: no frame crosses it (nothing flows there, or the
    // jobs through it hung on another fault), none is corrupted.
    case v1::FAULT_KIND_LOSSY_LINK: {
      const int port = PortIndex(fault.spec.target());
      return port < 0 || crossed([&](const Channel& ch) { return ch.from == port || ch.to == port; });
    }
    // What only traffic shows: no flow through the target switch (its
    // egress), or the target port's egress, nothing to see (the jobs
    // through it hung on another fault). ECN off changes what a queue does
    // only where marking would have held it (Channel::ecn_missed): a queue
    // below Kmin, or one a storm's pauses hold, is the same either way (a
    // generated run drew ECN off on a port a storm held for the whole run).
    // A lowered threshold, only where a queue tail-dropped at it. Such a
    // fault can show once it has touched a job (NoteTouchedJobs, which
    // MarkObservable runs first, walks the flows with that rule).
    // ECN off shows as a deep queue whose mark counter did not move between
    // two readings: only once it has acted, without a break, for one whole
    // poll interval of the agents (a generated run, seed 58 run 68, turned
    // ECN off 1 s before a NIC went down and hung the only job through it,
    // polled every 2 s: every reading's interval held marks made before).
    case v1::FAULT_KIND_ECN_MISCONFIG:
      return fault.acting_since_s >= 0 && now_s_ + dt - fault.acting_since_s >= poll_interval_s_ - 1e-9;
    // A slow link shows its speed only while it is up: one held down by
    // another fault (its NIC down) negotiated no speed at all (a generated
    // run, seed 63 run 83, drew a slow link on a NIC already down).
    case v1::FAULT_KIND_DEGRADED_LINK: {
      const int port = PortIndex(fault.spec.target());
      return port < 0 || ports_[port].up;
    }
    case v1::FAULT_KIND_ECMP_SKEW:
    case v1::FAULT_KIND_BUFFER_THRESHOLD:
    case v1::FAULT_KIND_LATENCY_REGRESSION:
      return !fault.touched_jobs.empty();
    // A straggler needs its job to run collectives, and to slow it by a
    // share the detectors are held to: another fault that made every
    // collective many times longer leaves a GPU's few milliseconds within
    // the kernels' own jitter. The floor is half of the 5% job slowdown
    // stragglers are specified down to (docs/diagnosis.md), so that no
    // generated severity, rounded, falls under it on a healthy job.
    case v1::FAULT_KIND_STRAGGLER: {
      constexpr double kStragglerFloor = 0.025;
      std::string_view host, gpu;
      SplitPortName(fault.spec.target(), &host, &gpu);
      const int h = host_index_.at(std::string(host));
      const int g = std::atoi(std::string(gpu.substr(3)).c_str());
      for (size_t j = 0; j < jobs_.size(); ++j) {
        const Job& job = jobs_[j];
        const auto it = std::find(job.hosts.begin(), job.hosts.end(), h);
        if (!job_status_[j].running || job_status_[j].stalled || it == job.hosts.end()) continue;
        // Its own delay: a rank less late than another still launches
        // ahead of the rest by all of it.
        const auto late = job.late_ranks.find(static_cast<int>(it - job.hosts.begin()) * job.gpus + g);
        if (late != job.late_ranks.end() && late->second >= kStragglerFloor * job.bare_iteration_s) return true;
      }
      return false;
    }
    default: return true;
  }
}

void FabricModel::RecordCollisions(double dt) {
  // A switch's links to the tier above (its uplinks, which its own hash
  // chooses among) and from the tier above (the links toward it, which the
  // hashes of the switches upstream choose among).
  std::vector<std::vector<int>> up(switches_.size()), down(switches_.size());
  for (size_t c = 0; c < channels_.size(); ++c) {
    const Channel& ch = channels_[c];
    const int from = ports_[ch.from].sw, to = ports_[ch.to].sw;
    if (from < 0 || to < 0 || !ch.up || ch.capacity_Bps <= 0) continue;
    if (switches_[to].role > switches_[from].role) up[from].push_back(static_cast<int>(c));
    if (switches_[from].role > switches_[to].role) down[to].push_back(static_cast<int>(c));
  }
  // How a group of links is offered traffic: it collides when a link is
  // over-offered by more than an even spread would offer it, and exceeds
  // when the group as a whole is over-offered, so that no spread would
  // carry it.
  struct Offer {
    bool collides = false, exceeds = false;
  };
  auto offer = [&](const std::vector<int>& group) {
    double offered = 0, capacity = 0, busiest = 0;
    for (int c : group) {
      const Channel& ch = channels_[c];
      offered += ch.load;
      capacity += ch.capacity_Bps;
      busiest = std::max(busiest, ch.load / ch.capacity_Bps);
    }
    if (capacity <= 0) return Offer{};
    return Offer{busiest > 1.05 && busiest > 1.05 * offered / capacity, offered > capacity};
  };
  auto record = [&](std::vector<std::pair<double, double>>& spans) {
    if (!spans.empty() && std::abs(spans.back().second - now_s_) < 1e-9) spans.back().second = now_s_ + dt;
    else spans.emplace_back(now_s_, now_s_ + dt);
  };
  // A switch's parallel links toward one switch below, which its own hash
  // chooses among: where they collide, the collision is the sender's.
  std::vector<bool> parallel_collides(switches_.size(), false);
  for (size_t sw = 0; sw < switches_.size(); ++sw) {
    std::map<int, std::vector<int>> by_sender;
    for (int c : down[sw]) by_sender[ports_[channels_[c].from].sw].push_back(c);
    for (const auto& [sender, links] : by_sender)
      if (links.size() >= 2 && offer(links).collides) parallel_collides[sender] = true;
  }
  for (size_t sw = 0; sw < switches_.size(); ++sw) {
    const Offer uplinks = offer(up[sw]), toward = offer(down[sw]);
    if (uplinks.collides || toward.collides || parallel_collides[sw]) record(collisions_[switches_[sw].name]);
    if (uplinks.exceeds || toward.exceeds) record(oversubscribed_[switches_[sw].name]);
  }
}

}  // namespace rocefab::lab
