#include "collector/latest_values.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <unordered_map>

#include "common/counters.h"

namespace rocefab::collector {

void LatestValues::Update(const v1::TelemetryBatch& batch) {
  std::lock_guard lock(mu_);
  for (const auto& entity : batch.entities()) {
    for (const auto& sample : entity.samples()) {
      if (FindCounter(entity.scope(), sample.counter()) == nullptr) continue;
      Key key{entity.scope(), entity.entity(),
              entity.port(),  sample.counter(),
              sample.has_prio() ? static_cast<int64_t>(sample.prio()) : -1,
              sample.has_queue() ? static_cast<int64_t>(sample.queue()) : -1};
      Latest& latest = values_[key];
      if (entity.timestamp_us() >= latest.timestamp_us) {
        latest.value = sample.value();
        latest.timestamp_us = entity.timestamp_us();
      }
    }
  }
}

size_t LatestValues::size() const {
  std::lock_guard lock(mu_);
  return values_.size();
}

std::vector<prometheus::MetricFamily> LatestValues::Collect() const {
  // One family per vocabulary entry, in vocabulary order.
  std::vector<prometheus::MetricFamily> families;
  std::unordered_map<std::string, size_t> family_of;
  for (const CounterDef& def : CountersOfScope(v1::SCOPE_NIC)) {
    prometheus::MetricFamily family;
    family.name = MetricName(def);
    family.help = def.note.empty() ? std::string(def.name) : std::string(def.note);
    family.type = def.kind == v1::VALUE_KIND_COUNTER ? prometheus::MetricType::Counter
                                                     : prometheus::MetricType::Gauge;
    family_of[std::string(def.name)] = families.size();
    families.push_back(std::move(family));
  }
  std::lock_guard lock(mu_);
  for (const auto& [key, latest] : values_) {
    const auto& [scope, entity, port, counter, prio, queue] = key;
    if (scope != v1::SCOPE_NIC) continue;
    auto it = family_of.find(counter);
    if (it == family_of.end()) continue;
    const CounterDef& def = *FindCounter(v1::SCOPE_NIC, counter);
    prometheus::MetricFamily& family = families[it->second];
    prometheus::ClientMetric metric;
    const size_t slash = entity.find('/');
    metric.label.push_back({"host", entity.substr(0, slash)});
    metric.label.push_back(
        {"device", slash == std::string::npos ? std::string() : entity.substr(slash + 1)});
    metric.label.push_back({"port", std::to_string(port)});
    if (prio >= 0) metric.label.push_back({"prio", std::to_string(prio)});
    const double value = static_cast<double>(latest.value) * MetricScale(def);
    if (def.kind == v1::VALUE_KIND_COUNTER) metric.counter.value = value;
    else metric.gauge.value = value;
    family.metric.push_back(std::move(metric));
  }
  // Families without series are left out, as client libraries do.
  std::vector<prometheus::MetricFamily> out;
  for (auto& family : families)
    if (!family.metric.empty()) out.push_back(std::move(family));
  return out;
}

}  // namespace rocefab::collector
