#include "controller/controller.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_split.h"
#include "common/grpc_util.h"
#include "common/log.h"
#include "common/strings.h"
#include "controller/compiler.h"

namespace rocefab::controller {
namespace {

constexpr char kLog[] = "controller";

grpc::Status Fail(const absl::Status& status) {
  return grpc::Status(status.code() == absl::StatusCode::kInvalidArgument
                          ? grpc::StatusCode::INVALID_ARGUMENT
                          : grpc::StatusCode::INTERNAL,
                      std::string(status.message()));
}

template <typename T>
void SetDeadline(grpc::ClientContext* context, int seconds) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  // An agent that just restarted is reconnected to within the deadline
  // rather than failed at once from the channel's backoff.
  context->set_wait_for_ready(true);
}

}  // namespace

Controller::Controller(std::shared_ptr<const Topology> topology, v1::Policy policy, Store& store,
                       const v1::ControllerdConfig& config, const Clock& clock)
    : topology_(std::move(topology)), policy_(std::move(policy)), store_(store), config_(config),
      clock_(clock) {
  // One collector, or one per AI Zone (comma-separated): the gates ask
  // every shard, since a switch reports to its zone's.
  for (absl::string_view shard : absl::StrSplit(config_.collector(), ',', absl::SkipEmpty())) {
    auto channel = MakeChannel(std::string(shard), {});
    if (channel.ok()) collectors_.push_back({std::string(shard), v1::Query::NewStub(*channel)});
  }
}

void Controller::Audit(const std::string& who, const std::string& action, const std::string& target,
                       const std::string& why, const std::string& detail, uint64_t generation) {
  v1::AuditEntry entry;
  entry.set_timestamp_us(clock_.NowUs());
  entry.set_who(who.empty() ? "unknown" : who);
  entry.set_action(action);
  entry.set_target(target);
  entry.set_why(why);
  entry.set_detail(detail);
  entry.set_generation(generation);
  if (auto status = store_.Audit(entry); !status.ok())
    LOG_ERROR(kLog, "audit log write failed: ", status.message());
}

absl::StatusOr<uint64_t> Controller::Recompile(const std::string& who, const std::string& why) {
  std::lock_guard lock(mu_);
  return RecompileLocked(who, why);
}

absl::StatusOr<uint64_t> Controller::RecompileLocked(const std::string& who, const std::string& why) {
  auto latest = store_.LatestGeneration();
  if (!latest.ok()) return latest.status();
  auto drained = store_.Drained();
  if (!drained.ok()) return drained.status();
  auto compiled = Compile(*topology_, policy_, *drained, *latest + 1);
  if (!compiled.ok()) return compiled.status();
  if (*latest > 0) {
    auto previous = store_.Desired(*latest);
    if (!previous.ok()) return previous.status();
    bool same = previous->size() == compiled->size();
    for (const auto& [name, config] : *compiled)
      same = same && previous->count(name) && previous->at(name).content_hash() == config.content_hash();
    if (same) return *latest;
  }
  if (auto status = store_.SaveDesired(*latest + 1, *compiled); !status.ok()) return status;
  Audit(who, "compile", "fabric", why, StrCat(compiled->size(), " switch configs"), *latest + 1);
  LOG_INFO(kLog, "desired generation ", *latest + 1, " (", compiled->size(), " switches)");
  return *latest + 1;
}

std::string Controller::AgentAddress(const std::string& switch_name) const {
  for (const auto& endpoint : config_.switch_agents())
    if (endpoint.switch_name() == switch_name) return endpoint.address();
  std::string address = config_.agent_address_template().empty() ? "{switch}:9413"
                                                                  : config_.agent_address_template();
  if (size_t at = address.find("{switch}"); at != std::string::npos) address.replace(at, 8, switch_name);
  return address;
}

