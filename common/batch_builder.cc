#include "common/batch_builder.h"

#include <algorithm>

#include "common/strings.h"
#include "google/protobuf/arena.h"

namespace rocefab {

void BatchBuilder::SetHostBootId(const std::string& boot_id) {
  host_boot_id_ = boot_id;
  deltas_.SetBootId(boot_id);
}

v1::TelemetryBatch BatchBuilder::NewBatch(int64_t created_us) {
  current_entity_ = nullptr;
  v1::TelemetryBatch batch;
  batch.set_created_us(created_us);
  batch.set_host_boot_id(host_boot_id_);
  return batch;
}

std::shared_ptr<v1::TelemetryBatch> BatchBuilder::NewArenaBatch(int64_t created_us) {
  current_entity_ = nullptr;
  // One block for the larger batches of late (a full poll's, between the
  // fast path's small ones): the space the last batch took, while the
  // shipper still holds it, raises the size at once and lowers it slowly.
  if (auto last = last_arena_batch_.lock()) {
    const size_t used = last->GetArena()->SpaceUsed() + 4096;
    arena_block_ = std::clamp<size_t>(std::max(used, arena_block_ - arena_block_ / 64), 8192, 4 << 20);
  }
  google::protobuf::ArenaOptions options;
  options.start_block_size = arena_block_;
  options.max_block_size = std::max<size_t>(arena_block_, 64 << 10);
  auto arena = std::make_shared<google::protobuf::Arena>(options);
  auto* batch = google::protobuf::Arena::CreateMessage<v1::TelemetryBatch>(arena.get());
  batch->set_created_us(created_us);
  batch->set_host_boot_id(host_boot_id_);
  // The arena lives as long as the batch does (the aliasing constructor).
  std::shared_ptr<v1::TelemetryBatch> owned(std::move(arena), batch);
  last_arena_batch_ = owned;
  return owned;
}

void BatchBuilder::AttachComponents(v1::TelemetryBatch* batch, bool again) {
  if (!again && attached_ == components_) return;
  batch->mutable_components()->insert(components_.begin(), components_.end());
  attached_ = components_;
}

v1::EntitySamples* BatchBuilder::AddEntity(v1::TelemetryBatch* batch, v1::Scope scope,
                                           const std::string& entity, uint32_t port,
                                           const std::string& netdev,
                                           int64_t timestamp_us) {
  v1::EntitySamples* samples = batch->add_entities();
  samples->set_scope(scope);
  samples->set_entity(entity);
  samples->set_port(port);
  samples->set_netdev(netdev);
  samples->set_timestamp_us(timestamp_us);
  current_ = &SeriesOf(*samples);
  current_entity_ = samples;
  return samples;
}

BatchBuilder::EntitySeries& BatchBuilder::SeriesOf(const v1::EntitySamples& entity) {
  std::string key;
  StrAppend(&key, static_cast<int>(entity.scope()), "|", entity.entity(), "|", entity.port());
  return series_[key];
}

v1::EntitySamples* BatchBuilder::AddFastEntity(v1::TelemetryBatch* batch, v1::Scope scope,
                                               const std::string& entity, uint32_t port, const std::string& netdev,
                                               int64_t timestamp_us, int64_t previous_us) {
  v1::EntitySamples* samples = AddEntity(batch, scope, entity, port, netdev, timestamp_us);
  samples->set_fast(true);
  samples->set_previous_us(previous_us);
  return samples;
}

void BatchBuilder::AddValue(v1::EntitySamples* entity, const CounterDef& def,
                            std::optional<uint32_t> prio, std::optional<uint32_t> queue,
                            uint64_t value) {
  v1::Sample* sample = entity->add_samples();
  sample->set_counter(def.name.data(), def.name.size());
  if (prio) sample->set_prio(*prio);
  if (queue) sample->set_queue(*queue);
  sample->set_kind(def.kind);
  sample->set_value(value);
  if (def.kind != v1::VALUE_KIND_COUNTER) return;
  if (entity != current_entity_) {
    current_ = &SeriesOf(*entity);
    current_entity_ = entity;
  }
  const SeriesKey key{&def, prio ? static_cast<int32_t>(*prio) : -1, queue ? static_cast<int32_t>(*queue) : -1};
  auto [it, inserted] = current_->try_emplace(key);
  if (inserted) ++series_count_;
  const DeltaResult result = deltas_.Update(&it->second, value, def.width);
  if (result.kind == DeltaKind::kFirst) return;
  sample->set_delta(result.delta);
  sample->set_reset(result.kind == DeltaKind::kReset);
}

void DropIfUnmoved(v1::TelemetryBatch* batch) {
  if (batch->entities_size() == 0) return;
  const v1::EntitySamples& last = batch->entities(batch->entities_size() - 1);
  for (const v1::Sample& sample : last.samples())
    if (sample.kind() == v1::VALUE_KIND_COUNTER && (!sample.has_delta() || sample.delta() != 0 || sample.reset()))
      return;
  batch->mutable_entities()->RemoveLast();
}

}  // namespace rocefab
