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

// Summary groups: one per (family, direction). Several rows of kSummaries
// add into the same group.
struct Group {
  const char* name;
  const char* help;
  const char* direction;  // "" for none
  double scale;           // raw units to the family's unit
};
const std::vector<Group>& Groups() {
  static const std::vector<Group> groups = [] {
    std::vector<Group> out;
    for (const Summary& s : kSummaries) {
      const char* dir = s.direction ? s.direction : "";
      bool seen = false;
      for (const Group& g : out) seen |= std::string_view(g.name) == s.name && std::string_view(g.direction) == dir;
      if (seen) continue;
      const char* any = s.nic ? s.nic : s.port ? s.port : s.queue;
      out.push_back({s.name, s.help, dir, std::string_view(any).ends_with("_us") ? 1e-6 : 1.0});
    }
    return out;
  }();
  return groups;
}

// The summary groups a counter of a scope adds into.
std::vector<int> GroupsOf(int scope, const std::string& counter) {
  std::vector<int> out;
  const auto& groups = Groups();
  for (const Summary& s : kSummaries) {
    const char* mine = scope == v1::SCOPE_NIC ? s.nic : scope == v1::SCOPE_PORT ? s.port : s.queue;
    if (mine == nullptr || counter != mine) continue;
    const char* dir = s.direction ? s.direction : "";
    for (size_t g = 0; g < groups.size(); ++g)
      if (std::string_view(groups[g].name) == s.name && std::string_view(groups[g].direction) == dir)
        out.push_back(static_cast<int>(g));
  }
  return out;
}

}  // namespace

