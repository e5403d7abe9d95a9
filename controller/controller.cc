#include "controller/controller.h"

#include "common/log.h"
#include "common/strings.h"
#include "controller/compiler.h"

namespace rocefab::controller {
namespace {

constexpr char kControllerLog[] = "controller";

bool SameConfigs(const std::map<std::string, v1::SwitchConfig>& a, const std::map<std::string, v1::SwitchConfig>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, config] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.content_hash() != config.content_hash()) return false;
  }
  return true;
}

}  // namespace

Controller::Controller(std::shared_ptr<const Topology> topology, v1::Policy policy, Store& store, Fleet& fleet,
                       Gate* gate, const v1::ControllerdConfig& config, const Clock& clock)
    : topology_(std::move(topology)), store_(store), fleet_(fleet), gate_(gate), config_(config), clock_(clock),
      target_(std::move(policy)) {}

absl::StatusOr<uint64_t> Controller::Start(const std::string& who, const std::string& why) {
  std::lock_guard lock(mu_);
  auto running = store_.RunningPolicy();
  if (!running.ok()) return running.status();
  running_ = std::move(*running);
  auto latest = store_.LatestGeneration();
  if (!latest.ok()) return latest.status();
  generation_ = *latest;
  if (generation_ > 0) {
    auto desired = store_.Desired(generation_);
    if (!desired.ok()) return desired.status();
    desired_ = std::move(*desired);
  }
  return RecompileLocked(who, why);
}

uint64_t Controller::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

Controller::Activity Controller::activity() const {
  std::lock_guard lock(mu_);
  Activity activity = activity_;
  activity.rollout_active = rollout_.active;
  activity.wave = rollout_.wave;
  activity.waves = rollout_.waves;
  return activity;
}

void Controller::Audit(const std::string& who, const std::string& action, const std::string& target,
                       const std::string& why, const std::string& detail, uint64_t generation) {
  std::lock_guard lock(mu_);
  AuditLocked(who, action, target, why, detail, generation);
}

void Controller::AuditLocked(const std::string& who, const std::string& action, const std::string& target,
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
    LOG_ERROR(kControllerLog, "audit log write failed: ", status.message());
}

absl::StatusOr<uint64_t> Controller::RecompileLocked(const std::string& who, const std::string& why) {
  auto drained = store_.Drained();
  if (!drained.ok()) return drained.status();
  const uint64_t next = generation_ + 1;
  if (!UsesTe(target_)) te_.clear();
  auto compiled = Compile(*topology_, target_, *drained, next, te_.empty() ? nullptr : &te_);
  if (!compiled.ok()) return compiled.status();
  fallback_.clear();
  if (running_ && (running_->SerializeAsString() != target_.SerializeAsString() || te_ != running_te_)) {
    auto fallback = Compile(*topology_, *running_, *drained, next,
                            UsesTe(*running_) && !running_te_.empty() ? &running_te_ : nullptr);
    if (!fallback.ok()) return fallback.status();
    fallback_ = std::move(*fallback);
  }
  if (generation_ > 0 && SameConfigs(desired_, *compiled)) return generation_;
  if (auto status = store_.SaveDesired(next, *compiled); !status.ok()) return status;
  generation_ = next;
  desired_ = std::move(*compiled);
  frozen_ = false;
  AuditLocked(who, "compile", "fabric", why, StrCat(desired_.size(), " switch configs"), next);
  LOG_INFO(kControllerLog, "desired generation ", next, " (", desired_.size(), " switches)");
  return next;
}

v1::SwitchConfig Controller::ConfigForLocked(const std::string& name) const {
  if (!fallback_.empty() && !rollout_.on_target.count(name)) {
    auto it = fallback_.find(name);
    if (it != fallback_.end()) return it->second;
  }
  auto it = desired_.find(name);
  return it == desired_.end() ? v1::SwitchConfig() : it->second;
}

