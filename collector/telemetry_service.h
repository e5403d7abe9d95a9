#pragma once
// Telemetry.Push on the gRPC callback API: one reactor per agent stream, no
// thread per stream. Each batch is validated, handed to the Ingester, and
// acked only from the Ingester's commit callback. At most kMaxInFlight
// batches per stream wait for their commit; beyond that the reactor stops
// reading, which pushes back on the agent through HTTP/2 flow control.

#include <map>
#include <mutex>
#include <string>

#include "collector/collector_metrics.h"
#include "collector/ingester.h"
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

class TelemetryService final : public v1::Telemetry::CallbackService {
 public:
  static constexpr int kMaxInFlight = 64;
  TelemetryService(Ingester& ingester, AgentRegistry& agents, CollectorMetrics& metrics)
      : ingester_(ingester), agents_(agents), metrics_(metrics) {}

  grpc::ServerBidiReactor<v1::TelemetryBatch, v1::Ack>* Push(
      grpc::CallbackServerContext* context) override;

 private:
  Ingester& ingester_;
  AgentRegistry& agents_;
  CollectorMetrics& metrics_;
};

}  // namespace rocefab::collector
