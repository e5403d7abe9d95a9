#pragma once
// The switch agents as the controller sees them: a Fleet asks one agent for
// its state or gives it a config. GrpcFleet is the real one (mutual TLS, a
// deadline per call); tests use a fake. FanOut runs one call per switch in
// parallel, so one unreachable switch costs one deadline, not one each.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rocefab/v1/control.grpc.pb.h"

namespace rocefab::controller {

class Fleet {
 public:
  virtual ~Fleet() = default;
  virtual absl::StatusOr<v1::SwitchState> GetState(const std::string& switch_name) = 0;
  virtual absl::StatusOr<v1::ApplyConfigResponse> Apply(const v1::SwitchConfig& config) = 0;
};

class GrpcFleet final : public Fleet {
 public:
  // Agents listed in `config.switch_agents` are reached there, the others at
  // `agent_address_template` ({switch}:9413 by default).
  explicit GrpcFleet(const v1::ControllerdConfig& config);
  absl::StatusOr<v1::SwitchState> GetState(const std::string& switch_name) override;
  absl::StatusOr<v1::ApplyConfigResponse> Apply(const v1::SwitchConfig& config) override;
  std::string AgentAddress(const std::string& switch_name) const;

 private:
  absl::StatusOr<v1::SwitchAgent::Stub*> Agent(const std::string& switch_name);

  v1::ControllerdConfig config_;
  int64_t timeout_ms_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<v1::SwitchAgent::Stub>> agents_;
};

// Runs `call(name)` for every name at once (at most `parallel` at a time)
// and returns when all have answered.
void FanOut(const std::vector<std::string>& names, const std::function<void(const std::string&)>& call,
            size_t parallel = 64);

// Every switch's state, asked in parallel.
std::map<std::string, absl::StatusOr<v1::SwitchState>> GetStates(Fleet& fleet,
                                                                 const std::vector<std::string>& names);

}  // namespace rocefab::controller
