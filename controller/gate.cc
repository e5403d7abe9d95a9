#include "controller/gate.h"

#include <algorithm>

#include "absl/strings/str_split.h"
#include "common/grpc_util.h"
#include "common/strings.h"
#include "common/traffic_matrix_merge.h"

namespace rocefab::controller {

bool TouchedBy(const Topology& topology, const std::vector<std::string>& switches, const std::string& entity) {
  const std::string device = entity.substr(0, entity.find('/'));
  if (std::find(switches.begin(), switches.end(), device) != switches.end()) return true;
  if (entity.find('/') == std::string::npos) return false;
  // The far end of a link to a touched switch: a NIC, or another switch's port.
  const int link = topology.LinkOfPort(entity);
  if (link < 0) return false;
  const std::string& peer = topology.PeerOf(link, entity);
  const std::string peer_device = peer.substr(0, peer.find('/'));
  return std::find(switches.begin(), switches.end(), peer_device) != switches.end();
}

CollectorGate::CollectorGate(std::shared_ptr<const Topology> topology, const std::string& collectors,
                             const v1::TlsSettings& tls)
    : topology_(std::move(topology)) {
  // One collector, or one per AI Zone (comma-separated): every shard is
  // asked, since a switch reports to its zone's.
  for (absl::string_view shard : absl::StrSplit(collectors, ',', absl::SkipEmpty())) {
    auto channel = MakeChannel(std::string(shard), tls);
    if (channel.ok()) shards_.push_back({std::string(shard), v1::Query::NewStub(*channel)});
  }
}

absl::StatusOr<std::vector<v1::Job>> CollectorGate::RunningJobs() {
  std::string errors;
  for (const auto& [address, stub] : shards_) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListJobsResponse response;
    const grpc::Status status = stub->ListJobs(&context, v1::ListJobsRequest(), &response);
    if (status.ok()) return std::vector<v1::Job>(response.jobs().begin(), response.jobs().end());
    StrAppend(&errors, errors.empty() ? "" : "; ", address, ": ", status.error_message());
  }
  return absl::UnavailableError(StrCat("no collector answered for the job registry (", errors.empty() ? "none configured" : errors, ")"));
}

std::string CollectorGate::Verdict(const std::vector<std::string>& switches, int64_t since_us, int64_t until_us) {
  std::string problems;
  for (const auto& [address, stub] : shards_) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::ListAnomaliesRequest request;
    request.set_since_us(since_us);
    for (const auto& name : switches) request.add_settle_agents(name);
    request.set_settle_after_us(until_us);
    request.set_settle_timeout_ms(10'000);
    v1::ListAnomaliesResponse response;
    grpc::Status status = stub->ListAnomalies(&context, request, &response);
    if (!status.ok()) {
      StrAppend(&problems, "collector ", address, " cannot be asked for the gate (", status.error_message(), "); ");
      continue;
    }
    if (!response.settled()) {
      std::string behind;
      for (const auto& agent : response.unsettled()) StrAppend(&behind, behind.empty() ? "" : ", ", agent);
      StrAppend(&problems, "collector ", address, " has not evaluated telemetry of ", behind,
                " from after the gate window within 10 s (is it behind, or are they not reporting?); ");
    }
    for (const auto& a : response.anomalies()) {
      // Opened during the gate window, on what the wave touched.
      if (a.start_us() < since_us || !TouchedBy(*topology_, switches, a.entity())) continue;
      StrAppend(&problems, a.kind(), " on ", a.entity(), " (anomaly ", a.id(), "); ");
    }
  }
  return problems;
}

absl::StatusOr<v1::TrafficMatrixResponse> CollectorGate::TrafficMatrix(uint32_t window_seconds) {
  if (shards_.empty()) return absl::FailedPreconditionError("no collector is configured (--collector)");
  std::vector<v1::TrafficMatrixResponse> parts(shards_.size());
  for (size_t i = 0; i < shards_.size(); ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::TrafficMatrixRequest request;
    request.set_window_seconds(window_seconds);
    const grpc::Status status = shards_[i].stub->TrafficMatrix(&context, request, &parts[i]);
    if (!status.ok())
      return absl::UnavailableError(StrCat("collector ", shards_[i].address, ": ", status.error_message()));
  }
  return MergeTrafficMatrices(parts);
}

}  // namespace rocefab::controller
