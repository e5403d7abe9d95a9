// The rollout: canary, waves, gates, abort and rollback (controller.h).
#include <algorithm>

#include "common/log.h"
#include "common/strings.h"
#include "controller/compiler.h"
#include "controller/controller.h"

namespace rocefab::controller {
namespace {

constexpr char kRolloutLog[] = "rollout";

std::string Join(const std::map<std::string, std::string>& failures) {
  std::string out;
  for (const auto& [name, why] : failures) StrAppend(&out, out.empty() ? "" : "; ", name, ": ", why);
  return out;
}

}  // namespace

absl::StatusOr<v1::ApplyResponse> Controller::Apply(const v1::ApplyRequest& request, const std::string& who) {
  v1::ApplyResponse response;
  std::map<std::string, v1::SwitchConfig> desired;
  uint64_t generation;
  {
    std::lock_guard lock(mu_);
    if (rollout_.active)
      return absl::FailedPreconditionError(StrCat("a rollout of generation ", rollout_.generation, " by ",
                                                  rollout_.who, " is running; wait for it or `rocefab config abort`"));
    rollout_ = Rollout{.active = true, .generation = generation_, .who = who};
    desired = desired_;
    generation = generation_;
  }
  auto finish = [&] {
    std::lock_guard lock(mu_);
    rollout_ = Rollout{};
  };
  response.set_generation(generation);
  const bool skip_unreachable = config_.unreachable() == "skip";
  // Only switches whose applied config differs are touched, in name order;
  // the canary wave goes first.
  std::vector<std::string> names;
  for (const auto& [name, config] : desired) names.push_back(name);
  std::vector<std::string> todo, unreachable;
  std::map<std::string, v1::SwitchConfig> previous;
  for (const auto& [name, state] : GetStates(fleet_, names)) {
    if (!state.ok()) {
      unreachable.push_back(StrCat(name, " (", state.status().message(), ")"));
      if (skip_unreachable) response.add_skipped(name);
      continue;
    }
    const v1::SwitchConfig& config = desired.at(name);
    if (state->applied_hash() == config.content_hash() && state->applied_generation() == config.generation())
      continue;
    previous[name] = state->applied();
    todo.push_back(name);
  }
  if (!unreachable.empty() && !skip_unreachable) {
    std::string list;
    for (const auto& u : unreachable) StrAppend(&list, list.empty() ? "" : ", ", u);
    response.set_error(StrCat("cannot reach ", list, "; nothing applied (`unreachable: skip` in the "
                              "controller's config rolls out around them)"));
    finish();
    return response;
  }
  const uint32_t canary = request.canary() == 0 ? 1 : request.canary();
  const uint32_t wave_size = request.wave_size() == 0 ? 8 : request.wave_size();
  std::vector<std::vector<std::string>> waves;
  for (size_t i = 0; i < todo.size();) {
    const size_t n = waves.empty() ? canary : wave_size;
    waves.emplace_back(todo.begin() + i, todo.begin() + std::min(todo.size(), i + n));
    i += n;
  }
  if (request.dry_run()) {
    for (size_t w = 0; w < waves.size(); ++w) {
      auto* report = response.add_waves();
      report->set_wave(static_cast<uint32_t>(w));
      for (const auto& name : waves[w]) report->add_switches(name);
      report->set_detail("dry run: nothing applied");
    }
    response.set_ok(true);
    finish();
    return response;
  }
  {
    std::lock_guard lock(mu_);
    rollout_.waves = waves.size();
  }
  Audit(who, "apply-start", StrCat(todo.size(), " switches"), request.why(),
        StrCat(waves.size(), " waves, canary ", canary, ", wave size ", wave_size, ", gate ", request.gate_seconds(),
               "s", response.skipped().empty() ? "" : StrCat(", ", response.skipped_size(), " unreachable skipped")),
        generation);
  std::vector<std::string> touched;
  std::string failure;
  for (size_t w = 0; w < waves.size() && failure.empty(); ++w) {
    {
      std::lock_guard lock(mu_);
      if (rollout_.abort) {
        failure = rollout_.abort_reason;
        response.set_aborted(true);
        break;
      }
      rollout_.wave = w;
      for (const auto& name : waves[w]) rollout_.on_target.insert(name);
    }
    auto* report = response.add_waves();
    report->set_wave(static_cast<uint32_t>(w));
    for (const auto& name : waves[w]) report->add_switches(name);
    const int64_t wave_start_us = clock_.NowUs();
    std::set<std::string> lost;
    auto failures = PushNewest(waves[w], &lost);
    std::vector<std::string> applied;
    for (const auto& name : waves[w]) {
      if (lost.count(name) && skip_unreachable) {
        response.add_skipped(name);
        failures.erase(name);
        std::lock_guard lock(mu_);
        rollout_.on_target.erase(name);
        continue;
      }
      touched.push_back(name);
      applied.push_back(name);
    }
    report->set_applied(failures.empty());
    if (!failures.empty()) {
      failure = Join(failures);
      report->set_detail(failure);
      break;
    }
    // The gate is an observation window: watch the touched switches for it.
    // An abort ends the wait at once.
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(request.gate_seconds()), [this] { return rollout_.abort; });
      if (rollout_.abort) {
        failure = rollout_.abort_reason;
        response.set_aborted(true);
        report->set_detail(failure);
        break;
      }
    }
    const std::string gate = applied.empty() ? "" : HealthGate(applied, wave_start_us, request.gate_seconds() > 0);
    report->set_gate_passed(gate.empty());
    if (!gate.empty()) {
      failure = StrCat("health gate after wave ", w, ": ", gate);
      report->set_detail(gate);
    }
  }
  if (failure.empty()) {
    {
      std::lock_guard lock(mu_);
      if (response.skipped().empty()) {
        // Everything reached: the fabric runs the target now.
        running_ = target_;
        running_te_ = te_;
        fallback_.clear();
        if (auto s = store_.SetRunningPolicy(generation, target_); !s.ok())
          LOG_ERROR(kRolloutLog, "recording the running policy: ", s.message());
      }
      rollout_ = Rollout{};
      ++activity_.rollouts_applied;
    }
    response.set_ok(true);
    Audit(who, "apply-done", StrCat(touched.size(), " switches"), request.why(),
          response.skipped().empty() ? "" : StrCat(response.skipped_size(), " unreachable switch(es) skipped"),
          generation);
    return response;
  }
  RollBack(touched, previous, who, request.why(), &failure, &response);
  return response;
}

