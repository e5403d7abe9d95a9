#include "collector/latest_values.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <algorithm>
#include <chrono>

#include "common/counters.h"
#include "common/topology.h"

namespace rocefab::collector {
namespace {

// How much trouble one interval of a series shows, for top-K: pause time,
// ECN marks, and errors (weighted: one lost frame costs a go-back-N).
double Trouble(const std::string& counter, uint64_t delta) {
  const double d = static_cast<double>(delta);
  if (counter.rfind("pfc_", 0) == 0 && counter.ends_with("_us")) return d;
  if (counter == "ecn_marked_packets" || counter == "queue_ecn_marked_packets" || counter == "cnp_sent") return d;
  if (counter == "rx_fcs_errors" || counter == "symbol_errors" || counter == "out_of_sequence" ||
      counter == "packet_seq_errors" || counter == "local_ack_timeouts" || counter == "queue_drops" ||
      counter == "link_flaps" || counter == "link_downed")
    return 1000 * d;
  return 0;
}

// Fabric summaries: family name, help, and which counters of each scope add
// into it.
struct Summary {
  const char* name;
  const char* help;
  const char* nic;    // counter of the nic scope, or null
  const char* port;   // of the port scope
  const char* queue;  // of the queue scope
  const char* direction = nullptr;
};
constexpr Summary kSummaries[] = {
    {"rocefab_fabric_pfc_pause_seconds_total", "Pause time on all priorities, summed per zone and tier",
     "pfc_rx_pause_us", "pfc_rx_pause_us", nullptr, "rx"},
    {"rocefab_fabric_pfc_pause_seconds_total", "Pause time on all priorities, summed per zone and tier",
     "pfc_tx_pause_us", "pfc_tx_pause_us", nullptr, "tx"},
    {"rocefab_fabric_ecn_marked_packets_total", "ECN-marked packets (NICs: received; switches: marked at egress)",
     "ecn_marked_packets", nullptr, "queue_ecn_marked_packets"},
    {"rocefab_fabric_cnp_sent_total", "CNPs sent by NICs", "cnp_sent", nullptr, nullptr},
    {"rocefab_fabric_loss_events_total",
     "NICs: out-of-sequence, sequence errors, ACK timeouts; switches: FCS errors", "out_of_sequence", "rx_fcs_errors",
     nullptr},
    {"rocefab_fabric_loss_events_total", "", "packet_seq_errors", nullptr, nullptr},
    {"rocefab_fabric_loss_events_total", "", "local_ack_timeouts", nullptr, nullptr},
    {"rocefab_fabric_link_flaps_total", "Carrier losses (NICs: link_downed; switches: link_flaps)", "link_downed",
     "link_flaps", nullptr},
    {"rocefab_fabric_queue_drops_total", "Switch queue drops, all queues", nullptr, nullptr, "queue_drops"},
    {"rocefab_fabric_rx_bytes_total", "Bytes received", "rx_bytes", "rx_bytes", nullptr},
};

}  // namespace

bool LatestValues::SameShape(const v1::EntitySamples& entity, const EntityShape& shape) {
  if (shape.port != entity.port() || shape.samples.size() != static_cast<size_t>(entity.samples_size()))
    return false;
  for (int i = 0; i < entity.samples_size(); ++i) {
    const v1::Sample& sample = entity.samples(i);
    const SampleShape& s = shape.samples[static_cast<size_t>(i)];
    if (s.counter != sample.counter() ||
        s.prio != (sample.has_prio() ? static_cast<int64_t>(sample.prio()) : -1) ||
        s.queue != (sample.has_queue() ? static_cast<int64_t>(sample.queue()) : -1))
      return false;
  }
  return true;
}

void LatestValues::Update(const v1::TelemetryBatch& batch) {
  std::lock_guard lock(mu_);
  for (const auto& entity : batch.entities()) {
    // An agent reports the same series in the same order every poll: the
    // slots of the last poll are reused without a lookup per sample.
    shape_key_.assign(1, static_cast<char>('0' + entity.scope()));
    shape_key_ += entity.entity();
    EntityShape& shape = shapes_[shape_key_];
    if (!SameShape(entity, shape)) {
      shape.port = entity.port();
      shape.samples.clear();
      for (const auto& sample : entity.samples()) {
        SampleShape s{sample.counter(), sample.has_prio() ? static_cast<int64_t>(sample.prio()) : -1,
                      sample.has_queue() ? static_cast<int64_t>(sample.queue()) : -1, nullptr};
        const CounterDef* def = FindCounter(entity.scope(), sample.counter());
        // Only the labels the vocabulary gives a counter: anything else would
        // make series that clash or that no dashboard expects.
        // (A pool's buffer counters carry no queue.)
        if (def != nullptr && sample.has_prio() == def->per_prio && (!sample.has_queue() || def->per_queue))
          s.slot = &values_[Key{entity.scope(), entity.entity(), entity.port(), sample.counter(), s.prio, s.queue}];
        shape.samples.push_back(std::move(s));
      }
    }
    for (int i = 0; i < entity.samples_size(); ++i) {
      Latest* latest = shape.samples[static_cast<size_t>(i)].slot;
      if (latest == nullptr || entity.timestamp_us() < latest->timestamp_us) continue;
      const v1::Sample& sample = entity.samples(i);
      latest->value = sample.value();
      latest->delta = sample.delta();
      latest->timestamp_us = entity.timestamp_us();
    }
  }
}

void LatestValues::SetHighlighted(std::set<std::string> entities) {
  std::lock_guard lock(mu_);
  highlighted_ = std::move(entities);
}

size_t LatestValues::size() const {
  std::lock_guard lock(mu_);
  return values_.size();
}

std::pair<std::string, std::string> LatestValues::Place(int scope, const std::string& entity) const {
  const std::string device = EntityDevice(entity);
  if (topology_ != nullptr) {
    if (const v1::TopoHost* host = topology_->FindHost(device)) return {host->zone(), "nic"};
    if (const v1::TopoSwitch* sw = topology_->FindSwitch(device)) {
      static const char* kTier[] = {"switch", "rtsw", "ctsw", "atsw"};
      const int role = static_cast<int>(sw->role());
      return {sw->zone().empty() ? "fabric" : sw->zone(), role >= 0 && role < 4 ? kTier[role] : "switch"};
    }
  }
  return {"unknown", scope == v1::SCOPE_NIC ? "nic" : "switch"};
}

std::vector<prometheus::MetricFamily> LatestValues::Collect() const {
  std::vector<prometheus::MetricFamily> families;
  std::unordered_map<std::string, size_t> family_of;  // scope char + counter
  for (v1::Scope scope : {v1::SCOPE_NIC, v1::SCOPE_PORT, v1::SCOPE_QUEUE}) {
    for (const CounterDef& def : CountersOfScope(scope)) {
      prometheus::MetricFamily family;
      family.name = MetricName(def);
      family.help = def.note.empty() ? std::string(def.name) : std::string(def.note);
      family.type = def.kind == v1::VALUE_KIND_COUNTER ? prometheus::MetricType::Counter
                                                       : prometheus::MetricType::Gauge;
      family_of[std::string(1, static_cast<char>('0' + scope)) + std::string(def.name)] = families.size();
      families.push_back(std::move(family));
    }
  }
  std::lock_guard lock(mu_);

  // values_ is ordered by (scope, entity, ...): each entity's series are
  // one contiguous run. Pass 1 scores each run and adds it to the fabric
  // summaries; pass 2 writes the series of the entities that are exported.
  struct Run {
    std::map<Key, Latest>::const_iterator begin, end;
    int scope;
    double trouble = 0;
  };
  std::vector<Run> runs;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, double> sums;  // name, dir, zone, tier
  std::map<std::pair<std::string, std::string>, double> ports, down;
  for (auto it = values_.begin(); it != values_.end();) {
    const int scope = std::get<0>(it->first);
    const std::string& entity = std::get<1>(it->first);
    Run run{it, it, scope};
    const auto [zone, tier] = Place(scope, entity);
    for (; it != values_.end() && std::get<0>(it->first) == scope && std::get<1>(it->first) == entity; ++it) {
      const std::string& counter = std::get<3>(it->first);
      const Latest& latest = it->second;
      run.trouble += Trouble(counter, latest.delta);
      if (counter == "link_up" && scope != v1::SCOPE_QUEUE) {
        ports[{zone, tier}] += 1;
        if (latest.value == 0) down[{zone, tier}] += 1;
      }
      for (const Summary& s : kSummaries) {
        const char* mine = scope == v1::SCOPE_NIC ? s.nic : scope == v1::SCOPE_PORT ? s.port : s.queue;
        if (mine == nullptr || counter != mine) continue;
        const double scale = counter.ends_with("_us") ? 1e-6 : 1.0;
        sums[{s.name, s.direction ? s.direction : "", zone, tier}] += static_cast<double>(latest.value) * scale;
      }
    }
    run.end = it;
    runs.push_back(run);
  }

  // Which entities get their own series: the highlighted ones, the top-K of
  // each scope by trouble in their latest interval, and those that
  // qualified within the hold time.
  std::vector<bool> exported(runs.size(), options_.all_entities);
  if (!options_.all_entities) {
    for (size_t r = 0; r < runs.size(); ++r) {
      const std::string& entity = std::get<1>(runs[r].begin->first);
      if (highlighted_.count(entity) || highlighted_.count(EntityDevice(entity))) exported[r] = true;
    }
    const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    for (int scope : {v1::SCOPE_NIC, v1::SCOPE_PORT, v1::SCOPE_QUEUE}) {
      std::vector<std::pair<double, size_t>> ranked;
      for (size_t r = 0; r < runs.size(); ++r)
        if (runs[r].scope == scope && runs[r].trouble > 0) ranked.push_back({runs[r].trouble, r});
      const size_t k = std::min<size_t>(options_.top_k, ranked.size());
      std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(k), ranked.end(),
                        [](const auto& a, const auto& b) { return a.first > b.first; });
      for (size_t i = 0; i < k; ++i) exported[ranked[i].second] = true;
    }
    for (size_t r = 0; r < runs.size(); ++r)
      if (exported[r]) selected_us_[{runs[r].scope, std::get<1>(runs[r].begin->first)}] = now;
    for (auto it = selected_us_.begin(); it != selected_us_.end();) {
      if (now - it->second > options_.hold_us) {
        it = selected_us_.erase(it);
        continue;
      }
      // Runs are in (scope, entity) order.
      auto run = std::lower_bound(runs.begin(), runs.end(), it->first, [](const Run& r, const auto& id) {
        return std::pair<int, const std::string&>(r.scope, std::get<1>(r.begin->first)) <
               std::pair<int, const std::string&>(id.first, id.second);
      });
      if (run != runs.end() && run->scope == it->first.first && std::get<1>(run->begin->first) == it->first.second)
        exported[static_cast<size_t>(run - runs.begin())] = true;
      ++it;
    }
  }
  for (size_t r = 0; r < runs.size(); ++r) {
    if (!exported[r]) continue;
    for (auto it = runs[r].begin; it != runs[r].end; ++it) {
      const auto& [scope, entity, port, counter, prio, queue] = it->first;
      auto fam = family_of.find(std::string(1, static_cast<char>('0' + scope)) + counter);
      if (fam == family_of.end()) continue;
      const CounterDef& def = *FindCounter(static_cast<v1::Scope>(scope), counter);
      prometheus::MetricFamily& family = families[fam->second];
      prometheus::ClientMetric metric;
      for (auto& [name, value] : SeriesLabels(static_cast<v1::Scope>(scope), entity, port, prio, queue))
        metric.label.push_back({std::move(name), std::move(value)});
      const double value = static_cast<double>(it->second.value) * MetricScale(def);
      if (def.kind == v1::VALUE_KIND_COUNTER) metric.counter.value = value;
      else metric.gauge.value = value;
      family.metric.push_back(std::move(metric));
    }
  }

