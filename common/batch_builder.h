#pragma once
// Builds TelemetryBatch messages from cumulative readings, attaching deltas
// that are safe against wraparound and resets (common/counter_delta.h).
// Shared by rocefab-hostd and rocefab-switchd. One per agent poll loop; not
// thread-safe.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/counter_delta.h"
#include "common/counters.h"
#include "rocefab/v1/telemetry.pb.h"

namespace rocefab {

class BatchBuilder final {
 public:
  BatchBuilder() = default;
  BatchBuilder(const BatchBuilder&) = delete;
  BatchBuilder& operator=(const BatchBuilder&) = delete;

  // The kernel boot id of the machine the counters come from; when it
  // changes every counter's next sample is a reset.
  void SetHostBootId(const std::string& boot_id);
  const std::string& host_boot_id() const { return host_boot_id_; }

  // Starts a batch for one poll. Agent id, boot id and seq are stamped by the
  // shipper.
  v1::TelemetryBatch NewBatch(int64_t created_us);
  // The same batch on a protobuf arena of its own, which the pointer owns:
  // its hundreds of samples are carved from one block, sized after the
  // batches before it, and freed at once when the shipper lets go of it.
  std::shared_ptr<v1::TelemetryBatch> NewArenaBatch(int64_t created_us);

  v1::EntitySamples* AddEntity(v1::TelemetryBatch* batch, v1::Scope scope,
                               const std::string& entity, uint32_t port,
                               const std::string& netdev, int64_t timestamp_us);

  // A fast-path entity (EntitySamples.fast): its counters read at
  // `timestamp_us`, the agent's read of them before at `previous_us`.
  v1::EntitySamples* AddFastEntity(v1::TelemetryBatch* batch, v1::Scope scope, const std::string& entity,
                                   uint32_t port, const std::string& netdev, int64_t timestamp_us,
                                   int64_t previous_us);

  // Appends one reading. Counters get a delta against the previous reading
  // of the same series (none on the first).
  void AddValue(v1::EntitySamples* entity, const CounterDef& def, std::optional<uint32_t> prio,
                std::optional<uint32_t> queue, uint64_t value);

  // The versions the agent sees (TelemetryBatch.components). AttachComponents
  // puts them on a full batch when they differ from those last attached, on
  // the first one, and with `again` (the agents do about once a minute, so a
  // collector that restarted learns them again).
  void SetComponents(std::map<std::string, std::string> components) { components_ = std::move(components); }
  void AttachComponents(v1::TelemetryBatch* batch, bool again = false);

  size_t series_count() const { return series_count_; }

 private:
  // A series within its entity: the counter (a vocabulary entry, so its
  // address names it), its priority and its queue (-1: none).
  struct SeriesKey {
    const CounterDef* def;
    int32_t prio;
    int32_t queue;
    bool operator==(const SeriesKey&) const = default;
  };
  struct SeriesKeyHash {
    size_t operator()(const SeriesKey& key) const {
      return std::hash<const void*>()(key.def) ^ (static_cast<size_t>(key.prio + 1) << 20) ^
             (static_cast<size_t>(key.queue + 1) << 8);
    }
  };
  using EntitySeries = std::unordered_map<SeriesKey, DeltaTracker::Series, SeriesKeyHash>;
  // The series of `entity`, found once per entity rather than once per value.
  EntitySeries& SeriesOf(const v1::EntitySamples& entity);

  DeltaTracker deltas_;
  // By "scope|entity|port". Nodes stay put, so `current_` stays valid.
  std::unordered_map<std::string, EntitySeries> series_;
  const v1::EntitySamples* current_entity_ = nullptr;
  EntitySeries* current_ = nullptr;
  size_t series_count_ = 0;
  size_t arena_block_ = 8192;  // an arena batch's first block
  std::weak_ptr<v1::TelemetryBatch> last_arena_batch_;
  std::map<std::string, std::string> components_;
  std::optional<std::map<std::string, std::string>> attached_;
  std::string host_boot_id_;
};

// The fast path sends an entity only when it changed: removes the batch's
// last entity if every counter in it has a zero delta (no first reading,
// no reset). Its values are already recorded as the series' last, which
// they equal, so the delta chain stays whole.
void DropIfUnmoved(v1::TelemetryBatch* batch);

}  // namespace rocefab