v1::SwitchAgent::Stub* Controller::Agent(const std::string& switch_name) {
  auto& stub = agents_[switch_name];
  if (!stub) {
    auto channel = MakeChannel(AgentAddress(switch_name), {});
    if (!channel.ok()) return nullptr;
    stub = v1::SwitchAgent::NewStub(*channel);
  }
  return stub.get();
}

absl::StatusOr<v1::SwitchState> Controller::GetState(const std::string& switch_name) {
  v1::SwitchAgent::Stub* stub = Agent(switch_name);
  if (stub == nullptr) return absl::UnavailableError("bad agent address");
  grpc::ClientContext context;
  SetDeadline<void>(&context, 5);
  v1::SwitchState state;
  grpc::Status status = stub->GetState(&context, {}, &state);
  if (!status.ok())
    return absl::UnavailableError(StrCat("agent at ", AgentAddress(switch_name), ": ", status.error_message()));
  return state;
}

absl::StatusOr<v1::ApplyConfigResponse> Controller::Push(const v1::SwitchConfig& config) {
  v1::SwitchAgent::Stub* stub = Agent(config.switch_name());
  if (stub == nullptr) return absl::UnavailableError("bad agent address");
  grpc::ClientContext context;
  SetDeadline<void>(&context, 30);
  v1::ApplyConfigRequest request;
  *request.mutable_config() = config;
  v1::ApplyConfigResponse response;
  grpc::Status status = stub->ApplyConfig(&context, request, &response);
  if (!status.ok())
    return absl::UnavailableError(StrCat("agent at ", AgentAddress(config.switch_name()), ": ",
                                         status.error_message()));
  return response;
}

grpc::Status Controller::Plan(grpc::ServerContext*, const v1::PlanRequest*, v1::PlanResponse* response) {
  std::lock_guard lock(mu_);
  auto generation = store_.LatestGeneration();
  if (!generation.ok()) return Fail(generation.status());
  auto desired = store_.Desired(*generation);
  if (!desired.ok()) return Fail(desired.status());
  response->set_desired_generation(*generation);
  for (const auto& [name, config] : *desired) {
    v1::SwitchDiff* diff = response->add_switches();
    diff->set_switch_name(name);
    diff->set_desired_generation(config.generation());
    diff->set_desired_hash(config.content_hash());
    auto state = GetState(name);
    if (!state.ok()) {
      diff->set_error(Message(state.status()));
      continue;
    }
    diff->set_applied_generation(state->applied_generation());
    diff->set_applied_hash(state->applied_hash());
    std::map<std::string, std::string> have, want;
    for (const auto& item : state->applied().items()) have[item.key()] = item.SerializeAsString();
    for (const auto& item : config.items()) want[item.key()] = item.SerializeAsString();
    for (const auto& [key, bytes] : want) {
      auto it = have.find(key);
      if (it == have.end()) diff->add_added(key);
      else if (it->second != bytes) diff->add_changed(key);
    }
    for (const auto& [key, bytes] : have)
      if (!want.count(key)) diff->add_removed(key);
    // Same items but a different hash: the scheme or the QP-scaling hint.
    if (diff->added().empty() && diff->changed().empty() && diff->removed().empty() &&
        state->applied_hash() != config.content_hash())
      diff->add_changed("settings (scheme, qp_scaling_hint)");
  }
  return grpc::Status::OK;
}