std::mutex& Controller::PushLock(const std::string& name) {
  std::lock_guard lock(mu_);
  auto& m = push_locks_[name];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

std::map<std::string, std::string> Controller::PushNewest(const std::vector<std::string>& names,
                                                          std::set<std::string>* unreachable) {
  std::map<std::string, std::string> failures;
  std::mutex out_mu;
  FanOut(names, [&](const std::string& name) {
    std::lock_guard push(PushLock(name));
    v1::SwitchConfig config;
    {
      std::lock_guard lock(mu_);
      config = ConfigForLocked(name);
    }
    auto pushed = fleet_.Apply(config);
    if (pushed.ok() && pushed->ok()) return;
    std::lock_guard lock(out_mu);
    failures[name] = pushed.ok() ? pushed->error() : std::string(pushed.status().message());
    if (!pushed.ok() && unreachable) unreachable->insert(name);
  });
  return failures;
}

std::string Controller::HealthGate(const std::vector<std::string>& switches, int64_t since_us, bool ask_detectors) {
  std::string problems;
  for (const auto& [name, state] : GetStates(fleet_, switches)) {
    if (!state.ok()) {
      StrAppend(&problems, name, ": ", state.status().message(), "; ");
      continue;
    }
    for (const auto& item : state->items())
      if (item.state() == v1::ITEM_STATE_FAILED)
        StrAppend(&problems, name, ": item ", item.key(), " failed: ", item.reason(), "; ");
  }
  if (gate_ != nullptr && ask_detectors) StrAppend(&problems, gate_->Verdict(switches, since_us, clock_.NowUs()));
  return problems;
}

absl::StatusOr<v1::PlanResponse> Controller::Plan() {
  v1::PlanResponse response;
  std::map<std::string, v1::SwitchConfig> desired;
  {
    std::lock_guard lock(mu_);
    desired = desired_;
    response.set_desired_generation(generation_);
  }
  std::vector<std::string> names;
  for (const auto& [name, config] : desired) names.push_back(name);
  auto states = GetStates(fleet_, names);
  for (const auto& [name, config] : desired) {
    v1::SwitchDiff* diff = response.add_switches();
    diff->set_switch_name(name);
    diff->set_desired_generation(config.generation());
    diff->set_desired_hash(config.content_hash());
    const auto& state = states.at(name);
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
  return response;
}

absl::StatusOr<v1::StatusResponse> Controller::Status() {
  v1::StatusResponse response;
  std::map<std::string, v1::SwitchConfig> desired;
  {
    std::lock_guard lock(mu_);
    desired = desired_;
    if (rollout_.active)
      response.set_rollout(StrCat("generation ", rollout_.generation, ", wave ", rollout_.wave + 1, " of ",
                                  rollout_.waves, ", started by ", rollout_.who,
                                  rollout_.abort ? " (aborting)" : ""));
    auto drained = store_.Drained();
    if (drained.ok())
      for (const auto& port : *drained) response.add_drained(port);
  }
  std::vector<std::string> names;
  for (const auto& [name, config] : desired) names.push_back(name);
  auto states = GetStates(fleet_, names);
  for (const auto& [name, config] : desired) {
    v1::SwitchStatus* status = response.add_switches();
    status->set_switch_name(name);
    status->set_desired_generation(config.generation());
    status->set_desired_hash(config.content_hash());
    const auto& state = states.at(name);
    if (!state.ok()) {
      status->set_error(Message(state.status()));
      status->set_drift(true);
      continue;
    }
    status->set_applied_generation(state->applied_generation());
    status->set_applied_hash(state->applied_hash());
    status->set_drift(state->applied_hash() != config.content_hash());
    std::set<std::string> not_applied;
    for (const auto& item : state->items())
      if (item.state() == v1::ITEM_STATE_FAILED || item.state() == v1::ITEM_STATE_UNSUPPORTED) not_applied.insert(item.key());
    for (const auto& item : state->applied().items())
      if (item.has_qos() && !not_applied.count(item.key())) {
        status->mutable_applied_qos()->MergeFrom(item.qos().qos());
      }
    for (const auto& item : state->items()) {
      if (item.state() == v1::ITEM_STATE_FAILED) status->set_failed_items(status->failed_items() + 1);
      if (item.state() == v1::ITEM_STATE_UNSUPPORTED)
        status->set_unsupported_items(status->unsupported_items() + 1);
      if (item.state() == v1::ITEM_STATE_FAILED || item.state() == v1::ITEM_STATE_UNSUPPORTED)
        *status->add_not_applied() = item;
    }
  }
  return response;
}

absl::StatusOr<v1::HistoryResponse> Controller::History(uint32_t limit) {
  std::lock_guard lock(mu_);
  auto entries = store_.History(limit);
  if (!entries.ok()) return entries.status();
  v1::HistoryResponse response;
  for (auto& e : *entries) *response.add_entries() = std::move(e);
  return response;
}

Controller::TeState Controller::TeStatus() const {
  std::lock_guard lock(mu_);
  return TeStatusLocked();
}

Controller::TeState Controller::TeStatusLocked() const {
  TeState state;
  state.overrides = te_;
  if (auto drained = store_.Drained(); drained.ok()) state.drained = std::move(*drained);
  if (!UsesTe(target_))
    state.why_not = "no zone of the policy runs scheme te";
  else if (!running_ || running_->SerializeAsString() != target_.SerializeAsString())
    state.why_not = "the policy has not been rolled out yet (`rocefab config apply`)";
  else if (rollout_.active)
    state.why_not = StrCat("a rollout of generation ", rollout_.generation, " by ", rollout_.who, " is running");
  else if (frozen_)
    state.why_not = "the fabric runs a rolled-back config";
  else
    state.enabled = true;
  return state;
}

absl::StatusOr<uint64_t> Controller::SetTeOverrides(std::vector<TeOverride> overrides, const std::string& who,
                                                    const std::string& why) {
  std::lock_guard lock(mu_);
  if (const TeState state = TeStatusLocked(); !state.enabled)
    return absl::FailedPreconditionError(StrCat("TE is not running: ", state.why_not));
  if (overrides == te_) return generation_;
  std::vector<TeOverride> previous = std::move(te_);
  te_ = std::move(overrides);
  auto generation = RecompileLocked(who, why);
  if (!generation.ok()) te_ = std::move(previous);
  return generation;
}

}  // namespace rocefab::controller
