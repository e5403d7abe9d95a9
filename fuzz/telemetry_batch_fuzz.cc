// Fuzzes what the collector does with a TelemetryBatch from an agent before
// it is stored: validation (collector/telemetry_service.h), then the latest-
// value table behind /metrics (collector/latest_values.h). Any peer with a
// gRPC channel can send these bytes.

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "collector/detectors.h"
#include "collector/latest_values.h"
#include "collector/telemetry_service.h"
#include "common/counters.h"
#include "google/protobuf/stubs/common.h"
#if GOOGLE_PROTOBUF_VERSION < 4022000
#include "google/protobuf/stubs/logging.h"
#endif
#include "rocefab/v1/telemetry.pb.h"

namespace {

using rocefab::v1::TelemetryBatch;

// Invalid UTF-8 in string fields makes protobuf log an error for each input;
// silence it so the fuzzer's output stays readable.
[[maybe_unused]] const bool kQuietProtobuf = [] {
#if GOOGLE_PROTOBUF_VERSION < 4022000
  google::protobuf::SetLogHandler(nullptr);
#endif
  return true;
}();

// What ValidateBatch promises for a batch it accepts.
void CheckValid(const TelemetryBatch& batch) {
  if (batch.agent_id().empty() || batch.agent_boot_id().empty() || batch.seq() == 0)
    __builtin_trap();
  for (const auto& entity : batch.entities()) {
    if (entity.scope() == rocefab::v1::SCOPE_UNSPECIFIED ||
        !rocefab::v1::Scope_IsValid(entity.scope()) || entity.entity().empty())
      __builtin_trap();
    for (const auto& sample : entity.samples()) {
      if (sample.counter().empty()) __builtin_trap();
      if (sample.has_prio() && sample.prio() > 7) __builtin_trap();
    }
  }
}

// /metrics output: per-entity families named by the vocabulary (NIC series
// labelled host, device, port; switch series switch, port; then prio 0..7
// or a queue), and fabric summaries labelled zone, tier (and direction).
void CheckCollected(const std::vector<prometheus::MetricFamily>& families) {
  for (const prometheus::MetricFamily& family : families) {
    if (family.metric.empty()) __builtin_trap();
    const bool fabric = family.name.rfind("rocefab_fabric_", 0) == 0;
    bool nic = false, known = fabric;
    for (auto scope : {rocefab::v1::SCOPE_NIC, rocefab::v1::SCOPE_PORT, rocefab::v1::SCOPE_QUEUE})
      for (const rocefab::CounterDef& def : rocefab::CountersOfScope(scope))
        if (rocefab::MetricName(def) == family.name) {
          known = true;
          nic = nic || scope == rocefab::v1::SCOPE_NIC;
        }
    if (!known) __builtin_trap();
    for (const prometheus::ClientMetric& metric : family.metric) {
      const auto& labels = metric.label;
      if (fabric) {
        if (labels.size() < 2 || labels[0].name != "zone" || labels[1].name != "tier") __builtin_trap();
        continue;
      }
      if (labels.size() < 2 || labels.size() > 4) __builtin_trap();
      if (nic && (labels.size() < 3 || labels[0].name != "host" || labels[1].name != "device" ||
                  labels[2].name != "port"))
        __builtin_trap();
      if (!nic && (labels[0].name != "switch" || labels[1].name != "port")) __builtin_trap();
      const auto& last = labels.back();
      if (last.name == "prio" &&
          (last.value.size() != 1 || last.value[0] < '0' || last.value[0] > '7'))
        __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) return 0;
  TelemetryBatch batch;
  if (!batch.ParseFromArray(data, static_cast<int>(size))) return 0;

  const std::string error = rocefab::collector::ValidateBatch(batch);
  // The same batch, re-encoded, gets the same verdict.
  TelemetryBatch reparsed;
  if (!reparsed.ParseFromString(batch.SerializeAsString())) __builtin_trap();
  if (rocefab::collector::ValidateBatch(reparsed) != error) __builtin_trap();
  if (!error.empty()) return 0;
  CheckValid(batch);

  rocefab::collector::LatestValues latest(rocefab::collector::ExportOptions{20, true});
  latest.Update(batch);
  const size_t series = latest.size();
  CheckCollected(latest.Collect());
  // A batch delivered twice (an agent replays unacked batches) adds no series.
  latest.Update(batch);
  if (latest.size() != series) __builtin_trap();

  // The detectors take any valid batch, twice, and keep every anomaly
  // well-formed.
  rocefab::collector::Detectors detectors{rocefab::collector::DetectorSettings{}};
  int64_t newest = 0;
  for (const auto& e : batch.entities()) newest = std::max(newest, e.timestamp_us());
  for (const auto& r : batch.collectives()) newest = std::max(newest, r.timestamp_us());
  // The Push screen clips or drops readings dated ahead of the collector's
  // clock (PushScreen), so none past the year 2^62 us reaches the
  // detectors; evaluate only around plausible times.
  if (newest > (int64_t{1} << 62)) return 0;
  detectors.Observe(batch);
  detectors.Observe(batch);
  for (int64_t step : {0LL, 1'000'000LL, 10'000'000LL})
    for (const auto& a : detectors.Evaluate(newest + step, rocefab::collector::FabricContext{}))
      if (a.kind().empty() || a.entity().empty() || a.id() == 0) __builtin_trap();
  return 0;
}
