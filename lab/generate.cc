#include "lab/generate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "google/protobuf/util/json_util.h"
#include "common/stats.h"
#include "common/strings.h"
#include "lab/fabric_model.h"
#include "lab/runner.h"

namespace rocefab::lab {
namespace {

class Draw {
 public:
  explicit Draw(uint64_t seed) : rng_(seed) {}
  double Uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  double LogUniform(double lo, double hi) { return std::exp(Uniform(std::log(lo), std::log(hi))); }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }  // inclusive
  bool Chance(double p) { return Uniform(0, 1) < p; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) { return v[static_cast<size_t>(Int(0, static_cast<int>(v.size()) - 1))]; }
  // An index by weight.
  size_t Weighted(const std::vector<double>& w) {
    return std::discrete_distribution<size_t>(w.begin(), w.end())(rng_);
  }

 private:
  std::mt19937_64 rng_;
};

std::string TierOfLink(const Topology& topo, int link) {
  const v1::TopoLink& l = topo.proto().links(link);
  int roles[2];
  int i = 0;
  for (const std::string* end : {&l.a(), &l.b()}) {
    const std::string device = EntityDevice(*end);
    const v1::TopoSwitch* sw = topo.FindSwitch(device);
    roles[i++] = sw == nullptr ? 0 : static_cast<int>(sw->role());
  }
  const int lo = std::min(roles[0], roles[1]), hi = std::max(roles[0], roles[1]);
  if (lo == 0) return "nic";
  if (lo == v1::SWITCH_ROLE_RTSW && hi == v1::SWITCH_ROLE_CTSW) return "rtsw-ctsw";
  if (lo == v1::SWITCH_ROLE_CTSW && hi == v1::SWITCH_ROLE_ATSW) return "ctsw-atsw";
  return "other";
}

// What the healthy fabric looks like once its jobs run: which links carry
// traffic and which switch egress queues mark.
struct Healthy {
  std::map<std::string, std::vector<int>> loaded_links;  // tier -> link indices
  std::vector<std::string> marking_ports;                 // switch egress ports that ECN-mark
  std::vector<std::string> job_nics, job_gpus;            // of running jobs
  std::vector<std::vector<std::string>> gpus_by_job;
  std::map<std::string, double> step_s_by_gpu;  // the healthy iteration time of the GPU's job
  std::map<std::string, double> compute_s_by_gpu;
  std::map<std::string, double> deepest_queue_by_switch;  // bytes, its deepest egress queue
  // Switches whose uplinks carry traffic with no collision when healthy,
  // with the sum of their uplinks' peak utilizations.
  std::map<std::string, double> uplink_load_by_switch;
  std::vector<double> busbw_by_job;  // at the survey's end
};

absl::StatusOr<Healthy> Survey(std::shared_ptr<const Topology> topology, v1::Scenario scenario) {
  scenario.clear_faults();
  auto model = FabricModel::Create(topology, scenario);
  if (!model.ok()) return model.status();
  FabricModel& m = **model;
  // Eight seconds of model time; the second half is what counts.
  const int steps = static_cast<int>(8 / scenario.tick_s());
  std::vector<double> util(m.channel_count(), 0), marked_before(m.ports().size(), 0);
  std::vector<uint64_t> completed_before(m.jobs().size(), 0);
  std::map<std::string, double> deepest_queue;
  for (int i = 0; i < steps; ++i) {
    if (i == steps / 2) {
      for (size_t p = 0; p < m.ports().size(); ++p) marked_before[p] = m.ports()[p].c.queue_ecn_marked;
      for (size_t j = 0; j < m.jobs().size(); ++j) completed_before[j] = m.jobs()[j].completed;
    }
    m.Step(scenario.tick_s(), nullptr);
    if (i >= steps / 2) {
      for (size_t c = 0; c < util.size(); ++c) util[c] = std::max(util[c], m.ChannelUtilization(static_cast<int>(c)));
      for (const PortState& port : m.ports())
        if (port.sw >= 0) {
          double& deepest = deepest_queue[port.device];
          deepest = std::max(deepest, port.c.queue_depth_bytes);
        }
    }
  }
  Healthy h;
  h.deepest_queue_by_switch = std::move(deepest_queue);
  for (const JobStatus& job : m.jobs()) h.busbw_by_job.push_back(job.busbw_gbs);
  const Topology& topo = *topology;
  for (int link = 0; link < topo.proto().links_size(); ++link) {
    const size_t a = 2 * static_cast<size_t>(link), b = a + 1;
    if (b < util.size() && std::max(util[a], util[b]) >= 0.05) h.loaded_links[TierOfLink(topo, link)].push_back(link);
  }
  {
    std::map<std::string, std::pair<int, double>> uplinks;  // switch -> (carrying, sum of peak util)
    for (const PortState& port : m.ports()) {
      if (port.sw < 0) continue;
      const std::string name = StrCat(port.device, "/", port.name);
      const v1::TopoSwitch* self = topo.FindSwitch(port.device);
      const v1::TopoSwitch* peer = topo.FindSwitch(EntityDevice(topo.PeerOf(port.link, name)));
      if (self == nullptr || peer == nullptr || peer->role() <= self->role()) continue;
      const int ch = m.ChannelOf(name);
      if (ch < 0 || util[static_cast<size_t>(ch)] < 0.01) continue;
      auto& [carrying, sum] = uplinks[port.device];
      ++carrying;
      sum += util[static_cast<size_t>(ch)];
    }
    for (const auto& [sw, load] : uplinks)
      if (load.first >= 2 && load.second > 1.2 && !m.collisions().count(sw)) h.uplink_load_by_switch[sw] = load.second;
  }
  for (size_t p = 0; p < m.ports().size(); ++p) {
    const PortState& port = m.ports()[p];
    if (port.sw >= 0 && port.c.queue_ecn_marked > marked_before[p])
      h.marking_ports.push_back(StrCat(port.device, "/", port.name));
  }
  for (size_t j = 0; j < m.jobs().size(); ++j) {
    std::vector<std::string> gpus;
    for (int host : m.job_hosts(static_cast<int>(j))) {
      const v1::TopoHost& th = topo.proto().hosts(host);
      for (const v1::TopoNic& nic : th.nics()) h.job_nics.push_back(StrCat(th.name(), "/", nic.name()));
      for (int g = 0; g < m.gpus_per_host(static_cast<int>(j)); ++g) gpus.push_back(StrCat(th.name(), "/gpu", g));
    }
    // Iterations of the second half: compute plus the collective.
    const uint64_t done = m.jobs()[j].completed - completed_before[j];
    const double measured_s = (steps - steps / 2) * scenario.tick_s();
    for (const std::string& gpu : gpus) {
      if (done > 0) h.step_s_by_gpu[gpu] = measured_s / static_cast<double>(done);
      h.compute_s_by_gpu[gpu] = scenario.jobs(static_cast<int>(j)).compute_ms() / 1e3;
    }
    h.job_gpus.insert(h.job_gpus.end(), gpus.begin(), gpus.end());
    h.gpus_by_job.push_back(std::move(gpus));
  }
  return h;
}

v1::TopologySpec DrawFabric(Draw& d, const GenerateOptions& o) {
  for (;;) {
    v1::GenerateSpec g;
    const bool two_zones = d.Chance(0.2);
    g.set_zones(two_zones ? 2 : 1);
    g.set_racks_per_zone(static_cast<uint32_t>(d.Pick<int>(two_zones ? std::vector<int>{2, 4} : std::vector<int>{2, 4, 8})));
    g.set_hosts_per_rack(static_cast<uint32_t>(d.Pick<int>({1, 2, 4})));
    g.set_nics_per_host(static_cast<uint32_t>(d.Pick<int>({2, 4, 8})));
    g.set_ctsw_per_zone(static_cast<uint32_t>(d.Pick<int>({2, 4})));
    if (two_zones) g.set_atsw(2);
    const uint32_t hosts = g.zones() * g.racks_per_zone() * g.hosts_per_rack();
    if (hosts < 4 || hosts > o.max_hosts || hosts * g.nics_per_host() > o.max_nics) continue;
    v1::TopologySpec spec;
    *spec.mutable_generate() = g;
    return spec;
  }
}

void DrawJobs(Draw& d, uint32_t hosts, uint64_t index, v1::Scenario* s) {
  const size_t count = 1 + d.Weighted({0.5, 0.3, 0.2});
  uint32_t free = hosts;
  static const std::vector<v1::Collective> kCollectives = {v1::COLLECTIVE_ALL_REDUCE, v1::COLLECTIVE_ALL_GATHER,
                                                           v1::COLLECTIVE_REDUCE_SCATTER, v1::COLLECTIVE_ALL_TO_ALL};
  for (size_t j = 0; j < count && free >= 2; ++j) {
    v1::JobSpec* job = s->add_jobs();
    job->set_id(StrCat(6000 + index * 10 + j));
    job->set_name(StrCat("gen-job-", j));
    // The first job gets at least half of what is free; later ones share the rest.
    const uint32_t lo = j == 0 ? std::max<uint32_t>(2, free / 2) : 2;
    const uint32_t n = static_cast<uint32_t>(d.Int(static_cast<int>(lo), static_cast<int>(std::min<uint32_t>(free, 16))));
    job->set_num_hosts(n);
    free -= n;
    job->set_placement(d.Chance(0.5) ? "packed" : "spread");
    job->set_collective(d.Pick(kCollectives));
    job->set_message_bytes(1ULL << d.Int(24, 30));
    job->set_compute_ms(std::round(d.Uniform(5, 40)));
  }
}

struct Taken {
  std::set<std::string> devices;  // a fault's device, so two faults never share one
  bool Free(const std::string& target) const { return !devices.count(EntityDevice(target)); }
};

// One fault of a kind that can show on this fabric, or none.
bool DrawFault(Draw& d, const Topology& topo, const Healthy& h, double duration_s, Taken* taken,
               v1::FaultSpec* f) {
  static const std::vector<v1::FaultKind> kKinds = {
      v1::FAULT_KIND_PFC_STORM,       v1::FAULT_KIND_LINK_FLAP,      v1::FAULT_KIND_LOSSY_LINK,
      v1::FAULT_KIND_DEGRADED_LINK,   v1::FAULT_KIND_ECN_MISCONFIG, v1::FAULT_KIND_STRAGGLER,
      v1::FAULT_KIND_NIC_DOWN,        v1::FAULT_KIND_BUFFER_THRESHOLD, v1::FAULT_KIND_ECMP_SKEW,
      v1::FAULT_KIND_PFC_MISCONFIG};
  for (int attempt = 0; attempt < 20; ++attempt) {
    f->Clear();
    f->set_kind(d.Pick(kKinds));
    std::vector<std::string> candidates;
    switch (f->kind()) {
      case v1::FAULT_KIND_PFC_STORM:
      case v1::FAULT_KIND_NIC_DOWN:
        candidates = h.job_nics;
        break;
      case v1::FAULT_KIND_STRAGGLER:
        candidates = h.job_gpus;
        break;
      case v1::FAULT_KIND_LINK_FLAP:
      case v1::FAULT_KIND_LOSSY_LINK:
      case v1::FAULT_KIND_DEGRADED_LINK: {
        // A tier first, then a loaded link of it, then either end.
        std::vector<std::string> tiers;
        for (const auto& [tier, links] : h.loaded_links) tiers.push_back(tier);
        if (tiers.empty()) break;
        const std::string& tier = d.Pick(tiers);
        for (int link : h.loaded_links.at(tier)) {
          const v1::TopoLink& l = topo.proto().links(link);
          candidates.push_back(d.Chance(0.5) ? l.a() : l.b());
        }
        break;
      }
      case v1::FAULT_KIND_BUFFER_THRESHOLD: {
        // A switch whose queues hold traffic: one that ECN-marks when healthy.
        std::set<std::string> switches;
        for (const std::string& p : h.marking_ports) switches.insert(EntityDevice(p));
        candidates.assign(switches.begin(), switches.end());
        break;
      }
      case v1::FAULT_KIND_ECMP_SKEW:
        // A switch whose uplinks carry more than one uplink's worth, evenly
        // spread when healthy: squeezed onto fewer members they collide.
        for (const auto& [sw, load] : h.uplink_load_by_switch) candidates.push_back(sw);
        break;
      case v1::FAULT_KIND_PFC_MISCONFIG: {
        // A switch port on a loaded link, or a switch with one, of any tier.
        std::set<std::string> ports, switches;
        for (const auto& [tier, links] : h.loaded_links)
          for (int link : links) {
            const v1::TopoLink& l = topo.proto().links(link);
            for (const std::string& end : {l.a(), l.b()})
              if (topo.FindSwitch(EntityDevice(end)) != nullptr) ports.insert(end), switches.insert(EntityDevice(end));
          }
        const std::set<std::string>& from = d.Chance(0.5) ? ports : switches;
        candidates.assign(from.begin(), from.end());
        break;
      }
      case v1::FAULT_KIND_ECN_MISCONFIG:
        if (d.Chance(0.5)) {
          candidates = h.marking_ports;
        } else {
          std::set<std::string> switches;
          for (const std::string& p : h.marking_ports) switches.insert(EntityDevice(p));
          candidates.assign(switches.begin(), switches.end());
        }
        break;
      default: break;
    }
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [&](const std::string& c) { return !taken->Free(c); }),
                     candidates.end());
    if (candidates.empty()) continue;
    f->set_target(d.Pick(candidates));
    taken->devices.insert(EntityDevice(f->target()));
    f->set_at_s(std::round(d.Uniform(15, 30)));
    if (d.Chance(0.5)) f->set_duration_s(std::round(d.Uniform(12, std::max(13.0, duration_s - f->at_s() - 5))));
    switch (f->kind()) {
      case v1::FAULT_KIND_PFC_STORM: f->set_pause_fraction(std::round(d.Uniform(0.3, 1.0) * 100) / 100); break;
      case v1::FAULT_KIND_LOSSY_LINK: f->set_drop_rate(d.LogUniform(1e-4, 1e-2)); break;
      case v1::FAULT_KIND_BUFFER_THRESHOLD: {
        // A limit below the depth the switch's busiest queue reaches when
        // healthy, so that it bites: from a tenth of it (below ECN's Kmin
        // nothing marks and the whole excess is lost) to most of it (DCQCN
        // still slows the senders and only part of the excess is lost).
        const auto deepest = h.deepest_queue_by_switch.find(f->target());
        const double depth = deepest != h.deepest_queue_by_switch.end() ? deepest->second : 150e3;
        f->set_queue_limit_bytes(std::max<uint64_t>(10'000, static_cast<uint64_t>(std::round(depth * d.Uniform(0.1, 0.8) / 1e3)) * 1000));
        break;
      }
      case v1::FAULT_KIND_ECMP_SKEW: {
        // Fewer members than the uplinks' healthy load needs, so that the
        // members left are over-offered: from one to just under that load.
        const double load = h.uplink_load_by_switch.at(f->target());
        const int most = std::max(1, static_cast<int>(std::ceil(load)) - 1);
        f->set_ecmp_members(static_cast<uint32_t>(std::min(most, 1 + static_cast<int>(d.Uniform(0, most)))));
        break;
      }
      case v1::FAULT_KIND_DEGRADED_LINK: f->set_speed_gbps(static_cast<uint32_t>(d.Pick<int>({25, 50, 100, 200}))); break;
      case v1::FAULT_KIND_LINK_FLAP:
        f->set_flap_down_s(std::round(d.Uniform(1, 3) * 10) / 10);
        f->set_flap_up_s(std::round(d.Uniform(2, 6) * 10) / 10);
        break;
      case v1::FAULT_KIND_STRAGGLER: {
        // The severity an operator sees: the job's slowdown, 5% to 30%
        // (docs/diagnosis.md: stragglers down to a 5% job slowdown). The
        // model delays the GPU's compute by `slowdown` of it each
        // iteration, so that share is the job's slowdown times its healthy
        // iteration over its compute time.
        const double job_slowdown = d.Uniform(0.05, 0.3);
        const auto step = h.step_s_by_gpu.find(f->target());
        const double compute_s = h.compute_s_by_gpu.count(f->target()) ? h.compute_s_by_gpu.at(f->target()) : 0;
        const double share = step != h.step_s_by_gpu.end() && compute_s > 0
                                 ? job_slowdown * step->second / compute_s
                                 : job_slowdown;
        f->set_slowdown(std::round(share * 100) / 100);
        break;
      }
      default: break;
    }
    return true;
  }
  return false;
}

// A noisy neighbour: a new job on free hosts of the racks a running job
// uses, so that its traffic shares that job's uplinks, that runs while the
// fault lasts. Kept only when the model shows it slows the victim by 10% or
// more (what an operator would call a slower job); the job is added to `s`.
bool DrawContention(Draw& d, std::shared_ptr<const Topology> topology, const Healthy& h, uint64_t index,
                    v1::Scenario* s, v1::FaultSpec* f) {
  const v1::Topology& topo = topology->proto();
  std::set<std::string> used;
  std::vector<std::set<std::pair<std::string, uint32_t>>> job_racks(h.gpus_by_job.size());
  for (size_t j = 0; j < h.gpus_by_job.size(); ++j)
    for (const std::string& gpu : h.gpus_by_job[j]) {
      const std::string host = EntityDevice(gpu);
      used.insert(host);
      if (const v1::TopoHost* th = topology->FindHost(host)) job_racks[j].insert({th->zone(), th->rack()});
    }
  std::vector<size_t> victims;
  for (size_t j = 0; j < job_racks.size(); ++j)
    if (job_racks[j].size() >= 2) victims.push_back(j);  // a job whose traffic leaves its racks
  if (victims.empty()) return false;
  const size_t victim = d.Pick(victims);
  // Free hosts, those in the victim's racks first.
  std::vector<const v1::TopoHost*> near, far;
  for (const v1::TopoHost& host : topo.hosts()) {
    if (used.count(host.name())) continue;
    (job_racks[victim].count({host.zone(), host.rack()}) ? near : far).push_back(&host);
  }
  if (near.empty() || near.size() + far.size() < 2) return false;
  std::vector<const v1::TopoHost*> hosts = near;
  hosts.insert(hosts.end(), far.begin(), far.end());
  hosts.resize(std::min<size_t>(hosts.size(), static_cast<size_t>(d.Int(2, 16))));
  std::set<std::pair<std::string, uint32_t>> racks;
  for (const v1::TopoHost* host : hosts) racks.insert({host->zone(), host->rack()});
  if (racks.size() < 2) return false;  // its traffic would stay under one rack switch
  v1::JobSpec noisy;
  noisy.set_id(StrCat(6000 + index * 10 + 9));
  noisy.set_name("gen-neighbour");
  for (const v1::TopoHost* host : hosts) noisy.add_hosts(host->name());
  // Communication-bound: large messages, little compute between them.
  noisy.set_collective(d.Chance(0.7) ? v1::COLLECTIVE_ALL_TO_ALL : v1::COLLECTIVE_ALL_REDUCE);
  noisy.set_message_bytes(1ULL << d.Int(28, 30));
  noisy.set_qps_per_connection(static_cast<uint32_t>(d.Pick<int>({2, 4, 8, 16})));
  noisy.set_compute_ms(std::round(d.Uniform(1, 5)));
  // The model's word on whether it slows the victim: eight seconds of both
  // against the healthy survey's iteration time.
  v1::Scenario trial = *s;
  trial.clear_faults();
  *trial.add_jobs() = noisy;
  auto model = FabricModel::Create(topology, trial);
  if (!model.ok()) return false;
  FabricModel& m = **model;
  const int steps = static_cast<int>(8 / trial.tick_s());
  uint64_t before = 0;
  for (int i = 0; i < steps; ++i) {
    if (i == steps / 2) before = m.jobs()[victim].completed;
    m.Step(trial.tick_s(), nullptr);
  }
  const uint64_t done = m.jobs()[victim].completed - before;
  const auto healthy_step = h.step_s_by_gpu.find(h.gpus_by_job[victim].front());
  if (healthy_step == h.step_s_by_gpu.end()) return false;
  const double step_s = done > 0 ? (steps - steps / 2) * trial.tick_s() / static_cast<double>(done) : 1e9;
  if (1 - healthy_step->second / step_s < 0.1) return false;
  *s->add_jobs() = noisy;
  f->Clear();
  f->set_kind(v1::FAULT_KIND_JOB_CONTENTION);
  f->set_target(noisy.id());
  f->set_victim(s->jobs(static_cast<int>(victim)).id());
  return true;
}

// A switch image that adds latency (latency_regression): on a switch that
// carries the jobs' traffic, kept only when the model shows a job's busbw
// at least 10% lower with it.
bool DrawLatency(Draw& d, std::shared_ptr<const Topology> topology, const Healthy& h, const v1::Scenario& s,
                 v1::FaultSpec* f) {
  std::set<std::string> switches;
  for (const auto& [tier, links] : h.loaded_links)
    for (int link : links)
      for (const std::string* end : {&topology->proto().links(link).a(), &topology->proto().links(link).b()})
        if (topology->FindSwitch(EntityDevice(*end)) != nullptr) switches.insert(EntityDevice(*end));
  if (switches.empty()) return false;
  f->Clear();
  f->set_kind(v1::FAULT_KIND_LATENCY_REGRESSION);
  f->set_target(d.Pick(std::vector<std::string>(switches.begin(), switches.end())));
  f->set_added_latency_us(std::round(d.LogUniform(10, 200)));
  f->set_os_version(StrCat("lab-2.", d.Int(1, 9)));
  v1::Scenario trial = s;
  trial.clear_faults();
  *trial.add_faults() = *f;
  auto model = FabricModel::Create(topology, trial);
  if (!model.ok()) return false;
  for (int i = 0; i < static_cast<int>(4 / trial.tick_s()); ++i) (*model)->Step(trial.tick_s(), nullptr);
  for (size_t j = 0; j < h.busbw_by_job.size() && j < (*model)->jobs().size(); ++j)
    if (h.busbw_by_job[j] > 0 && (*model)->jobs()[j].busbw_gbs <= 0.9 * h.busbw_by_job[j]) return true;
  return false;
}

}  // namespace

