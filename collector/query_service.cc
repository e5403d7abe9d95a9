#include "collector/query_service.h"

namespace rocefab::collector {
namespace {

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(grpc::StatusCode::INTERNAL, std::string(status.message()));
}

}  // namespace

grpc::Status QueryService::ListAgents(grpc::ServerContext*, const v1::ListAgentsRequest*,
                                      v1::ListAgentsResponse* response) {
  auto agents = store_.ListAgents();
  if (!agents.ok()) return ToGrpc(agents.status());
  for (auto& agent : *agents) {
    agent.set_connected(agents_.IsConnected(agent.agent_id()));
    *response->add_agents() = std::move(agent);
  }
  response->set_now_us(clock_.NowUs());
  return grpc::Status::OK;
}

grpc::Status QueryService::GetCounters(grpc::ServerContext*, const v1::GetCountersRequest* request,
                                       v1::GetCountersResponse* response) {
  auto rows = store_.GetCounters(*request);
  if (!rows.ok()) return ToGrpc(rows.status());
  for (auto& row : *rows) *response->add_rows() = std::move(row);
  response->set_now_us(clock_.NowUs());
  return grpc::Status::OK;
}

}  // namespace rocefab::collector
