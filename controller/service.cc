#include "controller/service.h"

namespace rocefab::controller {
namespace {

grpc::Status ToGrpc(const absl::Status& status) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  if (absl::IsInvalidArgument(status)) code = grpc::StatusCode::INVALID_ARGUMENT;
  else if (absl::IsFailedPrecondition(status)) code = grpc::StatusCode::FAILED_PRECONDITION;
  return grpc::Status(code, std::string(status.message()));
}

template <typename T>
grpc::Status Answer(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpc(result.status());
  *response = std::move(*result);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status ControllerService::Plan(grpc::ServerContext* context, const v1::PlanRequest*,
                                     v1::PlanResponse* response) {
  if (auto allowed = authorizer_.Check(context, "/rocefab.v1.Controller/Plan"); !allowed.ok()) return allowed;
  return Answer(core_.Plan(), response);
}

grpc::Status ControllerService::Apply(grpc::ServerContext* context, const v1::ApplyRequest* request,
                                      v1::ApplyResponse* response) {
  std::string who;
  if (auto allowed = authorizer_.Check(context, "/rocefab.v1.Controller/Apply", &who); !allowed.ok()) return allowed;
  return Answer(core_.Apply(*request, AuditName(who, request->who())), response);
}

grpc::Status ControllerService::Status(grpc::ServerContext* context, const v1::StatusRequest*,
                                       v1::StatusResponse* response) {
  if (auto allowed = authorizer_.Check(context, "/rocefab.v1.Controller/Status"); !allowed.ok()) return allowed;
  return Answer(core_.Status(), response);
}

grpc::Status ControllerService::History(grpc::ServerContext* context, const v1::HistoryRequest* request,
                                        v1::HistoryResponse* response) {
  if (auto allowed = authorizer_.Check(context, "/rocefab.v1.Controller/History"); !allowed.ok()) return allowed;
  return Answer(core_.History(request->limit()), response);
}

grpc::Status ControllerService::Drain(grpc::ServerContext* context, const v1::DrainRequest* request,
                                      v1::DrainResponse* response) {
  std::string who;
  if (auto allowed = authorizer_.Check(context, "/rocefab.v1.Controller/Drain", &who); !allowed.ok()) return allowed;
  return Answer(core_.Drain(*request, AuditName(who, request->who())), response);
}

grpc::Status ControllerService::Abort(grpc::ServerContext* context, const v1::AbortRequest* request,
                                      v1::AbortResponse* response) {
  std::string who;
  if (auto allowed = authorizer_.Check(context, "/rocefab.v1.Controller/Abort", &who); !allowed.ok()) return allowed;
  *response = core_.Abort(request->why(), who);
  return grpc::Status::OK;
}

}  // namespace rocefab::controller