std::string TargetTier(const Topology& topology, const std::string& target) {
  if (target.find("/gpu") != std::string::npos) return "gpu";
  if (target.find('/') == std::string::npos) {
    const v1::TopoSwitch* sw = topology.FindSwitch(target);
    if (sw == nullptr) return "other";
    switch (sw->role()) {
      case v1::SWITCH_ROLE_RTSW: return "rtsw";
      case v1::SWITCH_ROLE_CTSW: return "ctsw";
      case v1::SWITCH_ROLE_ATSW: return "atsw";
      default: return "other";
    }
  }
  const int link = topology.LinkOfPort(target);
  return link < 0 ? "other" : TierOfLink(topology, link);
}

absl::StatusOr<v1::Scenario> GenerateScenario(const GenerateOptions& options, int index) {
  Draw d(SplitMix64(options.seed * 0x100000001b3ULL + static_cast<uint64_t>(index)));
  v1::Scenario s;
  s.set_name(StrCat("gen-", options.seed, "-", index));
  s.set_duration_s(options.duration_s);
  s.set_tick_s(0.5);
  s.set_seed(SplitMix64(options.seed + 7919ULL * static_cast<uint64_t>(index)) % 1000000);
  s.set_poll_interval_s(d.Pick<double>({0.5, 1, 2}));
  *s.mutable_topology() = DrawFabric(d, options);
  auto topology = TopologyForScenario(s, "");
  if (!topology.ok()) return topology.status();
  const uint32_t hosts = static_cast<uint32_t>((*topology)->proto().hosts_size());
  // One scenario in ten has a noisy neighbour as its first fault: its jobs
  // leave half the hosts free for it. Those draws come from their own
  // stream, so that the other scenarios are what the other kinds alone give.
  Draw contention(SplitMix64(options.seed * 0x100000001b3ULL + static_cast<uint64_t>(index) + 0x6e6f697379ULL));
  const bool want_contention = contention.Chance(0.1);
  // As often, a switch image that adds latency (from the same stream).
  const bool want_latency = !want_contention && contention.Chance(0.11);
  DrawJobs(d, want_contention ? std::max<uint32_t>(2, hosts / 2) : hosts, static_cast<uint64_t>(index), &s);
  // Its victim spread over racks, so that their other hosts are free.
  if (want_contention && s.jobs_size() > 0) s.mutable_jobs(0)->set_placement("spread");
  auto healthy = Survey(*topology, s);
  if (!healthy.ok()) return healthy.status();

  const size_t faults = d.Chance(options.clean_share) ? 0 : 1 + d.Weighted({0.65, 0.25, 0.10});
  Taken taken;
  for (size_t i = 0; i < faults; ++i) {
    v1::FaultSpec f;
    bool drawn = false;
    for (int attempt = 0; i == 0 && want_contention && attempt < 8 && !drawn; ++attempt)
      drawn = DrawContention(contention, *topology, *healthy, static_cast<uint64_t>(index), &s, &f);
    for (int attempt = 0; i == 0 && want_latency && attempt < 8 && !drawn; ++attempt)
      if ((drawn = DrawLatency(contention, *topology, *healthy, s, &f))) taken.devices.insert(f.target());
    if (drawn && f.kind() == v1::FAULT_KIND_LATENCY_REGRESSION) {
      // An image stays until the next upgrade: to the end of the run, early
      // enough that the slowdown lasts past the detector's settling time.
      f.set_at_s(std::round(contention.Uniform(15, 25)));
    } else if (drawn) {
      f.set_at_s(std::round(contention.Uniform(15, 30)));
      if (contention.Chance(0.5))
        f.set_duration_s(std::round(contention.Uniform(12, std::max(13.0, options.duration_s - f.at_s() - 5))));
    } else if (!DrawFault(d, **topology, *healthy, options.duration_s, &taken, &f)) {
      break;
    }
    // Later faults overlap the first one.
    if (i > 0) {
      const v1::FaultSpec& first = s.faults(0);
      const double end = first.duration_s() > 0 ? first.at_s() + first.duration_s() : options.duration_s - 10;
      f.set_at_s(std::round(d.Uniform(first.at_s(), std::max(first.at_s() + 1, end - 5))));
      if (f.duration_s() > 0 && f.at_s() + f.duration_s() > options.duration_s - 3) f.set_duration_s(0);
    }
    *s.add_faults() = f;
  }
  // The NICs' PFC stall prevention, and how stuck a storming NIC is, from
  // a stream of their own (the other draws stay what they were): the
  // timeout mlx5's `auto` sets (100 ms), the longest it accepts (8 s), or
  // any in between; and three storms in ten a receive stuck for good
  // (pausing without a break), the storm stall prevention exists for.
  Draw nic(SplitMix64(options.seed * 0x100000001b3ULL + static_cast<uint64_t>(index) + 0x7374616c6cULL));
  switch (nic.Weighted({0.3, 0.3, 0.4})) {
    case 0: s.set_nic_stall_timeout_ms(100); break;
    case 1: s.set_nic_stall_timeout_ms(8000); break;
    default: s.set_nic_stall_timeout_ms(static_cast<uint32_t>(nic.Int(8, 800)) * 10); break;
  }
  for (v1::FaultSpec& f : *s.mutable_faults())
    if (f.kind() == v1::FAULT_KIND_PFC_STORM && nic.Chance(0.3)) f.set_pause_fraction(1.0);
  std::string text;
  for (const auto& f : s.faults()) StrAppend(&text, v1::FaultKind_Name(f.kind()), " ", f.target(), "; ");
  s.set_description(faults == 0 ? "generated: no fault" : StrCat("generated: ", text));
  return s;
}

absl::StatusOr<std::vector<std::string>> WriteGeneratedScenarios(const GenerateOptions& options,
                                                                 const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(StrCat("cannot create ", dir, ": ", ec.message()));
  std::vector<std::string> paths;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  print.preserve_proto_field_names = true;
  for (int i = 0; i < options.count; ++i) {
    auto s = GenerateScenario(options, i);
    if (!s.ok()) return absl::Status(s.status().code(), StrCat("scenario ", i, ": ", s.status().message()));
    std::string json;
    if (auto st = google::protobuf::util::MessageToJsonString(*s, &json, print); !st.ok())
      return absl::InternalError(StrCat("scenario ", i, ": ", st.ToString()));
    const std::string path = StrCat(dir, "/", s->name(), ".yaml");
    std::ofstream out(path);
    // JSON is YAML: the scenario loader reads it as any scenario file.
    out << "# " << s->description() << "\n# rocefab-lab generate --seed " << options.seed << " (scenario "
        << i << ")\n"
        << json;
    if (!out) return absl::InternalError(StrCat("cannot write ", path));
    paths.push_back(path);
  }
  return paths;
}

}  // namespace rocefab::lab
