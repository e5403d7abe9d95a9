#include "common/batch_builder.h"

#include "common/strings.h"

namespace rocefab {

void BatchBuilder::SetHostBootId(const std::string& boot_id) {
  host_boot_id_ = boot_id;
  deltas_.SetBootId(boot_id);
}

v1::TelemetryBatch BatchBuilder::NewBatch(int64_t created_us) const {
  v1::TelemetryBatch batch;
  batch.set_created_us(created_us);
  batch.set_host_boot_id(host_boot_id_);
  return batch;
}

void BatchBuilder::AttachComponents(v1::TelemetryBatch* batch, bool again) {
  if (!again && attached_ == components_) return;
  batch->mutable_components()->insert(components_.begin(), components_.end());
  attached_ = components_;
}

v1::EntitySamples* BatchBuilder::AddEntity(v1::TelemetryBatch* batch, v1::Scope scope,
                                           const std::string& entity, uint32_t port,
                                           const std::string& netdev,
                                           int64_t timestamp_us) const {
  v1::EntitySamples* samples = batch->add_entities();
  samples->set_scope(scope);
  samples->set_entity(entity);
  samples->set_port(port);
  samples->set_netdev(netdev);
  samples->set_timestamp_us(timestamp_us);
  return samples;
}

v1::EntitySamples* BatchBuilder::AddFastEntity(v1::TelemetryBatch* batch, v1::Scope scope,
                                               const std::string& entity, uint32_t port, const std::string& netdev,
                                               int64_t timestamp_us, int64_t previous_us) const {
  v1::EntitySamples* samples = AddEntity(batch, scope, entity, port, netdev, timestamp_us);
  samples->set_fast(true);
  samples->set_previous_us(previous_us);
  return samples;
}

void BatchBuilder::AddValue(v1::EntitySamples* entity, const CounterDef& def,
                            std::optional<uint32_t> prio, std::optional<uint32_t> queue,
                            uint64_t value) {
  v1::Sample* sample = entity->add_samples();
  sample->set_counter(std::string(def.name));
  if (prio) sample->set_prio(*prio);
  if (queue) sample->set_queue(*queue);
  sample->set_kind(def.kind);
  sample->set_value(value);
  if (def.kind != v1::VALUE_KIND_COUNTER) return;
  key_.clear();
  StrAppend(&key_, static_cast<int>(entity->scope()), "|", entity->entity(), "|",
                  entity->port(), "|", def.name, "|", prio ? static_cast<int64_t>(*prio) : -1, "|",
                  queue ? static_cast<int64_t>(*queue) : -1);
  const DeltaResult result = deltas_.Update(key_, value, def.width);
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