std::string Controller::HealthGate(const std::vector<std::string>& switches, uint32_t seconds) {
  const int64_t start_us = clock_.NowUs();
  // The gate is an observation window: watch the touched switches for it.
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::seconds(seconds));
  std::string problems;
  for (const std::string& name : switches) {
    auto state = GetState(name);
    if (!state.ok()) {
      StrAppend(&problems, name, ": ", state.status().message(), "; ");
      continue;
    }
    for (const auto& item : state->items())
      if (item.state() == v1::ITEM_STATE_FAILED)
        StrAppend(&problems, name, ": item ", item.key(), " failed: ", item.reason(), "; ");
  }
  if (!collectors_.empty() && seconds > 0) {
    // No new anomaly on the touched switches: no link flaps, no drops on the
    // lossless class, no new FCS errors during the window. Every shard is
    // asked; one that does not answer fails the gate, since the switch may
    // be its.
    for (const std::string& name : switches) {
      for (const char* counter : {"link_flaps", "queue_drops", "rx_fcs_errors"}) {
        for (const auto& [address, stub] : collectors_) {
          grpc::ClientContext context;
          SetDeadline<void>(&context, 5);
          v1::GetCountersRequest request;
          request.set_host(name);
          request.set_counter(counter);
          request.set_since_us(start_us);
          v1::GetCountersResponse counters;
          if (!stub->GetCounters(&context, request, &counters).ok()) {
            StrAppend(&problems, "collector ", address, " unreachable for the gate; ");
            return problems;
          }
          for (const auto& row : counters.rows())
            if (row.has_rate() && row.rate_per_second() > 0)
              StrAppend(&problems, row.entity(), " ", counter, " rose; ");
        }
      }
    }
  }
  return problems;
}

grpc::Status Controller::Apply(grpc::ServerContext*, const v1::ApplyRequest* request,
                               v1::ApplyResponse* response) {
  std::lock_guard lock(mu_);
  auto generation = store_.LatestGeneration();
  if (!generation.ok()) return Fail(generation.status());
  auto desired = store_.Desired(*generation);
  if (!desired.ok()) return Fail(desired.status());
  response->set_generation(*generation);
  // Only switches whose applied config differs are touched, in name order;
  // the canary wave goes first.
  std::vector<std::string> todo;
  std::map<std::string, v1::SwitchConfig> previous;
  for (const auto& [name, config] : *desired) {
    auto state = GetState(name);
    if (!state.ok()) {
      response->set_error(StrCat("cannot reach ", name, ": ", state.status().message(), "; nothing applied"));
      return grpc::Status::OK;
    }
    if (state->applied_hash() == config.content_hash() && state->applied_generation() == config.generation())
      continue;
    previous[name] = state->applied();
    todo.push_back(name);
  }
  const uint32_t canary = request->canary() == 0 ? 1 : request->canary();
  const uint32_t wave_size = request->wave_size() == 0 ? 8 : request->wave_size();
  std::vector<std::vector<std::string>> waves;
  for (size_t i = 0; i < todo.size();) {
    const size_t n = waves.empty() ? canary : wave_size;
    waves.emplace_back(todo.begin() + i, todo.begin() + std::min(todo.size(), i + n));
    i += n;
  }
  if (request->dry_run()) {
    for (size_t w = 0; w < waves.size(); ++w) {
      auto* report = response->add_waves();
      report->set_wave(static_cast<uint32_t>(w));
      for (const auto& name : waves[w]) report->add_switches(name);
      report->set_detail("dry run: nothing applied");
    }
    response->set_ok(true);
    return grpc::Status::OK;
  }
  Audit(request->who(), "apply-start", StrCat(todo.size(), " switches"), request->why(),
        StrCat(waves.size(), " waves, canary ", canary, ", wave size ", wave_size, ", gate ",
               request->gate_seconds(), "s"),
        *generation);
  std::vector<std::string> touched;
  std::string failure;
  for (size_t w = 0; w < waves.size() && failure.empty(); ++w) {
    auto* report = response->add_waves();
    report->set_wave(static_cast<uint32_t>(w));
    for (const auto& name : waves[w]) {
      report->add_switches(name);
      auto pushed = Push(desired->at(name));
      touched.push_back(name);
      if (!pushed.ok() || !pushed->ok()) {
        failure = StrCat(name, ": ", pushed.ok() ? pushed->error() : std::string(pushed.status().message()));
        break;
      }
    }
    report->set_applied(failure.empty());
    if (!failure.empty()) {
      report->set_detail(failure);
      break;
    }
    const std::string gate = HealthGate(waves[w], request->gate_seconds());
    report->set_gate_passed(gate.empty());
    if (!gate.empty()) {
      failure = StrCat("health gate after wave ", w, ": ", gate);
      report->set_detail(gate);
    }
  }
  if (failure.empty()) {
    response->set_ok(true);
    Audit(request->who(), "apply-done", StrCat(touched.size(), " switches"), request->why(), "", *generation);
    return grpc::Status::OK;
  }
  // Roll every touched switch back to what it had, as a new generation (an
  // agent never goes back in generation numbers).
  const uint64_t rollback_generation = *generation + 1;
  std::map<std::string, v1::SwitchConfig> restored = *desired;
  for (const std::string& name : touched) {
    v1::SwitchConfig config = previous[name];
    config.set_switch_name(name);
    config.set_generation(rollback_generation);
    config.set_content_hash(ContentHash(config));
    restored[name] = config;
    auto pushed = Push(config);
    if (!pushed.ok() || !pushed->ok())
      StrAppend(&failure, "; rollback of ", name, " failed: ",
                pushed.ok() ? pushed->error() : std::string(pushed.status().message()));
  }
  for (auto& [name, config] : restored) {
    if (std::find(touched.begin(), touched.end(), name) != touched.end()) continue;
    // Untouched switches keep what they have: the desired state follows.
    auto state = GetState(name);
    if (state.ok()) {
      config = state->applied();
      config.set_generation(rollback_generation);
      config.set_content_hash(ContentHash(config));
    }
  }
  (void)store_.SaveDesired(rollback_generation, restored);
  response->set_rolled_back(true);
  response->set_error(failure);
  Audit(request->who(), "rollback", StrCat(touched.size(), " switches"), request->why(), failure,
        rollback_generation);
  LOG_WARN(kLog, "rollout of generation ", *generation, " rolled back: ", failure);
  return grpc::Status::OK;
}

