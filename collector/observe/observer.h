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

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>
#include <memory>
#include <thread>

#include "collector/collector_metrics.h"
#include "collector/detectors.h"
#include "collector/latest_values.h"
#include "collector/store.h"
#include "collector/traffic_matrix.h"
#include "common/clock.h"
#include "common/queue.h"

namespace rocefab::collector {

using StoredBatch = std::shared_ptr<const v1::TelemetryBatch>;

// How far the detectors' evaluations have got, per agent: the newest batch
// creation time of each agent that an evaluation has taken in. Health gates
// wait on it instead of on the clock. Thread-safe.
class EvaluatedThrough final {
 public:
  // After an evaluation: these agents' batches up to these times are in.
  void Publish(const std::map<std::string, int64_t>& newest_created_us);
  // Waits until every agent of `agents` that this collector has evaluated
  // at least once is evaluated through `after_us`; returns those it did
  // not hold for when `timeout` passed.
  std::vector<std::string> WaitFor(const std::vector<std::string>& agents, int64_t after_us,
                                   std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<std::string, int64_t> through_;
};

class Observer final {
 public:
  using Evaluated = std::function<void(const Detectors&, const FabricContext&)>;

  // `detectors` may be null (latest values only). `input` is closed by the
  // producer (the store module) at shutdown.
  Observer(Queue<StoredBatch>& input, LatestValues& latest, Detectors* detectors,
           std::function<FabricContext()> context, Evaluated evaluated, Store& store,
           CollectorMetrics& metrics, const Clock& clock);
  ~Observer();
  const EvaluatedThrough& evaluated_through() const { return evaluated_through_; }
  Observer(const Observer&) = delete;
  Observer& operator=(const Observer&) = delete;

  void Start();
  // Drains the queue (it must be closed) and joins the thread.
  void Stop();
  int64_t last_progress_us() const { return last_progress_us_.load(); }
  // Also feeds every batch to `rates` (the TE traffic matrix); before Start.
  void SetTrafficRates(TrafficRates* rates) { traffic_rates_ = rates; }

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
  std::map<std::string, int64_t> observed_created_us_;  // since the last evaluation
  EvaluatedThrough evaluated_through_;
  TrafficRates* traffic_rates_ = nullptr;
  std::thread thread_;
};

}  // namespace rocefab::collector
