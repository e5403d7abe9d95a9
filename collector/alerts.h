#pragma once
// Alerts from anomalies (docs/operations.md).
//
// After each detector evaluation the Alerter turns the open root anomalies
// (and each job's own trouble) into alerts, one per (anomaly, job it
// touches), with labels alertname, severity, kind, entity, job and zone and
// annotations summary, evidence and runbook_url. An alert fires when its
// anomaly opens and resolves when it closes; silences mute matching alerts.
//
// Notifications go through a persistent outbox (a table in the collector's
// SQLite file) so that a restart loses none. A sender thread delivers them
// with retries and exponential backoff:
//  - to Alertmanager, POST /api/v2/alerts, firing alerts re-sent every
//    `resend_every` with endsAt four periods ahead, resolved ones with
//    endsAt = when they ended;
//  - to webhooks, the Alertmanager webhook JSON (version "4"), on every
//    change.
//
// Thread-safe: Evaluate runs on the ingester thread; queries from gRPC
// threads; delivery on its own thread.

#include <sqlite3.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "collector/collector_metrics.h"
#include "collector/detectors.h"
#include "collector/diagnosis.h"
#include "common/clock.h"
#include "common/sqlite.h"
#include "rocefab/v1/config.pb.h"
#include "rocefab/v1/diagnosis.pb.h"

namespace rocefab::collector {

struct AlertOptions {
  std::vector<std::string> alertmanager_urls;
  std::vector<std::string> webhook_urls;
  std::string playbook_base_url;
  int64_t resend_every_us = 60'000'000;
  int64_t max_age_us = 24LL * 3600 * 1'000'000;
};
absl::StatusOr<AlertOptions> ResolveAlertOptions(const v1::AlertingConfig& config);

// The notification bodies, exposed for tests.
std::string AlertmanagerBody(const std::vector<v1::Alert>& alerts, int64_t resend_every_us, int64_t now_us);
std::string WebhookBody(const v1::Alert& alert, const std::string& receiver);

class Alerter final {
 public:
  static absl::StatusOr<std::unique_ptr<Alerter>> Open(const std::string& db_path, AlertOptions options,
                                                       CollectorMetrics& metrics, const Clock& clock);
  ~Alerter();
  Alerter(const Alerter&) = delete;
  Alerter& operator=(const Alerter&) = delete;

  // Starts the sender thread (when any receiver is configured).
  void Start();
  void Stop();

  // Called (on the evaluating thread) for each alert that starts firing.
  void SetOnFiring(std::function<void(const v1::Alert&)> on_firing) { on_firing_ = std::move(on_firing); }

  // Reconciles alerts with the open anomalies; enqueues notifications.
  void Evaluate(const std::vector<v1::Anomaly>& active, const FabricContext& context,
                const std::set<std::string>& drained, int64_t now_us);

  absl::StatusOr<v1::ListAlertsResponse> List(bool include_resolved);
  absl::StatusOr<v1::SilenceResponse> AddSilence(v1::Silence silence);
  absl::Status RemoveSilence(uint64_t id);
  // Delivers what is due now (the sender thread's step; tests call it).
  size_t DeliverDue();

 private:
  Alerter(AlertOptions options, CollectorMetrics& metrics, const Clock& clock)
      : options_(std::move(options)), metrics_(metrics), clock_(clock) {}
  absl::Status Init(const std::string& db_path);
  void Enqueue(const std::string& target, const std::string& body, int64_t now_us);
  void SaveAlert(const v1::Alert& alert);
  std::vector<v1::Silence> ActiveSilences(int64_t now_us);
  void Notify(const std::vector<v1::Alert>& changed, bool state_change, int64_t now_us);
  void SenderLoop();

  AlertOptions options_;
  CollectorMetrics& metrics_;
  const Clock& clock_;
  std::mutex mu_;  // the connection and the maps
  sqlite::Db db_holder_;
  sqlite3* db_ = nullptr;
  std::map<std::string, v1::Alert> firing_;       // by fingerprint
  std::map<std::string, int64_t> last_sent_us_;   // to Alertmanager
  std::map<std::string, std::pair<int, Footprint>> footprints_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread sender_;
  std::function<void(const v1::Alert&)> on_firing_;
};

}  // namespace rocefab::collector
