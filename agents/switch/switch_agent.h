#pragma once
// One rocefab-switchd tick: read the backend's counters, build a delta batch
// (SCOPE_PORT entities "<switch>/<port>", SCOPE_QUEUE entities for queues and
// buffer pools) and hand it to the shipper. common/agent_loop.h calls it
// every interval.

#include <prometheus/gauge.h>

#include <nlohmann/json.hpp>

#include "agents/switch/switch_backend.h"
#include "common/agent_metrics.h"
#include "common/batch_builder.h"
#include "common/clock.h"
#include "common/telemetry_shipper.h"

namespace rocefab::switchd {

// Appends a reading to a batch and counts what was skipped in its health.
void AppendReading(const SwitchReading& reading, int64_t timestamp_us, BatchBuilder* builder,
                   v1::TelemetryBatch* batch);

// The fast path's batch (docs/diagnosis.md): the PFC pause counters of the
// ports where one moved since its last sample, as fast SCOPE_PORT entities
// read at `timestamp_us`, the agent's read before being at `previous_us`.
void AppendFastReading(const SwitchReading& reading, int64_t timestamp_us, int64_t previous_us,
                       BatchBuilder* builder, v1::TelemetryBatch* batch);

// The `--once -o json` shape:
//   {"switch": S, "ports": [{"port": "Ethernet0", "counters": {"rx_bytes": N,
//     "pfc_rx_pause_frames": {"3": N}, ...}, "queues": {"3": {"queue_drops": N}}}],
//    "buffer_pools": {...}, "health": {"unknown_keys": N, "bad_values": N}}
nlohmann::json ReadingToJson(const SwitchReading& reading);

class SwitchAgent final {
 public:
  // `source`: the backend's name in rocefab_agent_source_problems_total.
  SwitchAgent(SwitchBackend& backend, TelemetryShipper& shipper, const Clock& clock,
              std::string source = "backend");
  void PollOnce();
  // One fast-path poll: the pause counters of the ports where one moved,
  // sent only if there is one (docs/diagnosis.md, "the fast path").
  void PollFast();
  // Keeps `gauge` at the number of degraded sources of the last reading.
  void CountDegradedIn(prometheus::Gauge* gauge) { degraded_gauge_ = gauge; }
  // What the backend could not give since start, for /metrics.
  const SourceProblems& problems() const { return problems_; }
  // The versions the switch's batches report (TelemetryBatch.components),
  // with the backend's `os_version` as "os" when it has one.
  void SetComponents(std::map<std::string, std::string> components) {
    components_ = std::move(components);
    builder_.SetComponents(components_);
  }

 private:
  SwitchBackend& backend_;
  TelemetryShipper& shipper_;
  const Clock& clock_;
  BatchBuilder builder_;
  uint64_t consecutive_failures_ = 0;
  int64_t last_read_us_ = 0;  // the timestamp of the last reading, full or fast
  std::string source_;
  SourceProblems problems_;
  std::vector<std::string> degraded_;  // as last logged
  prometheus::Gauge* degraded_gauge_ = nullptr;
  std::map<std::string, std::string> components_;
  uint64_t polls_ = 0;
};

}  // namespace rocefab::switchd
