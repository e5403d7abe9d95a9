#pragma once
// The Query service the rocefab CLI talks to. Reads go to the store's reader
// connection; the sync API's thread pool is ample for operator traffic.

#include "collector/alerts.h"
#include "collector/fabric_context.h"
#include "collector/observe/observer.h"
#include "collector/store.h"
#include "collector/telemetry_service.h"
#include "collector/traffic_matrix.h"
#include "common/authz.h"
#include "common/clock.h"
#include "rocefab/v1/query.grpc.pb.h"

namespace rocefab::collector {

class QueryService final : public v1::Query::Service {
 public:
  // `context` (topology, drained links) may be null: diagnoses then cannot
  // rule switches out of a job's paths.
  // Every RPC is checked by `authorizer`; a null ServerContext is an
  // in-process call by the collector itself (automatic remediation).
  QueryService(Store& store, const AgentRegistry& agents, const Clock& clock, const Authorizer& authorizer,
               FabricContextSource* context = nullptr, Alerter* alerter = nullptr)
      : store_(store), agents_(agents), clock_(clock), authorizer_(authorizer), context_(context),
        alerter_(alerter) {}
  // Older counter history beyond the local store (may be null).
  void SetHistory(HistorySource* history) { history_ = history; }
  // The detectors' progress, for ListAnomalies' settle condition (may be null).
  void SetEvaluatedThrough(const EvaluatedThrough* through) { evaluated_through_ = through; }
  // The byte rates TrafficMatrix answers from (may be null: it then fails).
  void SetTrafficRates(const TrafficRates* rates) { traffic_rates_ = rates; }
  // The versions the agents reported, for DiagnoseJob's "what changed"
  // (may be null: no such view).
  void SetComponentLog(const ComponentLog* log) { components_ = log; }

  grpc::Status ListAgents(grpc::ServerContext* context, const v1::ListAgentsRequest* request,
                          v1::ListAgentsResponse* response) override;
  grpc::Status GetCounters(grpc::ServerContext* context, const v1::GetCountersRequest* request,
                           v1::GetCountersResponse* response) override;
  grpc::Status StartJob(grpc::ServerContext*, const v1::StartJobRequest*, v1::StartJobResponse*) override;
  grpc::Status EndJob(grpc::ServerContext*, const v1::EndJobRequest*, v1::EndJobResponse*) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*, v1::ListJobsResponse*) override;
  grpc::Status JobTimeline(grpc::ServerContext*, const v1::JobTimelineRequest*,
                           v1::JobTimelineResponse*) override;
  grpc::Status ListAnomalies(grpc::ServerContext*, const v1::ListAnomaliesRequest*,
                             v1::ListAnomaliesResponse*) override;
  grpc::Status DiagnoseJob(grpc::ServerContext*, const v1::DiagnoseJobRequest*,
                           v1::DiagnoseJobResponse*) override;
  grpc::Status ListAlerts(grpc::ServerContext*, const v1::ListAlertsRequest*, v1::ListAlertsResponse*) override;
  grpc::Status Silence(grpc::ServerContext*, const v1::SilenceRequest*, v1::SilenceResponse*) override;
  grpc::Status Unsilence(grpc::ServerContext*, const v1::UnsilenceRequest*, v1::UnsilenceResponse*) override;
  grpc::Status RecordPlaybookRun(grpc::ServerContext*, const v1::RecordPlaybookRunRequest*,
                                 v1::RecordPlaybookRunResponse*) override;
  grpc::Status ListPlaybookRuns(grpc::ServerContext*, const v1::ListPlaybookRunsRequest*,
                                v1::ListPlaybookRunsResponse*) override;
  grpc::Status TrafficMatrix(grpc::ServerContext*, const v1::TrafficMatrixRequest*,
                             v1::TrafficMatrixResponse*) override;

 private:
  // OK when the topology knows `entity` (Topology::CheckEntity), or when
  // there is no topology to check against.
  absl::Status KnownEntity(std::string_view entity) const;
  Store& store_;
  const AgentRegistry& agents_;
  const Clock& clock_;
  const Authorizer& authorizer_;
  FabricContextSource* context_;
  Alerter* alerter_;
  HistorySource* history_ = nullptr;
  const EvaluatedThrough* evaluated_through_ = nullptr;
  const TrafficRates* traffic_rates_ = nullptr;
  const ComponentLog* components_ = nullptr;
};

}  // namespace rocefab::collector
