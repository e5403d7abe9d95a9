#pragma once
// The collector's self-metrics, declared in one place and registered on an
// injected registry.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace rocefab::collector {

struct CollectorMetrics {
  explicit CollectorMetrics(prometheus::Registry& registry);

  prometheus::Counter& batches_stored;
  prometheus::Counter& batches_duplicate;
  prometheus::Counter& batches_rejected;
  prometheus::Counter& samples_stored;
  prometheus::Counter& samples_rejected;
  prometheus::Counter& collectives_dropped;
  // Entities and collective records an agent sent for someone else.
  prometheus::Counter& records_foreign;
  prometheus::Counter& components_dropped;
  prometheus::Counter& readings_future_dropped;
  prometheus::Counter& readings_future_clipped;
  prometheus::Family<prometheus::Gauge>& agent_clock_skew;
  prometheus::Family<prometheus::Counter>& rpcs_denied;
  prometheus::Counter& store_errors;
  prometheus::Counter& commits;
  prometheus::Counter& pruned_rows;
  prometheus::Counter& streams_cancelled;
  prometheus::Gauge& connected_agents;
  prometheus::Gauge& ingest_queue_batches;
  prometheus::Gauge& observe_queue_batches;
  prometheus::Counter& observe_backpressure_seconds;
  prometheus::Counter& runs_sealed;
  prometheus::Gauge& stored_samples;
  prometheus::Gauge& stored_sample_bytes;
  prometheus::Gauge& ingest_lag_seconds;
  prometheus::Histogram& commit_seconds;
  prometheus::Counter& anomalies_opened;
  prometheus::Gauge& anomalies_active;
  prometheus::Counter& collectives_job_from_registry;
  prometheus::Histogram& evaluate_seconds;
  prometheus::Gauge& alerts_firing;
  prometheus::Counter& notifications_delivered;
  prometheus::Counter& notifications_retried;
  prometheus::Counter& notifications_dropped;
  prometheus::Gauge& outbox_pending;
};

}  // namespace rocefab::collector