bool LatestValues::SameShape(const v1::EntitySamples& entity, const Entity& shape) {
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

size_t LatestValues::PlaceOf(int scope, const std::string& entity) {
  std::pair<std::string, std::string> place{"unknown", scope == v1::SCOPE_NIC ? "nic" : "switch"};
  const std::string device = EntityDevice(entity);
  if (topology_ != nullptr) {
    if (const v1::TopoHost* host = topology_->FindHost(device)) {
      place = {host->zone(), "nic"};
    } else if (const v1::TopoSwitch* sw = topology_->FindSwitch(device)) {
      static const char* kTier[] = {"switch", "rtsw", "ctsw", "atsw"};
      const int role = static_cast<int>(sw->role());
      place = {sw->zone().empty() ? "fabric" : sw->zone(), role >= 0 && role < 4 ? kTier[role] : "switch"};
    }
  }
  auto [it, added] = place_index_.try_emplace(place, places_.size());
  if (added) {
    places_.push_back(place);
    sums_.emplace_back(Groups().size(), 0);
    carriers_.emplace_back(Groups().size(), 0);
    link_ports_.push_back(0);
    links_down_.push_back(0);
  }
  return it->second;
}

void LatestValues::Reshape(Entity& e, const v1::EntitySamples& entity) {
  e.port = entity.port();
  e.samples.clear();
  for (const auto& sample : entity.samples()) {
    SampleShape s{sample.counter(), sample.has_prio() ? static_cast<int64_t>(sample.prio()) : -1,
                  sample.has_queue() ? static_cast<int64_t>(sample.queue()) : -1, nullptr};
    const CounterDef* def = FindCounter(entity.scope(), sample.counter());
    // Only the labels the vocabulary gives a counter: anything else would
    // make series that clash or that no dashboard expects.
    // (A pool's buffer counters carry no queue.)
    if (def != nullptr && sample.has_prio() == def->per_prio && (!sample.has_queue() || def->per_queue)) {
      auto [it, added] = e.series.try_emplace(SeriesKey{entity.port(), sample.counter(), s.prio, s.queue});
      s.slot = &it->second;
      series_ += added ? 1 : 0;
    }
    e.samples.push_back(std::move(s));
  }
  // Every stored series of the entity contributes, also those its latest
  // reading no longer carries: a summary counter must not go backwards.
  e.contributors.clear();
  std::vector<uint32_t> carriers(Groups().size(), 0);
  for (const auto& [key, latest] : e.series) {
    const std::string& counter = std::get<1>(key);
    Contributor c{&latest, GroupsOf(e.scope, counter), Trouble(counter, 1),
                  counter == "link_up" && e.scope != v1::SCOPE_QUEUE};
    for (int g : c.groups) ++carriers[static_cast<size_t>(g)];
    if (!c.groups.empty() || c.trouble_weight > 0 || c.link_state) e.contributors.push_back(std::move(c));
  }
  if (e.carriers.empty()) e.carriers.assign(carriers.size(), 0);
  for (size_t g = 0; g < carriers.size(); ++g) carriers_[e.place][g] += carriers[g] - e.carriers[g];
  e.carriers = std::move(carriers);
}

void LatestValues::Account(Entity& e) {
  std::vector<uint64_t> sums(Groups().size(), 0);
  uint32_t ports = 0, down = 0;
  double trouble = 0;
  for (const Contributor& c : e.contributors) {
    for (int g : c.groups) sums[static_cast<size_t>(g)] += c.latest->value;
    trouble += c.trouble_weight * static_cast<double>(c.latest->delta);
    if (c.link_state) {
      ++ports;
      down += c.latest->value == 0 ? 1 : 0;
    }
  }
  std::vector<uint64_t>& fabric = sums_[e.place];
  if (e.sums.empty()) e.sums.assign(sums.size(), 0);
  for (size_t g = 0; g < sums.size(); ++g) fabric[g] += sums[g] - e.sums[g];  // mod 2^64: exact
  link_ports_[e.place] += ports - e.link_ports;
  links_down_[e.place] += down - e.links_down;
  e.sums = std::move(sums);
  e.link_ports = ports;
  e.links_down = down;
  e.trouble = trouble;
  troubles_[static_cast<size_t>(std::max(0, e.scope))][e.index] = trouble;
}

void LatestValues::Update(const v1::TelemetryBatch& batch) {
  std::lock_guard lock(mu_);
  for (const auto& entity : batch.entities()) {
    entity_key_.assign(1, static_cast<char>('0' + entity.scope()));
    entity_key_ += entity.entity();
    std::unique_ptr<Entity>& slot = entities_[entity_key_];
    if (slot == nullptr) {
      slot = std::make_unique<Entity>();
      slot->scope = entity.scope();
      slot->name = entity.entity();
      slot->place = PlaceOf(entity.scope(), entity.entity());
      const size_t scope = static_cast<size_t>(std::max(0, static_cast<int>(entity.scope())));
      if (troubles_.size() <= scope) {
        troubles_.resize(scope + 1);
        by_scope_.resize(scope + 1);
      }
      slot->index = troubles_[scope].size();
      troubles_[scope].push_back(0);
      by_scope_[scope].push_back(slot.get());
      by_device_[EntityDevice(entity.entity())].push_back(slot.get());
    }
    Entity& e = *slot;
    // An agent reports the same series in the same order every poll: the
    // slots of the last poll are reused without a lookup per sample.
    bool changed = !SameShape(entity, e);
    if (changed) Reshape(e, entity);
    for (int i = 0; i < entity.samples_size(); ++i) {
      Latest* latest = e.samples[static_cast<size_t>(i)].slot;
      if (latest == nullptr || entity.timestamp_us() < latest->timestamp_us) continue;
      const v1::Sample& sample = entity.samples(i);
      latest->value = sample.value();
      latest->delta = sample.delta();
      latest->timestamp_us = entity.timestamp_us();
      changed = true;
    }
    if (changed || e.sums.empty()) Account(e);  // new, reshaped or newer
  }
}

void LatestValues::SetHighlighted(std::set<std::string> entities) {
  std::lock_guard lock(mu_);
  highlighted_ = std::move(entities);
}

size_t LatestValues::size() const {
  std::lock_guard lock(mu_);
  return series_;
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

  // Which entities get their own series: the highlighted ones, the top-K of
  // each scope by trouble in their latest interval, and those that
  // qualified within the hold time.
  std::vector<const Entity*> exported;
  if (options_.all_entities) {
    for (const auto& [key, e] : entities_) exported.push_back(e.get());
  } else {
    std::set<const Entity*> chosen;
    const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    for (const std::string& name : highlighted_) {
      // An entity by name in any scope, or every entity of a device.
      for (int scope = 0; scope < static_cast<int>(by_scope_.size()); ++scope) {
        std::string key(1, static_cast<char>('0' + scope));
        key += name;
        if (auto found = entities_.find(key); found != entities_.end()) chosen.insert(found->second.get());
      }
      if (auto found = by_device_.find(name); found != by_device_.end())
        chosen.insert(found->second.begin(), found->second.end());
    }
    for (int scope : {v1::SCOPE_NIC, v1::SCOPE_PORT, v1::SCOPE_QUEUE}) {
      if (static_cast<size_t>(scope) >= troubles_.size()) continue;
      const std::vector<double>& trouble = troubles_[static_cast<size_t>(scope)];
      std::vector<std::pair<double, size_t>> ranked;
      for (size_t i = 0; i < trouble.size(); ++i)
        if (trouble[i] > 0) ranked.push_back({trouble[i], i});
      const size_t k = std::min<size_t>(options_.top_k, ranked.size());
      std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(k), ranked.end(),
                        [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
      for (size_t i = 0; i < k; ++i) chosen.insert(by_scope_[static_cast<size_t>(scope)][ranked[i].second]);
    }
    for (const Entity* e : chosen) selected_us_[{e->scope, e->name}] = now;
    for (auto it = selected_us_.begin(); it != selected_us_.end();) {
      if (now - it->second > options_.hold_us) {
        it = selected_us_.erase(it);
        continue;
      }
      std::string key(1, static_cast<char>('0' + it->first.first));
      key += it->first.second;
      if (auto found = entities_.find(key); found != entities_.end()) chosen.insert(found->second.get());
      ++it;
    }
    exported.assign(chosen.begin(), chosen.end());
  }
  std::sort(exported.begin(), exported.end(), [](const Entity* a, const Entity* b) {
    return a->scope != b->scope ? a->scope < b->scope : a->name < b->name;
  });
  for (const Entity* e : exported) {
    for (const auto& [key, latest] : e->series) {
      const auto& [port, counter, prio, queue] = key;
      auto fam = family_of.find(std::string(1, static_cast<char>('0' + e->scope)) + counter);
      if (fam == family_of.end()) continue;
      const CounterDef& def = *FindCounter(static_cast<v1::Scope>(e->scope), counter);
      prometheus::MetricFamily& family = families[fam->second];
      prometheus::ClientMetric metric;
      for (auto& [name, value] : SeriesLabels(static_cast<v1::Scope>(e->scope), e->name, port, prio, queue))
        metric.label.push_back({std::move(name), std::move(value)});
      const double value = static_cast<double>(latest.value) * MetricScale(def);
      if (def.kind == v1::VALUE_KIND_COUNTER) metric.counter.value = value;
      else metric.gauge.value = value;
      family.metric.push_back(std::move(metric));
    }
  }

  std::vector<prometheus::MetricFamily> out;
  // Places in (zone, tier) order, as the families have always listed them.
  std::vector<size_t> order(places_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return places_[a] < places_[b]; });
  std::map<std::string, prometheus::MetricFamily> summary_families;
  const auto& groups = Groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    auto& f = summary_families[groups[g].name];
    f.name = groups[g].name;
    if (f.help.empty()) f.help = groups[g].help;
    f.type = prometheus::MetricType::Counter;
  }
  // Per family: by direction, then zone and tier.
  std::vector<size_t> group_order(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) group_order[g] = g;
  std::sort(group_order.begin(), group_order.end(), [&](size_t a, size_t b) {
    return std::string_view(groups[a].direction) < std::string_view(groups[b].direction);
  });
  for (size_t g : group_order) {
    for (size_t p : order) {
      // A place none of whose series feed a group has no series in it.
      if (carriers_[p][g] == 0) continue;
      prometheus::ClientMetric m;
      m.label.push_back({"zone", places_[p].first});
      m.label.push_back({"tier", places_[p].second});
      if (*groups[g].direction != '\0') m.label.push_back({"direction", groups[g].direction});
      m.counter.value = static_cast<double>(sums_[p][g]) * groups[g].scale;
      summary_families[groups[g].name].metric.push_back(std::move(m));
    }
  }
  for (auto& [name, f] : summary_families)
    if (!f.metric.empty()) out.push_back(std::move(f));
  for (const auto& [title, data, help] :
       {std::tuple{"rocefab_fabric_ports", &link_ports_, "Ports reporting link state, per zone and tier"},
        std::tuple{"rocefab_fabric_links_down", &links_down_, "Ports whose link is down, per zone and tier"}}) {
    prometheus::MetricFamily f;
    f.name = title;
    f.help = help;
    f.type = prometheus::MetricType::Gauge;
    for (size_t p : order) {
      if (link_ports_[p] == 0) continue;
      prometheus::ClientMetric m;
      m.label.push_back({"zone", places_[p].first});
      m.label.push_back({"tier", places_[p].second});
      m.gauge.value = (*data)[p];
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
