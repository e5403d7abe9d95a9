#include "collector/traffic_matrix.h"

#include <algorithm>

#include "common/strings.h"

namespace rocefab::collector {

void TrafficRates::Add(Series& series, int64_t ts_us, uint64_t delta) {
  auto& points = series.points;
  if (!points.empty() && ts_us <= points.back().ts_us) return;  // replayed or reordered
  const double cumulative = points.empty() ? 0 : points.back().cumulative + static_cast<double>(delta);
  // The newest point moves forward until a step has passed since the one
  // before it, so a series holds about keep/step points.
  if (points.size() >= 2 && ts_us - points[points.size() - 2].ts_us < step_us_)
    points.back() = {ts_us, cumulative};
  else
    points.push_back({ts_us, cumulative});
  size_t drop = 0;
  while (points.size() - drop > 2 && points[drop + 1].ts_us < ts_us - keep_us_) ++drop;
  if (drop > 0) points.erase(points.begin(), points.begin() + static_cast<std::ptrdiff_t>(drop));
}

void TrafficRates::Observe(const v1::TelemetryBatch& batch) {
  std::lock_guard lock(mu_);
  for (const auto& r : batch.collectives()) {
    if (r.job().empty()) continue;
    auto& buckets = job_bytes_[r.job()];
    buckets[r.timestamp_us() / step_us_][r.op() == "AllToAll" ? 1 : 0] += static_cast<double>(r.bytes());
    while (!buckets.empty() && buckets.begin()->first < (r.timestamp_us() - keep_us_) / step_us_)
      buckets.erase(buckets.begin());
  }
  for (const auto& e : batch.entities()) {
    if (e.scope() != v1::SCOPE_NIC && e.scope() != v1::SCOPE_PORT) continue;
    for (const auto& s : e.samples()) {
      if (e.scope() == v1::SCOPE_PORT && s.counter() == "link_up") {
        auto& latest = link_up_[e.entity()];
        if (e.timestamp_us() >= latest.first) latest = {e.timestamp_us(), s.value()};
        continue;
      }
      const bool wanted = e.scope() == v1::SCOPE_NIC ? s.counter() == "tx_bytes"
                                                     : s.counter() == "rx_bytes" || s.counter() == "tx_bytes";
      if (!wanted || s.has_prio() || s.has_queue()) continue;
      Add(series_[{e.entity(), s.counter()}][e.port()], e.timestamp_us(), s.has_delta() ? s.delta() : 0);
    }
  }
}

std::optional<double> TrafficRates::Rate(const std::string& entity, const std::string& counter, int64_t now_us,
                                         int64_t window_us) const {
  std::lock_guard lock(mu_);
  auto it = series_.find({entity, counter});
  if (it == series_.end()) return std::nullopt;
  std::optional<double> total;
  for (const auto& [port, series] : it->second) {
    const auto& points = series.points;
    if (points.size() < 2) continue;
    const Point& last = points.back();
    if (last.ts_us < now_us - window_us / 2) continue;
    // The base: the newest point a window or more before the last, else the
    // oldest one.
    const Point* base = &points.front();
    for (const Point& p : points) {
      if (p.ts_us > last.ts_us - window_us) break;
      base = &p;
    }
    if (last.ts_us <= base->ts_us) continue;
    total = total.value_or(0) + (last.cumulative - base->cumulative) * 1e6 / static_cast<double>(last.ts_us - base->ts_us);
  }
  return total;
}

std::optional<double> TrafficRates::AllToAllShare(const std::string& job, int64_t now_us, int64_t window_us) const {
  std::lock_guard lock(mu_);
  auto it = job_bytes_.find(job);
  if (it == job_bytes_.end()) return std::nullopt;
  double bytes[2] = {0, 0};
  for (auto b = it->second.lower_bound((now_us - window_us) / step_us_); b != it->second.end(); ++b) {
    bytes[0] += b->second[0];
    bytes[1] += b->second[1];
  }
  if (bytes[0] + bytes[1] <= 0) return std::nullopt;
  return bytes[1] / (bytes[0] + bytes[1]);
}

std::vector<std::string> TrafficRates::DownPorts(int64_t now_us, int64_t window_us) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> down;
  for (const auto& [port, latest] : link_up_)
    if (latest.second == 0 && latest.first >= now_us - window_us) down.push_back(port);
  return down;
}

