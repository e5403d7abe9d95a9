#pragma once
// rocefab-controllerd's core: owns the topology, the policy and the desired
// state, talks to switch agents and rolls configs out safely: canary first,
// then waves, each followed by a health gate; a failed apply or gate rolls
// every touched switch back to the config it had. Serves the Controller
// gRPC service. One request at a time (a mutex): rollouts never interleave.

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/clock.h"
#include "common/topology.h"
#include "controller/store.h"
#include "rocefab/v1/control.grpc.pb.h"
#include "rocefab/v1/query.grpc.pb.h"

namespace rocefab::controller {

class Controller final : public v1::Controller::Service {
 public:
  Controller(std::shared_ptr<const Topology> topology, v1::Policy policy, Store& store,
             const v1::ControllerdConfig& config, const Clock& clock);

  // Compiles the policy with the current drains; stores a new desired
  // generation when the result differs from the latest one.
  absl::StatusOr<uint64_t> Recompile(const std::string& who, const std::string& why);

  grpc::Status Plan(grpc::ServerContext*, const v1::PlanRequest*, v1::PlanResponse*) override;
  grpc::Status Apply(grpc::ServerContext*, const v1::ApplyRequest*, v1::ApplyResponse*) override;
  grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest*, v1::StatusResponse*) override;
  grpc::Status History(grpc::ServerContext*, const v1::HistoryRequest*, v1::HistoryResponse*) override;
  grpc::Status Drain(grpc::ServerContext*, const v1::DrainRequest*, v1::DrainResponse*) override;

 private:
  absl::StatusOr<uint64_t> RecompileLocked(const std::string& who, const std::string& why);
  std::string AgentAddress(const std::string& switch_name) const;
  v1::SwitchAgent::Stub* Agent(const std::string& switch_name);
  absl::StatusOr<v1::SwitchState> GetState(const std::string& switch_name);
  absl::StatusOr<v1::ApplyConfigResponse> Push(const v1::SwitchConfig& config);
  // Empty when healthy; else what is wrong with the touched switches.
  std::string HealthGate(const std::vector<std::string>& switches, uint32_t seconds);
  void Audit(const std::string& who, const std::string& action, const std::string& target,
             const std::string& why, const std::string& detail, uint64_t generation);

  std::shared_ptr<const Topology> topology_;
  v1::Policy policy_;
  Store& store_;
  v1::ControllerdConfig config_;
  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<v1::SwitchAgent::Stub>> agents_;
  struct Shard {
    std::string address;
    std::unique_ptr<v1::Query::Stub> stub;
  };
  std::vector<Shard> collectors_;  // the health gates' collector shards
};

}  // namespace rocefab::controller
