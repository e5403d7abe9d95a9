#include "agents/switch/switch_agent.h"

#include "common/counters.h"
#include "common/log.h"
#include "common/strings.h"

namespace rocefab::switchd {
namespace {
constexpr char kSwitchAgentLog[] = "switchd";
}

void AppendReading(const SwitchReading& reading, int64_t timestamp_us, BatchBuilder* builder,
                   v1::TelemetryBatch* batch) {
  const int64_t ts = reading.timestamp_us > 0 ? reading.timestamp_us : timestamp_us;
  for (const auto& [port_name, port] : reading.ports) {
    const std::string entity = StrCat(reading.name, "/", port_name);
    v1::EntitySamples* samples = builder->AddEntity(batch, v1::SCOPE_PORT, entity, 0, "", ts);
    for (const auto& [name, value] : port.counters)
      builder->AddValue(samples, *FindCounter(v1::SCOPE_PORT, name), std::nullopt, std::nullopt,
                        value);
    for (const auto& [name, by_prio] : port.per_prio)
      for (const auto& [prio, value] : by_prio)
        if (prio < 8)
          builder->AddValue(samples, *FindCounter(v1::SCOPE_PORT, name), prio, std::nullopt, value);
    for (const auto& [name, by_queue] : port.port_queue)
      for (const auto& [queue, value] : by_queue)
        builder->AddValue(samples, *FindCounter(v1::SCOPE_PORT, name), std::nullopt, queue, value);
    if (port.queues.empty()) continue;
    v1::EntitySamples* queues = builder->AddEntity(batch, v1::SCOPE_QUEUE, entity, 0, "", ts);
    for (const auto& [queue, counters] : port.queues)
      for (const auto& [name, value] : counters)
        builder->AddValue(queues, *FindCounter(v1::SCOPE_QUEUE, name), std::nullopt, queue, value);
  }
  for (const auto& [pool, counters] : reading.buffer_pools) {
    v1::EntitySamples* samples = builder->AddEntity(
        batch, v1::SCOPE_QUEUE, StrCat(reading.name, "/", pool), 0, "", ts);
    for (const auto& [name, value] : counters)
      builder->AddValue(samples, *FindCounter(v1::SCOPE_QUEUE, name), std::nullopt, std::nullopt,
                        value);
  }
  auto* health = batch->mutable_health();
  health->set_skipped_values(health->skipped_values() + reading.unknown_keys);
  health->set_parse_errors(health->parse_errors() + reading.bad_values);
  health->set_skipped_values(health->skipped_values() + reading.degraded.size());
}

void AppendFastReading(const SwitchReading& reading, int64_t timestamp_us, int64_t previous_us,
                       BatchBuilder* builder, v1::TelemetryBatch* batch) {
  for (const auto& [port_name, port] : reading.ports) {
    v1::EntitySamples* samples = builder->AddFastEntity(batch, v1::SCOPE_PORT, StrCat(reading.name, "/", port_name),
                                                        0, "", timestamp_us, previous_us);
    for (const auto& [name, value] : port.counters)
      if (IsFastPathCounter(name))
        builder->AddValue(samples, *FindCounter(v1::SCOPE_PORT, name), std::nullopt, std::nullopt, value);
    for (const auto& [name, by_prio] : port.per_prio)
      if (IsFastPathCounter(name))
        for (const auto& [prio, value] : by_prio)
          if (prio < 8) builder->AddValue(samples, *FindCounter(v1::SCOPE_PORT, name), prio, std::nullopt, value);
    DropIfUnmoved(batch);
  }
}

nlohmann::json ReadingToJson(const SwitchReading& reading) {
  nlohmann::json ports = nlohmann::json::array();
  for (const auto& [name, port] : reading.ports) {
    nlohmann::json counters = nlohmann::json::object();
    for (const auto& [counter, value] : port.counters) counters[counter] = value;
    for (const auto& group : {&port.per_prio, &port.port_queue})
      for (const auto& [counter, by_index] : *group) {
        nlohmann::json indexed = nlohmann::json::object();
        for (const auto& [index, value] : by_index) indexed[std::to_string(index)] = value;
        counters[counter] = std::move(indexed);
      }
    nlohmann::json queues = nlohmann::json::object();
    for (const auto& [queue, values] : port.queues) queues[std::to_string(queue)] = values;
    ports.push_back({{"port", name}, {"counters", std::move(counters)}, {"queues", std::move(queues)}});
  }
  return {{"switch", reading.name},
          {"ports", std::move(ports)},
          {"buffer_pools", reading.buffer_pools},
          {"health",
           {{"unknown_keys", reading.unknown_keys},
            {"bad_values", reading.bad_values},
            {"degraded", reading.degraded}}}};
}

SwitchAgent::SwitchAgent(SwitchBackend& backend, TelemetryShipper& shipper, const Clock& clock,
                         std::string source)
    : backend_(backend), shipper_(shipper), clock_(clock), source_(std::move(source)) {}

void SwitchAgent::PollOnce() {
  const int64_t now_us = clock_.NowUs();
  std::shared_ptr<v1::TelemetryBatch> batch = builder_.NewArenaBatch(now_us);
  auto reading = backend_.ReadCounters();
  if (!reading.ok()) {
    // Still send the batch: its health tells the collector the switch is
    // there but unreadable.
    batch->mutable_health()->set_source_errors(1);
    problems_.Add(source_, {0, 0, 1});
    if (consecutive_failures_++ % 60 == 0)
      LOG_WARN(kSwitchAgentLog, "cannot read counters: ", reading.status().message());
  } else {
    if (consecutive_failures_ > 0) LOG_INFO(kSwitchAgentLog, "counters readable again");
    consecutive_failures_ = 0;
    if (reading->degraded != degraded_) {
      for (const auto& what : reading->degraded) LOG_WARN(kSwitchAgentLog, "degraded: ", what);
      if (reading->degraded.empty() && !degraded_.empty()) LOG_INFO(kSwitchAgentLog, "no longer degraded");
      degraded_ = reading->degraded;
    }
    if (degraded_gauge_) degraded_gauge_->Set(static_cast<double>(reading->degraded.size()));
    if (!reading->os_version.empty() && reading->os_version != components_["os"]) {
      components_["os"] = reading->os_version;
      builder_.SetComponents(components_);
    }
    // Again every 60 polls, for a collector that restarted.
    builder_.AttachComponents(batch.get(), polls_++ % 60 == 0);
    AppendReading(*reading, now_us, &builder_, batch.get());
    problems_.Add(source_, {reading->unknown_keys + reading->degraded.size(), reading->bad_values, 0});
    last_read_us_ = reading->timestamp_us > 0 ? reading->timestamp_us : now_us;
  }
  shipper_.Enqueue(std::move(batch));
}

void SwitchAgent::PollFast() {
  const int64_t now_us = clock_.NowUs();
  auto reading = backend_.ReadPfcCounters();
  if (!reading.ok()) return;  // the full poll reports it
  const int64_t ts = reading->timestamp_us > 0 ? reading->timestamp_us : now_us;
  std::shared_ptr<v1::TelemetryBatch> batch = builder_.NewArenaBatch(now_us);
  AppendFastReading(*reading, ts, last_read_us_, &builder_, batch.get());
  last_read_us_ = ts;
  if (batch->entities_size() > 0) shipper_.Enqueue(std::move(batch));
}

}  // namespace rocefab::switchd
