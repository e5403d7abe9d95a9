#pragma once
// The SwitchAgent gRPC service: ApplyConfig and GetState over a ConfigApplier.

#include "agents/switch/config_applier.h"
#include "rocefab/v1/control.grpc.pb.h"

namespace rocefab::switchd {

class ConfigService final : public v1::SwitchAgent::Service {
 public:
  explicit ConfigService(ConfigApplier& applier) : applier_(applier) {}
  grpc::Status ApplyConfig(grpc::ServerContext*, const v1::ApplyConfigRequest* request,
                           v1::ApplyConfigResponse* response) override {
    *response = applier_.Apply(request->config());
    return grpc::Status::OK;
  }
  grpc::Status GetState(grpc::ServerContext*, const v1::GetStateRequest*,
                        v1::SwitchState* response) override {
    *response = applier_.State();
    return grpc::Status::OK;
  }

 private:
  ConfigApplier& applier_;
};

}  // namespace rocefab::switchd
