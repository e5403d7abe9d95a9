#include "collector/observe/observer.h"

#include "common/log.h"

namespace rocefab::collector {
namespace {
constexpr char kObserverLog[] = "observe";
}

Observer::Observer(Queue<StoredBatch>& input, LatestValues& latest, Detectors* detectors,
                   std::function<FabricContext()> context, Evaluated evaluated, Store& store,
                   CollectorMetrics& metrics, const Clock& clock)
    : input_(input),
      latest_(latest),
      detectors_(detectors),
      context_(std::move(context)),
      evaluated_(std::move(evaluated)),
      store_(store),
      metrics_(metrics),
      clock_(clock) {
  last_progress_us_ = clock_.MonotonicUs();
}

Observer::~Observer() { Stop(); }

void EvaluatedThrough::Publish(const std::map<std::string, int64_t>& newest_created_us) {
  if (newest_created_us.empty()) return;
  {
    std::lock_guard lock(mu_);
    for (const auto& [agent, created] : newest_created_us) {
      int64_t& through = through_[agent];
      through = std::max(through, created);
    }
  }
  cv_.notify_all();
}

std::vector<std::string> EvaluatedThrough::WaitFor(const std::vector<std::string>& agents, int64_t after_us,
                                                   std::chrono::milliseconds timeout) const {
  std::vector<std::string> behind;
  std::unique_lock lock(mu_);
  auto pending = [&] {
    behind.clear();
    for (const auto& agent : agents) {
      auto it = through_.find(agent);
      if (it != through_.end() && it->second < after_us) behind.push_back(agent);
    }
    return !behind.empty();
  };
  cv_.wait_for(lock, timeout, [&] { return !pending(); });
  return behind;
}

void Observer::Start() { thread_ = std::thread([this] { Loop(); }); }

void Observer::Stop() {
  if (thread_.joinable()) thread_.join();
}

void Observer::Loop() {
  const int64_t idle_wait_us =
      detectors_ ? std::min<int64_t>(1'000'000, detectors_->settings().evaluate_every_us) : 1'000'000;
  std::vector<StoredBatch> batches;
  for (;;) {
    batches.clear();
    const int64_t wait_us = fresh_data_ ? 100'000 : idle_wait_us;
    const bool open = input_.PopAll(&batches, std::chrono::microseconds(wait_us));
    last_progress_us_ = clock_.MonotonicUs();
    if (!open) return;
    for (const StoredBatch& batch : batches) {
      latest_.Update(*batch);
      if (detectors_) detectors_->Observe(*batch);
      if (traffic_rates_) traffic_rates_->Observe(*batch);
      int64_t& newest = observed_created_us_[batch->agent_id()];
      newest = std::max(newest, batch->created_us());
    }
    if (!batches.empty()) fresh_data_ = true;
    metrics_.observe_queue_batches.Set(static_cast<double>(input_.size()));
    // New data is judged as soon as it is stored (at most every 100 ms);
    // without any, evaluation still runs so stalls are noticed and quiet
    // anomalies close.
    if (detectors_) {
      const int64_t since = clock_.MonotonicUs() - last_evaluate_us_;
      // A storm the fast path just saw is judged at once.
      const bool urgent = detectors_->TakeUrgent();
      if (urgent || (fresh_data_ && since >= 100'000) || since >= detectors_->settings().evaluate_every_us) {
        fresh_data_ = false;
        Evaluate();
      }
    }
  }
}

void Observer::Evaluate() {
  last_evaluate_us_ = clock_.MonotonicUs();
  const int64_t start = last_evaluate_us_;
  const FabricContext context = context_ ? context_() : FabricContext{};
  auto changes = detectors_->Evaluate(clock_.NowUs(), context);
  for (const v1::Anomaly& a : changes)
    if (a.detected_us() == a.updated_us() && a.end_us() == 0) metrics_.anomalies_opened.Increment();
  if (auto status = store_.anomalies().Write(changes); !status.ok()) {
    metrics_.store_errors.Increment();
    LOG_ERROR(kObserverLog, "storing anomalies: ", status.message());
  }
  metrics_.anomalies_active.Set(static_cast<double>(detectors_->active_count()));
  if (evaluated_) evaluated_(*detectors_, context);
  evaluated_through_.Publish(observed_created_us_);
  observed_created_us_.clear();
  metrics_.evaluate_seconds.Observe(static_cast<double>(clock_.MonotonicUs() - start) / 1e6);
}

}  // namespace rocefab::collector
