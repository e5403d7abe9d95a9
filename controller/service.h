#pragma once
// The Controller gRPC service: authorizes each call by the caller's
// certificate identity (common/authz.h) and hands it to the core. The
// audit log records that identity, never a name the client sends.

#include "common/authz.h"
#include "controller/controller.h"
#include "rocefab/v1/control.grpc.pb.h"

namespace rocefab::controller {

class ControllerService final : public v1::Controller::Service {
 public:
  ControllerService(Controller& core, const Authorizer& authorizer) : core_(core), authorizer_(authorizer) {}

  grpc::Status Plan(grpc::ServerContext*, const v1::PlanRequest*, v1::PlanResponse*) override;
  grpc::Status Apply(grpc::ServerContext*, const v1::ApplyRequest*, v1::ApplyResponse*) override;
  grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest*, v1::StatusResponse*) override;
  grpc::Status History(grpc::ServerContext*, const v1::HistoryRequest*, v1::HistoryResponse*) override;
  grpc::Status Drain(grpc::ServerContext*, const v1::DrainRequest*, v1::DrainResponse*) override;
  grpc::Status Abort(grpc::ServerContext*, const v1::AbortRequest*, v1::AbortResponse*) override;

 private:
  Controller& core_;
  const Authorizer& authorizer_;
};

}  // namespace rocefab::controller
