#pragma once
// The latest value of every counter series, kept in memory for /metrics with
// bounded cardinality (docs/metrics.md):
//  - fabric summaries per zone and tier (rocefab_fabric_*), always;
//  - per-port series (rocefab_nic_*, rocefab_port_*, rocefab_queue_*) only
//    for the top-K entities by trouble in their latest interval and for the
//    entities anomalies name (`all_entities` exports every one, for small
//    fabrics).
// Written by the Observer after each commit, read by Prometheus scrapes.
// The fabric summaries and each entity's trouble score are kept up to date
// as batches arrive, so a scrape costs the series it exports, not the series
// the fabric has. Thread-safe.

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
  struct Latest {
    uint64_t value = 0;
    uint64_t delta = 0;
    int64_t timestamp_us = 0;
  };
  // (port, counter, prio, queue) within one entity; -1 for absent labels.
  using SeriesKey = std::tuple<uint32_t, std::string, int64_t, int64_t>;
  // What one stored series adds to the fabric summaries and to its entity's
  // trouble score, worked out once when the series first appears.
  struct Contributor {
    const Latest* latest;
    std::vector<int> groups;  // summary groups it adds into
    double trouble_weight = 0;
    bool link_state = false;  // a link_up gauge of a NIC or port
  };
  // The series of an entity's last reading, in order, with their slots.
  struct SampleShape {
    std::string counter;
    int64_t prio, queue;
    Latest* slot;  // null: not exported
  };
  // One entity (a NIC, port or queue set) and what it adds to the fabric
  // summaries. The summaries are kept up to date on every Update, so a scrape
  // never walks the series of the whole fabric.
  struct Entity {
    int scope = 0;
    std::string name;
    size_t place = 0;  // index into places_
    uint32_t port = 0;
    std::vector<SampleShape> samples;
    std::map<SeriesKey, Latest> series;  // std::map nodes stay put
    std::vector<Contributor> contributors;
    std::vector<uint64_t> sums;      // per summary group, raw units
    std::vector<uint32_t> carriers;  // per summary group: series feeding it
    uint32_t link_ports = 0, links_down = 0;
    double trouble = 0;  // in the latest interval
    size_t index = 0;    // in troubles_[scope] and by_scope_[scope]
  };
  static bool SameShape(const v1::EntitySamples& entity, const Entity& shape);
  // Zone and tier of an entity ("nic", "rtsw", "ctsw", "atsw", or "switch"
  // without a topology), as an index into places_.
  size_t PlaceOf(int scope, const std::string& entity);
  void Reshape(Entity& e, const v1::EntitySamples& entity);
  // Recomputes an entity's contributions and moves the fabric sums by the
  // difference.
  void Account(Entity& e);

  ExportOptions options_;
  std::shared_ptr<const Topology> topology_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Entity>> entities_;  // by scope + entity
  std::string entity_key_;
  size_t series_ = 0;
  std::vector<std::pair<std::string, std::string>> places_;  // zone, tier
  std::map<std::pair<std::string, std::string>, size_t> place_index_;
  // Fabric sums, per place and summary group (modular arithmetic: an entity
  // moves them by its difference, so they stay exact).
  std::vector<std::vector<uint64_t>> sums_;
  std::vector<std::vector<uint32_t>> carriers_;  // series feeding each sum
  std::vector<uint32_t> link_ports_, links_down_;  // per place
  // Per scope, each entity's trouble in one contiguous array, so ranking the
  // top-K reads a few MB rather than every entity's node.
  std::vector<std::vector<double>> troubles_;
  std::vector<std::vector<const Entity*>> by_scope_;
  std::unordered_map<std::string, std::vector<const Entity*>> by_device_;
  std::set<std::string> highlighted_;
  mutable std::map<std::pair<int, std::string>, int64_t> selected_us_;  // entity -> last qualified
};

}  // namespace rocefab::collector
