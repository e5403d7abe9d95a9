#pragma once
// The store module: the collector's single writer. Streams submit batches;
// the ingester thread stores whatever has queued up in one transaction (group
// commit), then calls each batch's callback with its ack. A callback runs
// only after the commit, so an ack always means "durably stored". Stored
// batches then go to the output queue (the observe module) by pointer; after
// the acks it seals sample runs and applies retention.
//
// Submit is thread-safe. Callbacks run on the ingester thread and must not
// block.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "collector/collector_metrics.h"
#include "collector/observe/observer.h"
#include "collector/store.h"
#include "common/clock.h"

namespace rocefab::collector {

class Ingester final {
 public:
  // ok=false means the store failed and the batch was not stored.
  using Done = std::function<void(bool ok, v1::AckStatus status)>;

  struct Options {
    int64_t retention_us = 7LL * 86400 * 1000000;
    int64_t records_retention_us = 30LL * 86400 * 1000000;  // closed anomalies
    int64_t prune_every_us = 60LL * 1000000;
    size_t max_batches_per_commit = 1024;
  };

  // `output` (may be null) receives every newly stored batch; it is closed
  // when the ingester stops.
  Ingester(Options options, Store& store, Queue<StoredBatch>* output, CollectorMetrics& metrics,
           const Clock& clock);
  ~Ingester();
  Ingester(const Ingester&) = delete;
  Ingester& operator=(const Ingester&) = delete;

  void Start();
  // Stores what is queued, then stops the thread and closes the output.
  void Stop();
  void Submit(v1::TelemetryBatch batch, Done done);
  // Samples of commits after this one are kept by retention (remote-write
  // has not sent them yet). Any thread.
  void HoldAfterCommit(uint64_t commit) { hold_after_commit_.store(commit); }
  // Called on the ingester thread after each commit with its id (export
  // modules follow the store). Call before Start.
  void SetCommitListener(std::function<void(uint64_t)> listener) { on_commit_ = std::move(listener); }
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
  // Seals sample runs for up to `budget_us`, then prunes when due.
  void Maintain(int64_t budget_us);
  // Collective records without a job get the registry's job on their host.
  void ResolveJobs(v1::TelemetryBatch& batch);

  Options options_;
  Store& store_;
  Queue<StoredBatch>* output_;
  CollectorMetrics& metrics_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  int64_t last_progress_us_ = 0;
  int64_t last_prune_us_ = 0;
  std::thread thread_;
  std::atomic<uint64_t> hold_after_commit_{UINT64_MAX};
  int64_t last_measure_us_ = 0;
  int64_t last_maintain_us_ = 0;
  std::function<void(uint64_t)> on_commit_;
  std::unordered_map<std::string, std::pair<std::string, int64_t>> host_job_;  // host -> (job, until)
};

}  // namespace rocefab::collector