v1::TrafficMatrixResponse BuildTrafficMatrix(const Topology& topology, const std::vector<v1::Job>& running_jobs,
                                             const TrafficRates& rates, int64_t now_us, int64_t window_us) {
  v1::TrafficMatrixResponse response;
  response.set_now_us(now_us);
  response.set_window_seconds(static_cast<uint32_t>(window_us / 1'000'000));
  struct Nic {
    std::string ingress;  // the RTSW port it sends into
    std::string rack;     // its rack's prefix
  };
  std::map<std::string, Nic> nics;  // "host/mlx5_0"
  for (const auto& host : topology.proto().hosts())
    for (const auto& nic : host.nics()) {
      const std::string name = StrCat(host.name(), "/", nic.name());
      const int link = topology.LinkOfPort(name);
      if (link < 0) continue;
      nics[name] = {topology.PeerOf(link, name), RackPrefix(nic.ip())};
    }
  // Each NIC's job; each job's hosts in rank order, and its NICs per rack.
  struct JobNics {
    std::vector<std::string> hosts;                      // by lowest rank
    std::map<std::string, std::vector<std::string>> of;  // host -> its NICs in the job
    std::map<std::string, uint32_t> racks;               // rack -> NICs there
    uint32_t count = 0;
    bool ring = false;
  };
  std::map<std::string, size_t> job_of;
  std::vector<JobNics> jobs(running_jobs.size());
  for (size_t j = 0; j < running_jobs.size(); ++j) {
    std::vector<const v1::RankPlacement*> ranks;
    for (const auto& rank : running_jobs[j].ranks()) ranks.push_back(&rank);
    std::stable_sort(ranks.begin(), ranks.end(), [](auto* x, auto* y) { return x->rank() < y->rank(); });
    JobNics& jn = jobs[j];
    for (const v1::RankPlacement* rank : ranks) {
      const std::string name = StrCat(rank->host(), "/", rank->nic());
      auto nic = nics.find(name);
      if (nic == nics.end() || !job_of.emplace(name, j).second) continue;  // unknown, or a second rank on it
      if (!jn.of.count(rank->host())) jn.hosts.push_back(rank->host());
      jn.of[rank->host()].push_back(rank->nic());
      ++jn.racks[nic->second.rack];
      ++jn.count;
    }
    const auto share = rates.AllToAllShare(running_jobs[j].id(), now_us, window_us);
    jn.ring = share.has_value() && *share < 0.5;
    (*response.mutable_job_patterns())[running_jobs[j].id()] =
        !share ? "spread" : jn.ring ? "ring" : "all_to_all";
  }
  std::map<std::pair<std::string, std::string>, std::pair<std::string, double>> demands;  // (ingress, dst) -> (src, B/s)
  std::map<std::pair<std::string, std::string>, double> racks;
  uint32_t from_nic = 0, from_port = 0, unattributed = 0;
  double unattributed_bytes = 0;
  auto add = [&](const Nic& from, const std::string& to_rack, double bytes) {
    auto& d = demands[{from.ingress, to_rack}];
    d.first = from.rack;
    d.second += bytes;
    racks[{from.rack, to_rack}] += bytes;
  };
  // Measured send rates; a job's NICs then all send the job's mean.
  std::map<std::string, double> measured;
  std::vector<double> job_sum(jobs.size(), 0);
  std::vector<uint32_t> job_measured(jobs.size(), 0);
  for (const auto& [name, nic] : nics) {
    std::optional<double> rate = rates.Rate(name, "tx_bytes", now_us, window_us);
    if (rate) {
      ++from_nic;
    } else if ((rate = rates.Rate(nic.ingress, "rx_bytes", now_us, window_us))) {
      ++from_port;
    } else {
      continue;
    }
    measured[name] = *rate;
    if (auto job = job_of.find(name); job != job_of.end()) {
      job_sum[job->second] += *rate;
      ++job_measured[job->second];
    }
  }
  for (const auto& [name, nic] : nics) {
    auto job = job_of.find(name);
    if (job == job_of.end() || jobs[job->second].count < 2) {
      auto m = measured.find(name);
      if (m != measured.end() && m->second > 0) {
        ++unattributed;
        unattributed_bytes += m->second;
      }
      continue;
    }
    if (job_measured[job->second] == 0) continue;
    const double mean = job_sum[job->second] / job_measured[job->second];
    const std::optional<double> rate = mean;
    if (*rate <= 0) continue;
    const JobNics& jn = jobs[job->second];
    if (jn.ring && jn.hosts.size() >= 2) {
      // Rail to rail, to the next host in rank order.
      const std::string host = name.substr(0, name.find('/'));
      const std::string rail = name.substr(name.find('/') + 1);
      const size_t at = static_cast<size_t>(std::find(jn.hosts.begin(), jn.hosts.end(), host) - jn.hosts.begin());
      const std::string& next = jn.hosts[(at + 1) % jn.hosts.size()];
      const auto& next_nics = jn.of.at(next);
      const std::string& to = std::find(next_nics.begin(), next_nics.end(), rail) != next_nics.end() ? rail : next_nics[0];
      add(nic, nics.at(StrCat(next, "/", to)).rack, *rate);
      continue;
    }
    const double peers = jn.count - 1;
    for (const auto& [rack, count] : jn.racks) {
      const double share = (count - (rack == nic.rack ? 1 : 0)) / peers;
      if (share > 0) add(nic, rack, *rate * share);
    }
  }
  for (const auto& [key, value] : demands) {
    auto* d = response.add_demands();
    d->set_ingress(key.first);
    d->set_dst_prefix(key.second);
    d->set_src_prefix(value.first);
    d->set_bytes_per_s(value.second);
  }
  for (const auto& [key, bytes] : racks) {
    auto* r = response.add_racks();
    r->set_src_prefix(key.first);
    r->set_dst_prefix(key.second);
    r->set_bytes_per_s(bytes);
  }
  response.set_nics_from_nic_counters(from_nic);
  response.set_nics_from_port_counters(from_port);
  response.set_nics_unattributed(unattributed);
  response.set_unattributed_bytes_per_s(unattributed_bytes);
  for (auto& port : rates.DownPorts(now_us, window_us)) response.add_down_ports(std::move(port));
  if (from_nic + from_port == 0)
    response.add_notes("no NIC or RTSW port reported byte counters in the window");
  return response;
}

