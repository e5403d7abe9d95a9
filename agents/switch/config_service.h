#pragma once
// The SwitchAgent gRPC service: ApplyConfig and GetState over a
// ConfigApplier. Only the controller's identity may apply; GetState is also
// open to viewers (common/authz.h).

#include "agents/switch/config_applier.h"
#include "common/authz.h"
#include "rocefab/v1/control.grpc.pb.h"

namespace rocefab::switchd {

class ConfigService final : public v1::SwitchAgent::Service {
 public:
  ConfigService(ConfigApplier& applier, const Authorizer& authorizer) : applier_(applier), authorizer_(authorizer) {}
  grpc::Status ApplyConfig(grpc::ServerContext* context, const v1::ApplyConfigRequest* request,
                           v1::ApplyConfigResponse* response) override {
    if (auto allowed = authorizer_.Check(context, "/rocefab.v1.SwitchAgent/ApplyConfig"); !allowed.ok())
      return allowed;
    *response = applier_.Apply(request->config());
    return grpc::Status::OK;
  }
  grpc::Status GetState(grpc::ServerContext* context, const v1::GetStateRequest*,
                        v1::SwitchState* response) override {
    if (auto allowed = authorizer_.Check(context, "/rocefab.v1.SwitchAgent/GetState"); !allowed.ok())
      return allowed;
    *response = applier_.State();
    return grpc::Status::OK;
  }

 private:
  ConfigApplier& applier_;
  const Authorizer& authorizer_;
};

}  // namespace rocefab::switchd