void Controller::RollBack(const std::vector<std::string>& touched,
                          const std::map<std::string, v1::SwitchConfig>& previous, const std::string& who,
                          const std::string& why, std::string* failure, v1::ApplyResponse* response) {
  uint64_t rollback_generation = 0;
  {
    std::lock_guard lock(mu_);
    rollout_.on_target.clear();
    if (running_) {
      // The policy the fabric ran is the target again: later drains and
      // applies start from it, not from the rejected one.
      target_ = *running_;
      te_ = running_te_;
      auto recompiled = RecompileLocked(who, StrCat("rollback: ", *failure));
      if (!recompiled.ok()) StrAppend(failure, "; recompiling the running policy failed: ", recompiled.status().message());
    } else {
      // No policy ever completed: put back what each touched switch had, as
      // a new generation (an agent never goes back in generation numbers),
      // and freeze it: a drain cannot recompute it from the rejected policy.
      const uint64_t next = generation_ + 1;
      std::map<std::string, v1::SwitchConfig> restored = desired_;
      for (auto& [name, config] : restored) {
        auto it = previous.find(name);
        if (it == previous.end() && std::find(touched.begin(), touched.end(), name) == touched.end()) {
          config.set_generation(next);
          config.set_content_hash(ContentHash(config));
          continue;
        }
        config = it != previous.end() ? it->second : v1::SwitchConfig();
        config.set_switch_name(name);
        config.set_generation(next);
        config.set_content_hash(ContentHash(config));
      }
      if (auto s = store_.SaveDesired(next, restored); !s.ok()) StrAppend(failure, "; saving the rollback: ", s.message());
      generation_ = next;
      desired_ = std::move(restored);
      fallback_.clear();
      frozen_ = true;
    }
    rollback_generation = generation_;
  }
  for (const auto& [name, why_failed] : PushNewest(touched))
    StrAppend(failure, "; rollback of ", name, " failed: ", why_failed);
  {
    std::lock_guard lock(mu_);
    rollout_ = Rollout{};
    ++(response->aborted() ? activity_.rollouts_aborted : activity_.rollouts_rolled_back);
  }
  response->set_rolled_back(true);
  response->set_error(*failure);
  Audit(who, response->aborted() ? "abort" : "rollback", StrCat(touched.size(), " switches"), why, *failure,
        rollback_generation);
  LOG_WARN(kRolloutLog, "rollout rolled back to generation ", rollback_generation, ": ", *failure);
}

v1::AbortResponse Controller::Abort(const std::string& why, const std::string& who) {
  v1::AbortResponse response;
  {
    std::lock_guard lock(mu_);
    if (!rollout_.active) return response;
    rollout_.abort = true;
    rollout_.abort_reason = StrCat("aborted by ", who, why.empty() ? "" : ": ", why);
    response.set_aborting(true);
    response.set_generation(rollout_.generation);
  }
  cv_.notify_all();
  return response;
}

void Controller::Shutdown() { Abort("the controller is stopping", "rocefab-controllerd"); }

}  // namespace rocefab::controller