grpc::Status Controller::Status(grpc::ServerContext*, const v1::StatusRequest*,
                                v1::StatusResponse* response) {
  std::lock_guard lock(mu_);
  auto generation = store_.LatestGeneration();
  if (!generation.ok()) return Fail(generation.status());
  auto desired = store_.Desired(*generation);
  if (!desired.ok()) return Fail(desired.status());
  for (const auto& [name, config] : *desired) {
    v1::SwitchStatus* status = response->add_switches();
    status->set_switch_name(name);
    status->set_desired_generation(config.generation());
    status->set_desired_hash(config.content_hash());
    auto state = GetState(name);
    if (!state.ok()) {
      status->set_error(Message(state.status()));
      status->set_drift(true);
      continue;
    }
    status->set_applied_generation(state->applied_generation());
    status->set_applied_hash(state->applied_hash());
    status->set_drift(state->applied_hash() != config.content_hash());
    for (const auto& item : state->items()) {
      if (item.state() == v1::ITEM_STATE_FAILED) status->set_failed_items(status->failed_items() + 1);
      if (item.state() == v1::ITEM_STATE_UNSUPPORTED)
        status->set_unsupported_items(status->unsupported_items() + 1);
    }
  }
  auto drained = store_.Drained();
  if (drained.ok())
    for (const auto& port : *drained) response->add_drained(port);
  return grpc::Status::OK;
}

grpc::Status Controller::History(grpc::ServerContext*, const v1::HistoryRequest* request,
                                 v1::HistoryResponse* response) {
  std::lock_guard lock(mu_);
  auto entries = store_.History(request->limit());
  if (!entries.ok()) return Fail(entries.status());
  for (auto& e : *entries) *response->add_entries() = std::move(e);
  return grpc::Status::OK;
}

