#include "collector/collector_metrics.h"

#include "common/metrics.h"

namespace rocefab::collector {
namespace {

prometheus::Family<prometheus::Counter>& Batches(prometheus::Registry& registry) {
  return prometheus::BuildCounter()
      .Name("rocefab_collector_batches_total")
      .Help("Telemetry batches received, by outcome (stored, duplicate, rejected)")
      .Register(registry);
}

prometheus::Family<prometheus::Counter>& Notifications(prometheus::Registry& registry) {
  return prometheus::BuildCounter()
      .Name("rocefab_collector_notifications_total")
      .Help("Alert notification attempts to Alertmanager and webhooks, by result")
      .Register(registry);
}

}  // namespace

CollectorMetrics::CollectorMetrics(prometheus::Registry& registry)
    : batches_stored(Batches(registry).Add({{"result", "stored"}})),
      batches_duplicate(Batches(registry).Add({{"result", "duplicate"}})),
      batches_rejected(Batches(registry).Add({{"result", "rejected"}})),
      samples_stored(prometheus::BuildCounter()
                         .Name("rocefab_collector_samples_total")
                         .Help("Counter samples committed to the store")
                         .Register(registry)
                         .Add({})),
      samples_rejected(prometheus::BuildCounter()
                           .Name("rocefab_collector_samples_rejected_total")
                           .Help("Samples dropped because their counter is not in the vocabulary")
                           .Register(registry)
                           .Add({})),
      collectives_dropped(prometheus::BuildCounter()
                              .Name("rocefab_collector_collectives_dropped_total")
                              .Help("NCCL collective records dropped as malformed (over-long names, NaN "
                                    "timing); the rest of their batch is stored")
                              .Register(registry)
                              .Add({})),
      records_foreign(prometheus::BuildCounter()
                          .Name("rocefab_collector_foreign_records_dropped_total")
                          .Help("Entities and collective records an agent sent for another agent's "
                                "host or switch (not under its certificate identity); dropped")
                          .Register(registry)
                          .Add({})),
      components_dropped(prometheus::BuildCounter()
                             .Name("rocefab_collector_components_dropped_total")
                             .Help("Version components (TelemetryBatch.components) dropped: a name over 64 or a "
                                   "version over 128 bytes, or past 64 per batch; the rest of the batch is stored")
                             .Register(registry)
                             .Add({})),
      readings_future_dropped(prometheus::BuildCounter()
                                  .Name("rocefab_collector_future_readings_dropped_total")
                                  .Help("Readings and collective records dated beyond max_clock_skew "
                                        "ahead of the collector's clock; dropped")
                                  .Register(registry)
                                  .Add({})),
      readings_future_clipped(prometheus::BuildCounter()
                                  .Name("rocefab_collector_future_readings_clipped_total")
                                  .Help("Readings dated ahead of the collector's clock by less than "
                                        "max_clock_skew; stored at the receive time")
                                  .Register(registry)
                                  .Add({})),
      agent_clock_skew(prometheus::BuildGauge()
                           .Name("rocefab_agent_clock_skew_seconds")
                           .Help("The agent's latest batch creation time minus the collector's clock "
                                 "at receipt (positive: the agent runs ahead; includes transit)")
                           .Register(registry)),
      rpcs_denied(AddDeniedRpcs(registry)),
      store_errors(prometheus::BuildCounter()
                       .Name("rocefab_collector_store_errors_total")
                       .Help("Failed store transactions (their batches were not acked)")
                       .Register(registry)
                       .Add({})),
      commits(prometheus::BuildCounter()
                  .Name("rocefab_collector_commits_total")
                  .Help("Store transactions committed")
                  .Register(registry)
                  .Add({})),
      pruned_rows(prometheus::BuildCounter()
                      .Name("rocefab_collector_pruned_rows_total")
                      .Help("Rows deleted by retention")
                      .Register(registry)
                      .Add({})),
      streams_cancelled(prometheus::BuildCounter()
                            .Name("rocefab_collector_streams_cancelled_total")
                            .Help("Agent streams that ended without a clean close (agent gone, "
                                  "network cut, keepalive timeout)")
                            .Register(registry)
                            .Add({})),
      connected_agents(prometheus::BuildGauge()
                           .Name("rocefab_collector_connected_agents")
                           .Help("Agents with an open telemetry stream")
                           .Register(registry)
                           .Add({})),
      ingest_queue_batches(prometheus::BuildGauge()
                               .Name("rocefab_collector_ingest_queue_batches")
                               .Help("Batches received but not yet committed")
                               .Register(registry)
                               .Add({})),
      observe_queue_batches(prometheus::BuildGauge()
                                .Name("rocefab_collector_observe_queue_batches")
                                .Help("Committed batches waiting for the detectors and latest values")
                                .Register(registry)
                                .Add({})),
      observe_backpressure_seconds(
          prometheus::BuildCounter()
              .Name("rocefab_collector_observe_backpressure_seconds_total")
              .Help("Time the store waited for the detectors and latest values to catch up "
                    "(their queue was full)")
              .Register(registry)
              .Add({})),
      runs_sealed(prometheus::BuildCounter()
                      .Name("rocefab_collector_sample_runs_sealed_total")
                      .Help("Sample runs re-encoded as one compressed block")
                      .Register(registry)
                      .Add({})),
      stored_samples(prometheus::BuildGauge()
                         .Name("rocefab_collector_stored_samples")
                         .Help("Counter samples held in the local store")
                         .Register(registry)
                         .Add({})),
      stored_sample_bytes(prometheus::BuildGauge()
                              .Name("rocefab_collector_stored_sample_bytes")
                              .Help("Compressed bytes of the counter samples in the local store")
                              .Register(registry)
                              .Add({})),
      ingest_lag_seconds(prometheus::BuildGauge()
                             .Name("rocefab_collector_ingest_lag_seconds")
                             .Help("Commit time minus creation time of the newest committed batch")
                             .Register(registry)
                             .Add({})),
      commit_seconds(prometheus::BuildHistogram()
                         .Name("rocefab_collector_commit_seconds")
                         .Help("Duration of store transactions")
                         .Register(registry)
                         .Add({}, prometheus::Histogram::BucketBoundaries{
                                      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1})),
      anomalies_opened(prometheus::BuildCounter()
                           .Name("rocefab_collector_anomalies_opened_total")
                           .Help("Anomalies the detectors opened")
                           .Register(registry)
                           .Add({})),
      anomalies_active(prometheus::BuildGauge()
                           .Name("rocefab_collector_anomalies_active")
                           .Help("Anomalies open now")
                           .Register(registry)
                           .Add({})),
      collectives_job_from_registry(prometheus::BuildCounter()
                                        .Name("rocefab_collector_collectives_job_from_registry_total")
                                        .Help("Collective records without a job id, given one by the "
                                              "job registry (host and time)")
                                        .Register(registry)
                                        .Add({})),
      evaluate_seconds(prometheus::BuildHistogram()
                           .Name("rocefab_collector_detector_evaluate_seconds")
                           .Help("Duration of one detector evaluation")
                           .Register(registry)
                           .Add({}, prometheus::Histogram::BucketBoundaries{
                                        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25})),
      alerts_firing(prometheus::BuildGauge()
                        .Name("rocefab_collector_alerts_firing")
                        .Help("Alerts firing (silenced ones included)")
                        .Register(registry)
                        .Add({})),
      notifications_delivered(Notifications(registry).Add({{"result", "delivered"}})),
      notifications_retried(Notifications(registry).Add({{"result", "retried"}})),
      notifications_dropped(Notifications(registry).Add({{"result", "dropped"}})),
      outbox_pending(prometheus::BuildGauge()
                         .Name("rocefab_collector_outbox_pending")
                         .Help("Alert notifications waiting for delivery")
                         .Register(registry)
                         .Add({})) {}

}  // namespace rocefab::collector