  std::vector<prometheus::MetricFamily> out;
  std::map<std::string, prometheus::MetricFamily> summary_families;
  for (const Summary& s : kSummaries) {
    auto& f = summary_families[s.name];
    f.name = s.name;
    if (f.help.empty()) f.help = s.help;
    f.type = prometheus::MetricType::Counter;
  }
  for (const auto& [k, v] : sums) {
    const auto& [name, direction, zone, tier] = k;
    prometheus::ClientMetric m;
    m.label.push_back({"zone", zone});
    m.label.push_back({"tier", tier});
    if (!direction.empty()) m.label.push_back({"direction", direction});
    m.counter.value = v;
    summary_families[name].metric.push_back(std::move(m));
  }
  for (auto& [name, f] : summary_families)
    if (!f.metric.empty()) out.push_back(std::move(f));
  for (const auto& [title, data, help] :
       {std::tuple{"rocefab_fabric_ports", &ports, "Ports reporting link state, per zone and tier"},
        std::tuple{"rocefab_fabric_links_down", &down, "Ports whose link is down, per zone and tier"}}) {
    prometheus::MetricFamily f;
    f.name = title;
    f.help = help;
    f.type = prometheus::MetricType::Gauge;
    for (const auto& [zt, n] : ports) {
      prometheus::ClientMetric m;
      m.label.push_back({"zone", zt.first});
      m.label.push_back({"tier", zt.second});
      auto found = data->find(zt);
      m.gauge.value = found == data->end() ? 0 : found->second;
      f.metric.push_back(std::move(m));
    }
    if (!f.metric.empty()) out.push_back(std::move(f));
  }
  // Per-entity families without series are left out, as client libraries do.
  for (auto& family : families)
    if (!family.metric.empty()) out.push_back(std::move(family));
  return out;
}

}  // namespace rocefab::collector
