#pragma once
// The observe module: what the collector learns from stored telemetry. It
// takes committed batches from its input queue, keeps the latest values
// (/metrics) and feeds the detectors, evaluates them (at most every 100 ms
// while data flows, at least every `evaluate_every_us`), stores their
// anomalies and hands each evaluation to `evaluated` (alerts, gauges).
//
// It runs on its own thread, off the commit path: a slow evaluation or a
// /metrics scrape holding LatestValues delays observation, never an ack.
// Owns its thread; Start() once, Stop() closes the queue and joins.

#include <functional>
#include <memory>
#include <thread>

#include "collector/collector_metrics.h"
#include "collector/detectors.h"
#include "collector/latest_values.h"
#include "collector/store.h"
#include "common/clock.h"
#include "common/queue.h"

namespace rocefab::collector {

using StoredBatch = std::shared_ptr<const v1::TelemetryBatch>;

class Observer final {
 public:
  using Evaluated = std::function<void(const Detectors&, const FabricContext&)>;

  // `detectors` may be null (latest values only). `input` is closed by the
  // producer (the store module) at shutdown.
  Observer(Queue<StoredBatch>& input, LatestValues& latest, Detectors* detectors,
           std::function<FabricContext()> context, Evaluated evaluated, Store& store,
           CollectorMetrics& metrics, const Clock& clock);
  ~Observer();
  Observer(const Observer&) = delete;
  Observer& operator=(const Observer&) = delete;

  void Start();
  // Drains the queue (it must be closed) and joins the thread.
  void Stop();
  int64_t last_progress_us() const { return last_progress_us_.load(); }

 private:
  void Loop();
  void Evaluate();

  Queue<StoredBatch>& input_;
  LatestValues& latest_;
  Detectors* detectors_;
  std::function<FabricContext()> context_;
  Evaluated evaluated_;
  Store& store_;
  CollectorMetrics& metrics_;
  const Clock& clock_;
  std::atomic<int64_t> last_progress_us_{0};
  int64_t last_evaluate_us_ = 0;
  bool fresh_data_ = false;
  std::thread thread_;
};

}  // namespace rocefab::collector
