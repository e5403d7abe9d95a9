#pragma once
// The SwitchAgent gRPC service: ApplyConfig and GetState over a
// ConfigApplier. Only the controller's identity may apply; GetState is also
// open to viewers (common/authz.h).

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include "agents/switch/config_applier.h"
#include "common/authz.h"
#include "rocefab/v1/control.grpc.pb.h"

namespace rocefab::switchd {

class ConfigService final : public v1::SwitchAgent::Service {
 public:
  ConfigService(ConfigApplier& applier, const Authorizer& authorizer) : applier_(applier), authorizer_(authorizer) {}
  // rocefab_switchd_applies_total{result}: ok, rolled_back (an item failed
  // and the previous config stays), refused (wrong switch, older generation,
  // a malformed config); rocefab_switchd_applied_generation.
  void CountIn(prometheus::Family<prometheus::Counter>* applies, prometheus::Gauge* generation) {
    applies_ = applies;
    generation_ = generation;
    if (generation_) generation_->Set(static_cast<double>(applier_.State().applied_generation()));
  }
  grpc::Status ApplyConfig(grpc::ServerContext* context, const v1::ApplyConfigRequest* request,
                           v1::ApplyConfigResponse* response) override {
    if (auto allowed = authorizer_.Check(context, "/rocefab.v1.SwitchAgent/ApplyConfig"); !allowed.ok())
      return allowed;
    *response = applier_.Apply(request->config());
    if (applies_) {
      const char* result = response->ok() ? "ok" : response->rolled_back() ? "rolled_back" : "refused";
      applies_->Add({{"result", result}}).Increment();
    }
    if (generation_) generation_->Set(static_cast<double>(response->state().applied_generation()));
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
  prometheus::Family<prometheus::Counter>* applies_ = nullptr;
  prometheus::Gauge* generation_ = nullptr;
};

}  // namespace rocefab::switchd
