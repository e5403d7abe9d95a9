#pragma once
// Telemetry.Push on the gRPC callback API: one reactor per agent stream, no
// thread per stream. Each batch is validated, handed to the Ingester, and
// acked only from the Ingester's commit callback. At most kMaxInFlight
// batches per stream wait for their commit; beyond that the reactor stops
// reading, which pushes back on the agent through HTTP/2 flow control.

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "collector/collector_metrics.h"
#include "collector/ingester.h"
#include "common/authz.h"
#include "common/clock.h"
#include "rocefab/v1/telemetry.grpc.pb.h"

namespace rocefab::collector {

// Which agents have an open stream. Thread-safe.
class AgentRegistry final {
 public:
  explicit AgentRegistry(CollectorMetrics& metrics) : metrics_(metrics) {}
  void Connected(const std::string& agent_id);
  void Disconnected(const std::string& agent_id);
  bool IsConnected(const std::string& agent_id) const;

 private:
  CollectorMetrics& metrics_;
  mutable std::mutex mu_;
  std::map<std::string, int> streams_;
};

// Checks what the agent sent before it reaches the store. Empty when valid,
// else the reason for ACK_STATUS_REJECTED.
std::string ValidateBatch(const v1::TelemetryBatch& batch);
// Why a collective record cannot be stored, or empty.
std::string CollectiveProblem(const v1::CollectiveRecord& record);
// Removes the collective records that cannot be stored, keeping the rest in
// order; returns how many went, and the first one's reason.
size_t DropBadCollectives(v1::TelemetryBatch* batch, std::string* first_problem);

// What ScreenBatch removed or changed.
struct Screening {
  size_t foreign = 0;         // entities and records not the sender's
  size_t future_dropped = 0;  // dated beyond the skew bound ahead
  size_t future_clipped = 0;  // dated ahead within it: now stored at receipt time
  size_t components_dropped = 0;  // version components too long, or too many
  std::string first_problem;
};
// Keeps what the sender may report and the collector can trust in time:
// - with an `identity` (the certificate's), NIC, port and queue entities
//   must be "<identity>/...", and collective records must come from host
//   `identity` (or its FQDN);
// - readings and records dated more than `max_future_us` after `now_us` are
//   dropped, those dated after `now_us` by less are clipped to it, so one
//   fast clock can never make later real readings look like replays.
// Past dates are kept: they are replays from the agent's spool.
Screening ScreenBatch(v1::TelemetryBatch* batch, const std::string& identity, int64_t now_us,
                      int64_t max_future_us);

// One Push stream's decisions about each batch, in order: drop malformed
// collective records; refuse a batch whose agent_id is not the stream's
// certificate identity; screen ownership and dates (ScreenBatch); validate;
// and hold the stream to the agent and boot id of its first stored batch.
class PushScreen final {
 public:
  struct Outcome {
    std::string error;  // why the batch is rejected; empty when it is taken
    Screening screening;
    size_t bad_collectives = 0;
    std::string bad_why;
    std::optional<int64_t> skew_us;  // batch creation minus the collector's clock
  };
  PushScreen(std::string identity, int64_t max_future_us)
      : identity_(std::move(identity)), max_future_us_(max_future_us) {}
  Outcome Take(v1::TelemetryBatch* batch, int64_t now_us);
  bool started() const { return !agent_id_.empty(); }

 private:
  const std::string identity_;  // the certificate's; empty in plaintext
  const int64_t max_future_us_;
  std::string agent_id_, boot_id_;
};

class TelemetryService final : public v1::Telemetry::CallbackService {
 public:
  static constexpr int kMaxInFlight = 64;
  struct Options {
    const Authorizer* authorizer = nullptr;  // null: every sender may push anything
    int64_t max_future_us = 10'000'000;
  };
  TelemetryService(Ingester& ingester, AgentRegistry& agents, CollectorMetrics& metrics,
                   const Clock& clock, Options options)
      : ingester_(ingester), agents_(agents), metrics_(metrics), clock_(clock), options_(options) {}

  grpc::ServerBidiReactor<v1::TelemetryBatch, v1::Ack>* Push(
      grpc::CallbackServerContext* context) override;

 private:
  Ingester& ingester_;
  AgentRegistry& agents_;
  CollectorMetrics& metrics_;
  const Clock& clock_;
  Options options_;
};

}  // namespace rocefab::collector
