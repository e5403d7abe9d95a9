#include "collector/ingester.h"

#include "common/log.h"

namespace rocefab::collector {
namespace {
constexpr char kIngesterLog[] = "ingest";
}

Ingester::Ingester(Options options, Store& store, Queue<StoredBatch>* output,
                   CollectorMetrics& metrics, const Clock& clock)
    : options_(options), store_(store), output_(output), metrics_(metrics), clock_(clock) {
  last_progress_us_ = clock_.MonotonicUs();
  last_prune_us_ = last_progress_us_;
}

Ingester::~Ingester() { Stop(); }

void Ingester::Start() { thread_ = std::thread([this] { Loop(); }); }

void Ingester::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  if (output_) output_->Close();
}

void Ingester::Submit(v1::TelemetryBatch batch, Done done) {
  std::lock_guard lock(mu_);
  queue_.push_back({std::move(batch), std::move(done)});
  metrics_.ingest_queue_batches.Set(static_cast<double>(queue_.size()));
  cv_.notify_one();
}

int64_t Ingester::last_progress_us() const {
  std::lock_guard lock(mu_);
  return last_progress_us_;
}

size_t Ingester::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void Ingester::Loop() {
  for (;;) {
    std::deque<Item> group;
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(500),
                   [this] { return stopping_ || !queue_.empty(); });
      last_progress_us_ = clock_.MonotonicUs();
      if (queue_.empty() && stopping_) return;
      // Everything that arrived while the last commit ran goes into this one.
      while (!queue_.empty() && group.size() < options_.max_batches_per_commit) {
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      metrics_.ingest_queue_batches.Set(static_cast<double>(queue_.size()));
    }
    if (!group.empty()) CommitGroup(group);
    // Sealing and pruning are the store's own work, not the agents': done
    // when nothing waits for an ack, and under sustained load in slices of
    // at most 20 ms every 100 ms, so that sealing keeps up.
    const int64_t now = clock_.MonotonicUs();
    if (queued() == 0 || now - last_maintain_us_ >= 100'000) {
      last_maintain_us_ = now;
      Maintain(20'000);
    }
  }
}

void Ingester::Maintain(int64_t budget_us) {
  const int64_t now_wall = clock_.NowUs();
  const int64_t start = clock_.MonotonicUs();
  do {
    auto sealed = store_.SealRuns(now_wall, 4);
    if (!sealed.ok()) {
      LOG_ERROR(kIngesterLog, "sealing sample runs: ", sealed.status().message());
      break;
    }
    metrics_.runs_sealed.Increment(static_cast<double>(*sealed));
    if (*sealed == 0) break;
  } while (clock_.MonotonicUs() - start < budget_us);
  const int64_t now = clock_.MonotonicUs();
  if (options_.retention_us > 0 && now - last_prune_us_ >= options_.prune_every_us) {
    last_prune_us_ = now;
    auto pruned = store_.Prune(now_wall - options_.retention_us, hold_after_commit_.load(),
                               now_wall - options_.records_retention_us);
    if (pruned.ok()) metrics_.pruned_rows.Increment(static_cast<double>(*pruned));
    else LOG_ERROR(kIngesterLog, "retention: ", pruned.status().message());
  }
  if (now - last_measure_us_ >= 10'000'000) {
    last_measure_us_ = now;
    if (auto footprint = store_.MeasureSamples(); footprint.ok()) {
      metrics_.stored_samples.Set(static_cast<double>(footprint->samples));
      metrics_.stored_sample_bytes.Set(static_cast<double>(footprint->payload_bytes));
    }
  }
}

void Ingester::ResolveJobs(v1::TelemetryBatch& batch) {
  for (v1::CollectiveRecord& rec : *batch.mutable_collectives()) {
    if (!rec.job().empty()) continue;
    const std::string host = rec.host().empty() ? batch.agent_id() : rec.host();
    auto& [job, until] = host_job_[host];
    // The registry changes at job boundaries; a short cache spares a query
    // per record.
    if (rec.timestamp_us() > until || rec.timestamp_us() < until - 10'000'000) {
      auto found = store_.jobs().RunningOnHost(host, rec.timestamp_us());
      job = found.ok() ? *found : "";
      until = rec.timestamp_us() + 5'000'000;
    }
    if (!job.empty()) {
      rec.set_job(job);
      metrics_.collectives_job_from_registry.Increment();
    }
  }
}

void Ingester::CommitGroup(std::deque<Item>& group) {
  std::vector<const v1::TelemetryBatch*> batches;
  batches.reserve(group.size());
  for (Item& item : group) {
    if (!item.batch.collectives().empty()) ResolveJobs(item.batch);
    batches.push_back(&item.batch);
  }
  const int64_t start_us = clock_.MonotonicUs();
  auto outcomes = store_.WriteBatches(batches, clock_.NowUs());
  metrics_.commit_seconds.Observe(static_cast<double>(clock_.MonotonicUs() - start_us) / 1e6);
  if (!outcomes.ok()) {
    metrics_.store_errors.Increment();
    LOG_ERROR(kIngesterLog, "store failed, ", group.size(), " batches not acked: ",
              outcomes.status().message());
    for (Item& item : group) item.done(false, v1::ACK_STATUS_UNSPECIFIED);
    return;
  }
  metrics_.commits.Increment();
  int64_t newest_created_us = 0;
  for (size_t i = 0; i < group.size(); ++i) {
    const WriteOutcome& outcome = (*outcomes)[i];
    metrics_.samples_stored.Increment(static_cast<double>(outcome.samples_written));
    metrics_.samples_rejected.Increment(static_cast<double>(outcome.samples_rejected));
    if (outcome.status == v1::ACK_STATUS_STORED) {
      metrics_.batches_stored.Increment();
      newest_created_us = std::max(newest_created_us, group[i].batch.created_us());
    } else {
      metrics_.batches_duplicate.Increment();
    }
    // Counted before acked, so whoever sees the ack sees the count.
    group[i].done(true, outcome.status);
  }
  // Then to the observer: its queue may make this wait, but only after
  // every ack of the group is out.
  for (size_t i = 0; i < group.size() && output_; ++i) {
    const WriteOutcome& outcome = (*outcomes)[i];
    if (outcome.status != v1::ACK_STATUS_STORED) continue;
    const int64_t waited_us =
        output_->Push(std::make_shared<const v1::TelemetryBatch>(std::move(group[i].batch)),
                      std::max<size_t>(1, outcome.samples_written));
    if (waited_us > 0) metrics_.observe_backpressure_seconds.Increment(static_cast<double>(waited_us) / 1e6);
  }
  if (on_commit_) on_commit_(store_.last_commit());
  if (newest_created_us > 0)
    metrics_.ingest_lag_seconds.Set(static_cast<double>(clock_.NowUs() - newest_created_us) / 1e6);
}

}  // namespace rocefab::collector
