#pragma once
// The latest value of every counter series, kept in memory for /metrics with
// bounded cardinality (docs/metrics.md):
//  - fabric summaries per zone and tier (rocefab_fabric_*), always;
//  - per-port series (rocefab_nic_*, rocefab_port_*, rocefab_queue_*) only
//    for the top-K entities by trouble in their latest interval and for the
//    entities anomalies name (`all_entities` exports every one, for small
//    fabrics).
// Written by the Ingester after each commit, read by Prometheus scrapes.
// Thread-safe.

#include <prometheus/collectable.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/topology.h"
#include "rocefab/v1/telemetry.pb.h"

namespace rocefab::collector {

struct ExportOptions {
  uint32_t top_k = 20;        // entities per scope with the most trouble
  bool all_entities = false;  // every entity (small fabrics, tests)
  // An entity once exported stays exported this long after it last
  // qualified, so its series do not come and go between scrapes.
  int64_t hold_us = 600'000'000;
};

class LatestValues final : public prometheus::Collectable {
 public:
  explicit LatestValues(ExportOptions options = {}, std::shared_ptr<const Topology> topology = nullptr)
      : options_(options), topology_(std::move(topology)) {}

  void Update(const v1::TelemetryBatch& batch);
  // Entities named by open anomalies: always exported.
  void SetHighlighted(std::set<std::string> entities);
  std::vector<prometheus::MetricFamily> Collect() const override;
  size_t size() const;

 private:
  // (scope, entity, port, counter, prio, queue); -1 for absent labels.
  using Key = std::tuple<int, std::string, uint32_t, std::string, int64_t, int64_t>;
  struct Latest {
    uint64_t value = 0;
    uint64_t delta = 0;
    int64_t timestamp_us = 0;
  };
  // Zone and tier of an entity ("nic", "rtsw", "ctsw", "atsw", or "switch"
  // without a topology).
  std::pair<std::string, std::string> Place(int scope, const std::string& entity) const;
  // The series of an entity's last reading, in order, with their slots
  // (std::map nodes stay put).
  struct SampleShape {
    std::string counter;
    int64_t prio, queue;
    Latest* slot;  // null: not exported
  };
  struct EntityShape {
    uint32_t port = 0;
    std::vector<SampleShape> samples;
  };
  static bool SameShape(const v1::EntitySamples& entity, const EntityShape& shape);

  ExportOptions options_;
  std::shared_ptr<const Topology> topology_;
  mutable std::mutex mu_;
  std::map<Key, Latest> values_;
  std::unordered_map<std::string, EntityShape> shapes_;  // by scope + entity
  std::string shape_key_;
  std::set<std::string> highlighted_;
  mutable std::map<std::pair<int, std::string>, int64_t> selected_us_;  // entity -> last qualified
};

}  // namespace rocefab::collector
