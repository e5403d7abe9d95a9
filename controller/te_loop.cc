#include "controller/te_loop.h"

#include "common/log.h"
#include "common/strings.h"

namespace rocefab::controller {
namespace {

constexpr char kTeLoopLog[] = "te";
constexpr char kWho[] = "rocefab-controllerd/te";

}  // namespace

v1::TeLoopConfig ResolveTeLoopConfig(v1::TeLoopConfig config) {
  if (config.period_s() == 0) config.set_period_s(30);
  if (config.window_s() == 0) config.set_window_s(std::min<uint32_t>(config.period_s(), 300));
  if (config.min_gain() <= 0) config.set_min_gain(0.05);
  if (config.canary() == 0) config.set_canary(1);
  if (config.wave_size() == 0) config.set_wave_size(8);
  if (config.gate_seconds() == 0) config.set_gate_seconds(10);
  return config;
}

TeLoop::TeLoop(Controller& controller, std::shared_ptr<const Topology> topology, Gate& collectors,
               v1::TeLoopConfig config, const Clock& clock, prometheus::Registry* registry)
    : controller_(controller), topology_(std::move(topology)), collectors_(collectors),
      config_(ResolveTeLoopConfig(std::move(config))), clock_(clock) {
  if (registry == nullptr) return;
  runs_ = &prometheus::BuildCounter()
               .Name("rocefab_controller_te_runs_total")
               .Help("TE periods by result: idle, unchanged, applied, rolled-back, error")
               .Register(*registry);
  overrides_gauge_ = &prometheus::BuildGauge()
                          .Name("rocefab_controller_te_overrides")
                          .Help("TE overrides in the desired state")
                          .Register(*registry)
                          .Add({});
  auto& utilization = prometheus::BuildGauge()
                          .Name("rocefab_controller_te_max_link_utilization")
                          .Help("The busiest RTSW uplink or CTSW downlink as TE predicts it, by overrides "
                                "(running: those on the fabric; allocated: the latest allocation)")
                          .Register(*registry);
  current_gauge_ = &utilization.Add({{"overrides", "running"}});
  predicted_gauge_ = &utilization.Add({{"overrides", "allocated"}});
}

TeLoop::~TeLoop() { Stop(); }

void TeLoop::Start() { thread_ = std::thread([this] { Loop(); }); }

void TeLoop::RequestStop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

void TeLoop::Stop() {
  RequestStop();
  if (thread_.joinable()) thread_.join();
}

void TeLoop::Loop() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::seconds(config_.period_s()), [this] { return stop_; })) {
    lock.unlock();
    const Outcome outcome = RunOnce();
    if (outcome.result == "applied" || outcome.result == "rolled-back" || outcome.result == "error")
      LOG_INFO(kTeLoopLog, outcome.result, ": ", outcome.detail);
    lock.lock();
  }
}

void TeLoop::Count(const Outcome& outcome) {
  if (runs_ == nullptr) return;
  runs_->Add({{"result", outcome.result}}).Increment();
  overrides_gauge_->Set(static_cast<double>(outcome.overrides));
  current_gauge_->Set(outcome.current_max_utilization);
  predicted_gauge_->Set(outcome.predicted_max_utilization);
}

TeLoop::Outcome TeLoop::RunOnce() {
  Outcome out;
  auto finish = [&](std::string result, std::string detail) {
    out.result = std::move(result);
    out.detail = std::move(detail);
    Count(out);
    return out;
  };
  const Controller::TeState state = controller_.TeStatus();
  out.overrides = state.overrides.size();
  if (config_.disabled()) return finish("idle", "te.disabled is set");
  if (!state.enabled) return finish("idle", state.why_not);
  auto matrix = collectors_.TrafficMatrix(config_.window_s());
  if (!matrix.ok())
    return finish("error", StrCat("no traffic matrix, overrides kept: ", matrix.status().message()));
  std::vector<TeDemand> demands;
  for (const auto& d : matrix->demands()) demands.push_back({d.ingress(), d.dst_prefix(), d.bytes_per_s()});
  std::set<std::string> unusable = state.drained;
  unusable.insert(matrix->down_ports().begin(), matrix->down_ports().end());
  const TeEvaluation current = EvaluateTe(*topology_, demands, state.overrides, unusable);
  out.current_max_utilization = current.max_utilization;
  auto allocated = AllocateTe(*topology_, demands, unusable);
  if (!allocated.ok())
    return finish("error", StrCat("allocation failed, overrides kept: ", allocated.status().message()));
  out.predicted_max_utilization = allocated->max_utilization;
  const std::string figures =
      StrCat(demands.size(), " demands; busiest link ", Fixed(current.max_utilization, 3), " with the running ",
             state.overrides.size(), " overrides, ", Fixed(allocated->max_utilization, 3), " with ",
             allocated->overrides.size(), " new ones");
  if (allocated->overrides == state.overrides) return finish("unchanged", StrCat(figures, " (the same)"));
  std::string moved;
  if (current.broken > 0) StrAppend(&moved, current.broken, " override(s) on unusable links; ");
  if (current.uncovered > 0) StrAppend(&moved, current.uncovered, " demand(s) without an override; ");
  if (current.stale > 0) StrAppend(&moved, current.stale, " override(s) without a demand; ");
  if (moved.empty() && current.max_utilization - allocated->max_utilization < config_.min_gain())
    return finish("unchanged", StrCat(figures, ": gain below te.min_gain ", Fixed(config_.min_gain(), 2)));
  const std::string why = StrCat("TE: ", moved, figures);
  auto generation = controller_.SetTeOverrides(allocated->overrides, kWho, why);
  if (!generation.ok()) return finish("idle", std::string(generation.status().message()));
  out.generation = *generation;
  {
    std::lock_guard lock(mu_);
    if (stop_) return finish("idle", StrCat("generation ", *generation, " not rolled out: the controller is stopping"));
  }
  v1::ApplyRequest request;
  request.set_canary(config_.canary());
  request.set_wave_size(config_.wave_size());
  request.set_gate_seconds(config_.gate_seconds());
  request.set_why(why);
  auto applied = controller_.Apply(request, kWho);
  if (!applied.ok()) {
    // Another rollout began in between: it carries these overrides itself.
    return finish("idle", StrCat("generation ", *generation, " not rolled out by TE: ", applied.status().message()));
  }
  out.overrides = controller_.TeStatus().overrides.size();
  if (!applied->ok()) return finish("rolled-back", StrCat("generation ", *generation, ": ", applied->error()));
  return finish("applied", StrCat("generation ", *generation, ": ", why));
}

}  // namespace rocefab::controller
