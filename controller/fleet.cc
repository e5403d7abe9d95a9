#include "controller/fleet.h"

#include <atomic>
#include <thread>

#include "common/daemon_setup.h"
#include "common/grpc_util.h"
#include "common/strings.h"

namespace rocefab::controller {

GrpcFleet::GrpcFleet(const v1::ControllerdConfig& config)
    : config_(config),
      timeout_ms_(config.has_agent_timeout() && DurationToUs(config.agent_timeout()) > 0
                      ? DurationToUs(config.agent_timeout()) / 1000
                      : 10'000) {}

std::string GrpcFleet::AgentAddress(const std::string& switch_name) const {
  for (const auto& endpoint : config_.switch_agents())
    if (endpoint.switch_name() == switch_name) return endpoint.address();
  std::string address = config_.agent_address_template().empty() ? "{switch}:9413"
                                                                  : config_.agent_address_template();
  if (size_t at = address.find("{switch}"); at != std::string::npos) address.replace(at, 8, switch_name);
  return address;
}

absl::StatusOr<v1::SwitchAgent::Stub*> GrpcFleet::Agent(const std::string& switch_name) {
  std::lock_guard lock(mu_);
  auto& stub = agents_[switch_name];
  if (!stub) {
    auto channel = MakeChannel(AgentAddress(switch_name), config_.tls());
    if (!channel.ok()) return channel.status();
    stub = v1::SwitchAgent::NewStub(*channel);
  }
  return stub.get();
}

namespace {

void SetDeadline(grpc::ClientContext* context, int64_t timeout_ms) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  // An agent that just restarted is reconnected to within the deadline
  // rather than failed at once from the channel's backoff.
  context->set_wait_for_ready(true);
}

}  // namespace

absl::StatusOr<v1::SwitchState> GrpcFleet::GetState(const std::string& switch_name) {
  auto stub = Agent(switch_name);
  if (!stub.ok()) return stub.status();
  grpc::ClientContext context;
  SetDeadline(&context, timeout_ms_);
  v1::SwitchState state;
  grpc::Status status = (*stub)->GetState(&context, {}, &state);
  if (!status.ok())
    return absl::UnavailableError(StrCat("agent at ", AgentAddress(switch_name), ": ", status.error_message()));
  return state;
}

absl::StatusOr<v1::ApplyConfigResponse> GrpcFleet::Apply(const v1::SwitchConfig& config) {
  auto stub = Agent(config.switch_name());
  if (!stub.ok()) return stub.status();
  grpc::ClientContext context;
  SetDeadline(&context, timeout_ms_);
  v1::ApplyConfigRequest request;
  *request.mutable_config() = config;
  v1::ApplyConfigResponse response;
  grpc::Status status = (*stub)->ApplyConfig(&context, request, &response);
  if (!status.ok())
    return absl::UnavailableError(StrCat("agent at ", AgentAddress(config.switch_name()), ": ",
                                         status.error_message()));
  return response;
}

void FanOut(const std::vector<std::string>& names, const std::function<void(const std::string&)>& call,
            size_t parallel) {
  if (names.size() == 1) {
    call(names.front());
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  const size_t n = std::min(parallel, names.size());
  for (size_t w = 0; w < n; ++w)
    workers.emplace_back([&] {
      for (size_t i = next++; i < names.size(); i = next++) call(names[i]);
    });
  for (auto& worker : workers) worker.join();
}

std::map<std::string, absl::StatusOr<v1::SwitchState>> GetStates(Fleet& fleet,
                                                                 const std::vector<std::string>& names) {
  std::map<std::string, absl::StatusOr<v1::SwitchState>> out;
  for (const auto& name : names) out.emplace(name, absl::UnknownError("not asked"));
  std::mutex mu;
  FanOut(names, [&](const std::string& name) {
    auto state = fleet.GetState(name);
    std::lock_guard lock(mu);
    out.at(name) = std::move(state);
  });
  return out;
}

}  // namespace rocefab::controller
