// Fuzzes a raw Telemetry.Push stream as the collector takes it, batch by
// batch (collector/telemetry_service.h PushScreen), without the transport:
// the input is a sequence of frames, each a 2-byte little-endian length and
// that many bytes of what an agent wrote on the stream. The first byte picks
// whether the stream carries a certificate identity. A frame that does not
// parse ends the stream, as gRPC does. Every batch the screen takes then goes
// to the latest-value table and the detectors.
#include <cstddef>
#include <cstdint>
#include <string>

#include "collector/detectors.h"
#include "collector/latest_values.h"
#include "collector/telemetry_service.h"
#include "google/protobuf/stubs/common.h"
#if GOOGLE_PROTOBUF_VERSION < 4022000
#include "google/protobuf/stubs/logging.h"
#endif
#include "rocefab/v1/telemetry.pb.h"

namespace {

[[maybe_unused]] const bool kQuietProtobuf = [] {
#if GOOGLE_PROTOBUF_VERSION < 4022000
  google::protobuf::SetLogHandler(nullptr);
#endif
  return true;
}();

constexpr int64_t kNowUs = 1'800'000'000'000'000;
constexpr int64_t kMaxFutureUs = 10'000'000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string identity = data[0] & 1 ? "z1-r01-h1" : "";
  rocefab::collector::PushScreen screen(identity, kMaxFutureUs);
  rocefab::collector::LatestValues latest(rocefab::collector::ExportOptions{20, true});
  rocefab::collector::Detectors detectors{rocefab::collector::DetectorSettings{}};
  std::string agent, boot;
  size_t at = 1;
  int64_t now = kNowUs;
  while (at + 2 <= size) {
    const size_t len = data[at] | (static_cast<size_t>(data[at + 1]) << 8);
    at += 2;
    if (len > size - at) break;
    rocefab::v1::TelemetryBatch batch;
    if (!batch.ParseFromArray(data + at, static_cast<int>(len))) break;
    at += len;
    now += 1'000'000;
    const auto taken = screen.Take(&batch, now);
    if (!taken.error.empty()) continue;
    // What the stream promises for a batch it takes.
    if (!identity.empty() && batch.agent_id() != identity) __builtin_trap();
    if (agent.empty()) {
      agent = batch.agent_id();
      boot = batch.agent_boot_id();
    } else if (batch.agent_id() != agent || batch.agent_boot_id() != boot) {
      __builtin_trap();
    }
    for (const auto& e : batch.entities()) {
      if (e.timestamp_us() > now) __builtin_trap();
      if (!identity.empty() && e.scope() != rocefab::v1::SCOPE_COLL && e.entity().rfind(identity + "/", 0) != 0)
        __builtin_trap();
    }
    for (const auto& r : batch.collectives())
      if (r.timestamp_us() > now || !rocefab::collector::CollectiveProblem(r).empty()) __builtin_trap();
    if (!rocefab::collector::ValidateBatch(batch).empty()) __builtin_trap();
    latest.Update(batch);
    detectors.Observe(batch);
  }
  for (const auto& a : detectors.Evaluate(now, rocefab::collector::FabricContext{}))
    if (a.kind().empty() || a.entity().empty() || a.id() == 0) __builtin_trap();
  (void)latest.Collect();
  return 0;
}