grpc::Status Controller::Drain(grpc::ServerContext*, const v1::DrainRequest* request,
                               v1::DrainResponse* response) {
  std::lock_guard lock(mu_);
  if (request->reason().empty() && !request->undrain()) {
    response->set_error("a drain needs --reason");
    return grpc::Status::OK;
  }
  // The ports to (un)drain: one link's port, or every fabric port of a switch.
  std::vector<std::string> ports;
  if (request->kind() == "link") {
    if (topology_->LinkOfPort(request->name()) < 0) {
      response->set_error(StrCat("no cabled port ", request->name(), " (give device/port)"));
      return grpc::Status::OK;
    }
    ports.push_back(request->name());
  } else if (request->kind() == "switch") {
    if (topology_->FindSwitch(request->name()) == nullptr) {
      response->set_error(StrCat("no switch ", request->name()));
      return grpc::Status::OK;
    }
    // Its fabric ports only: hosts keep their single link.
    for (const auto& port : topology_->PortsOf(request->name())) {
      const std::string full = StrCat(request->name(), "/", port);
      const std::string& peer = topology_->PeerOf(topology_->LinkOfPort(full), full);
      if (topology_->FindHost(peer.substr(0, peer.find('/'))) == nullptr) ports.push_back(full);
    }
  } else {
    response->set_error("kind must be link or switch");
    return grpc::Status::OK;
  }
  auto drained = store_.Drained();
  if (!drained.ok()) return Fail(drained.status());
  std::set<std::string> next = *drained;
  for (const auto& port : ports) {
    if (request->undrain()) next.erase(port);
    else next.insert(port);
  }
  if (!request->undrain()) {
    // Capacity safety: no rack below the policy's share of its uplinks.
    for (const auto& [rtsw, share] : RemainingUplinkShare(*topology_, next)) {
      if (share + 1e-9 < policy_.min_uplink_capacity() && !request->force()) {
        response->set_error(StrCat("refused: ", rtsw, " would keep ", static_cast<int>(share * 100),
                                   "% of its uplink capacity, below the policy's ",
                                   static_cast<int>(policy_.min_uplink_capacity() * 100),
                                   "% (use --force to drain anyway)"));
        return grpc::Status::OK;
      }
    }
  }
  for (const auto& port : ports) {
    if (auto s = store_.SetDrained(port, !request->undrain(), request->reason(), request->who(), clock_.NowUs());
        !s.ok())
      return Fail(s);
  }
  auto before_generation = store_.LatestGeneration();
  if (!before_generation.ok()) return Fail(before_generation.status());
  auto before = store_.Desired(*before_generation);
  if (!before.ok()) return Fail(before.status());
  auto generation = RecompileLocked(request->who(), StrCat(request->undrain() ? "undrain " : "drain ",
                                                           request->name(), ": ", request->reason()));
  if (!generation.ok()) return Fail(generation.status());
  Audit(request->who(), request->undrain() ? "undrain" : (request->force() ? "drain-forced" : "drain"),
        request->name(), request->reason(), StrCat(ports.size(), " port(s)"), *generation);
  // A drain takes effect at once on every switch whose config it changes:
  // the link's two ends, and the rack switches that must stop sending a
  // rack's traffic through a spine that lost its links to that rack.
  auto desired = store_.Desired(*generation);
  if (!desired.ok()) return Fail(desired.status());
  for (const auto& [name, config] : *desired) {
    auto old = before->find(name);
    if (old != before->end() && old->second.content_hash() == config.content_hash()) continue;
    auto pushed = Push(config);
    if (!pushed.ok() || !pushed->ok()) {
      response->set_error(StrCat("drain recorded, but ", name, " did not apply it: ",
                                 pushed.ok() ? pushed->error() : std::string(pushed.status().message())));
      break;
    }
  }
  response->set_ok(response->error().empty());
  response->set_generation(*generation);
  for (const auto& port : next) response->add_drained(port);
  return grpc::Status::OK;
}

}  // namespace rocefab::controller