UplinkLoad RackUplinkLoad(const Topology& topology, const std::vector<std::string>& ports, const TrafficRates& rates,
                          int64_t now_us, int64_t window_us) {
  UplinkLoad out;
  double sum = 0;
  for (const std::string& port : ports) {
    const int link = topology.LinkOfPort(port);
    if (link < 0) continue;
    const v1::TopoSwitch* self = topology.FindSwitch(EntityDevice(port));
    const v1::TopoSwitch* peer = topology.FindSwitch(EntityDevice(topology.PeerOf(link, port)));
    if (self == nullptr || peer == nullptr || self->role() != v1::SWITCH_ROLE_RTSW ||
        peer->role() != v1::SWITCH_ROLE_CTSW)
      continue;
    const auto rate = rates.Rate(port, "tx_bytes", now_us, window_us);
    const double capacity = topology.proto().links(link).speed_gbps() * 1e9 / 8;
    if (!rate || capacity <= 0) continue;
    ++out.uplinks;
    const double u = *rate / capacity;
    if (u < 0.01) continue;
    ++out.loaded;
    sum += u;
    out.max_utilization = std::max(out.max_utilization, u);
  }
  out.mean_loaded_utilization = out.loaded ? sum / static_cast<double>(out.loaded) : 0;
  return out;
}

std::string ImbalanceHint(const v1::DiagnoseJobResponse& diagnosis, const UplinkLoad& load) {
  if (diagnosis.state() != "degraded") return "";
  for (const auto& f : diagnosis.findings())
    if (f.role() == "cause") return "";
  if (load.loaded < 4 || load.mean_loaded_utilization <= 0 ||
      load.max_utilization / load.mean_loaded_utilization < 1.5)
    return "";
  return StrCat("no fault found, and the job's rack uplinks are unevenly loaded: the busiest at ",
                static_cast<int>(100 * load.max_utilization + 0.5), "%, ",
                Fixed(load.max_utilization / load.mean_loaded_utilization, 2), "x the mean of the ", load.loaded,
                " that carry traffic. Its flows likely collide in the ECMP hash; compare schemes for its placement: "
                "rocefab-lab study --placement-from-registry --job ",
                diagnosis.job().id(), " --topology <topology.yaml> (docs/routing-study.md)");
}

}  // namespace rocefab::collector
