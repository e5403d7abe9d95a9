#include "collector/observe/observer.h"

#include "common/log.h"

namespace rocefab::collector {
namespace {
constexpr char kLog[] = "observe";
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
    }
    if (!batches.empty()) fresh_data_ = true;
    metrics_.observe_queue_batches.Set(static_cast<double>(input_.size()));
    // New data is judged as soon as it is stored (at most every 100 ms);
    // without any, evaluation still runs so stalls are noticed and quiet
    // anomalies close.
    if (detectors_) {
      const int64_t since = clock_.MonotonicUs() - last_evaluate_us_;
      if ((fresh_data_ && since >= 100'000) || since >= detectors_->settings().evaluate_every_us) {
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
    LOG_ERROR(kLog, "storing anomalies: ", status.message());
  }
  metrics_.anomalies_active.Set(static_cast<double>(detectors_->active_count()));
  if (evaluated_) evaluated_(*detectors_, context);
  metrics_.evaluate_seconds.Observe(static_cast<double>(clock_.MonotonicUs() - start) / 1e6);
}

}  // namespace rocefab::collector
