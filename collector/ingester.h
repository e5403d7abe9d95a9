#pragma once
// The collector's single writer. Streams submit batches; the ingester thread
// stores whatever has queued up in one transaction (group commit), then calls
// each batch's callback with its ack. A callback runs only after the commit,
// so an ack always means "durably stored". It also applies retention.
//
// Submit is thread-safe. Callbacks run on the ingester thread and must not
// block.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "collector/collector_metrics.h"
#include "collector/detectors.h"
#include "collector/latest_values.h"
#include "collector/store.h"
#include "common/clock.h"

namespace rocefab::collector {

class Ingester final {
 public:
  // ok=false means the store failed and the batch was not stored.
  using Done = std::function<void(bool ok, v1::AckStatus status)>;

  struct Options {
    int64_t retention_us = 7LL * 86400 * 1000000;
    int64_t prune_every_us = 60LL * 1000000;
    size_t max_batches_per_commit = 1024;
  };

  Ingester(Options options, Store& store, LatestValues& latest, CollectorMetrics& metrics,
           const Clock& clock);
  ~Ingester();
  Ingester(const Ingester&) = delete;
  Ingester& operator=(const Ingester&) = delete;

  void Start();
  // Stores what is queued, then stops the thread.
  void Stop();
  void Submit(v1::TelemetryBatch batch, Done done);
  // Runs `detectors` on this thread: every stored batch is observed, and
  // every `evaluate_every` the detectors evaluate with the context from
  // `context`; their anomalies go to the store. Call before Start.
  // `evaluated` (optional) runs after each evaluation, on this thread.
  void SetDetectors(Detectors* detectors, std::function<FabricContext()> context,
                    std::function<void(const Detectors&, const FabricContext&)> evaluated = nullptr);
  // Monotonic time of the last loop iteration, for the watchdog.
  int64_t last_progress_us() const;
  size_t queued() const;

 private:
  struct Item {
    v1::TelemetryBatch batch;
    Done done;
  };
  void Loop();
  void CommitGroup(std::deque<Item>& group);
  void Evaluate();
  // Collective records without a job get the registry's job on their host.
  void ResolveJobs(v1::TelemetryBatch& batch);

  Options options_;
  Store& store_;
  LatestValues& latest_;
  CollectorMetrics& metrics_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  int64_t last_progress_us_ = 0;
  int64_t last_prune_us_ = 0;
  std::thread thread_;
  Detectors* detectors_ = nullptr;
  std::function<FabricContext()> context_;
  std::function<void(const Detectors&, const FabricContext&)> evaluated_;
  int64_t last_evaluate_us_ = 0;
  bool fresh_data_ = false;
  std::unordered_map<std::string, std::pair<std::string, int64_t>> host_job_;  // host -> (job, until)
};

}  // namespace rocefab::collector
