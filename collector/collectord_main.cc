// rocefab-collectord: stores agent telemetry and serves queries and /metrics.
//
// A pipeline of modules on queues (docs/architecture.md, "Collector"):
//   receive: TelemetryService reactors decode and validate on gRPC threads
//   store:   Ingester group-commits to the Store, then acks
//   observe: Observer keeps latest values and runs the detectors
//   export:  /metrics (LatestValues, DiagnosisMetrics), Alerter, remote-write
//   query:   QueryService reads the Store's reader connection
// main only wires them, starts them in that order and stops them in reverse.
#include "common/program_main.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>

#include "collector/collector_metrics.h"
#include "collector/detectors.h"
#include "collector/diagnosis_metrics.h"
#include "collector/export/remote_write.h"
#include "collector/history/promql_history.h"
#include "collector/fabric_context.h"
#include "collector/ingester.h"
#include "collector/latest_values.h"
#include "collector/observe/observer.h"
#include "collector/query_service.h"
#include "collector/remediation.h"
#include "collector/store.h"
#include "collector/telemetry_service.h"
#include "common/authz.h"
#include "common/daemon_setup.h"
#include "common/duration.h"
#include "common/grpc_util.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/sd_notify.h"


int RocefabCollectordMain(int argc, char** argv) {
  using namespace rocefab;
  SetUpDaemonProcess();
  CLI::App app{
      "rocefab-collectord: receives telemetry from rocefab-hostd and rocefab-switchd, stores it "
      "in SQLite, and serves the rocefab CLI (gRPC) and Prometheus (/metrics).\n"
      "Flags override the config file; the config file overrides the defaults."};
  app.get_formatter()->column_width(36);
  std::string config_path, listen = "0.0.0.0:9410", db = "/var/lib/rocefab/collector.db",
                           retention_text = "7d", log_level = "info";
  app.add_option("--config", config_path, "YAML config file (keys: see deploy/config/collectord.yaml)")
      ->check(CLI::ExistingFile);
  app.add_option("--listen", listen, "gRPC address for agents and the CLI (port 0 picks one)")
      ->capture_default_str();
  app.add_option("--db", db, "SQLite database file")->capture_default_str();
  MetricsFlags metrics_flags{.listen = "0.0.0.0:9411"};
  AddMetricsFlags(app, &metrics_flags, "Prometheus /metrics address");
  app.add_option("--retention", retention_text, "how long samples are kept, e.g. 7d, 12h")
      ->capture_default_str();
  std::string topology_path, controller;
  std::vector<std::string> alertmanagers, webhooks, auto_playbooks, remote_writes;
  std::string playbooks_dir;
  app.add_option("--auto-playbook", auto_playbooks,
                 "PLAYBOOK:KIND: run this playbook by itself when an alert of KIND fires, e.g. "
                 "drain_flapping_link:link_flap (repeatable; at most 2 runs an hour, 30 min per target)");
  app.add_option("--playbooks-dir", playbooks_dir, "where machine-run playbooks are (default "
                                                   "/usr/share/rocefab/playbooks/auto)");
  app.add_option("--alertmanager", alertmanagers, "Alertmanager base URL to push alerts to (repeatable)");
  app.add_option("--webhook", webhooks, "URL to POST Alertmanager-webhook (v4) JSON to (repeatable)");
  app.add_option("--remote-write", remote_writes,
                 "Prometheus remote-write URL to forward every counter sample to, e.g. "
                 "http://victoria:8428/api/v1/write (repeatable; more options in the config's "
                 "remote_write list)");
  std::string history_url;
  app.add_option("--history-url", history_url,
                 "PromQL API base of the TSDB remote-write fills, e.g. http://victoria:8428: `rocefab "
                 "counters --since` reads what is older than the local store from it (more options in "
                 "the config's history block)");
  uint32_t metrics_top_k = 20;
  bool metrics_all_entities = false;
  app.add_option("--metrics-top-k", metrics_top_k,
                 "per-port /metrics series only for this many most troubled entities per scope, plus "
                 "those anomalies name")
      ->capture_default_str();
  app.add_flag("--metrics-all-entities", metrics_all_entities,
               "per-port /metrics series for every entity (small fabrics only)");
  app.add_option("--topology", topology_path,
                 "fabric topology YAML: pairs link ends and gives each job its paths")
      ->check(CLI::ExistingFile);
  app.add_option("--controller", controller,
                 "rocefab-controllerd address, for drained links and config drift");
  app.add_option("--log-level", log_level, "debug, info, warning or error")->capture_default_str();
  SecurityFlags security;
  AddSecurityFlags(app, &security, /*serves_rpcs=*/true);
  if (const int code = ParseFlags(app, argc, argv); code >= 0) return code;

  constexpr char kProgram[] = "rocefab-collectord";
  if (auto status = ApplyLogLevel(log_level); !status.ok()) return UsageError(kProgram, status);

  v1::CollectordConfig config;
  config.set_listen(listen);
  config.set_db(db);
  config.set_metrics_listen(metrics_flags.listen);
  if (auto status = LoadConfigIfGiven(config_path, &config); !status.ok())
    return UsageError(kProgram, status);
  if (app.count("--listen")) config.set_listen(listen);
  if (!metrics_flags.web_config.empty()) config.set_metrics_web_config(metrics_flags.web_config);
  if (app.count("--db")) config.set_db(db);
  if (app.count("--metrics-listen")) config.set_metrics_listen(metrics_flags.listen);
  if (app.count("--topology")) config.set_topology(topology_path);
  if (app.count("--controller")) config.set_controller(controller);
  for (const auto& url : alertmanagers) config.mutable_alerting()->add_alertmanager_urls(url);
  for (const auto& url : webhooks) config.mutable_alerting()->add_webhook_urls(url);
  for (const auto& url : remote_writes) config.add_remote_write()->set_url(url);
  if (app.count("--history-url")) config.mutable_history()->set_url(history_url);
  std::optional<collector::HistoryOptions> history_options;
  if (config.has_history()) {
    auto resolved = collector::ResolveHistory(config.history());
    if (!resolved.ok()) return UsageError(kProgram, resolved.status());
    history_options = std::move(*resolved);
  }
  std::vector<collector::RemoteWriteOptions> remote_write_options;
  for (const auto& rw : config.remote_write()) {
    auto resolved = collector::ResolveRemoteWrite(rw);
    if (!resolved.ok()) return UsageError(kProgram, resolved.status());
    remote_write_options.push_back(std::move(*resolved));
  }
  if (!playbooks_dir.empty()) config.mutable_remediation()->set_playbooks_dir(playbooks_dir);
  for (const std::string& spec : auto_playbooks) {
    const size_t colon = spec.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size())
      return UsageError(kProgram, absl::InvalidArgumentError(
                                      StrCat("--auto-playbook ", spec, ": expected PLAYBOOK:KIND, e.g. "
                                             "drain_flapping_link:link_flap")));
    auto* rule = config.mutable_remediation()->add_auto_run();
    rule->set_playbook(spec.substr(0, colon));
    rule->set_on_kind(spec.substr(colon + 1));
  }
  auto auto_rules = collector::LoadAutoRunRules(config.remediation());
  if (!auto_rules.ok()) return UsageError(kProgram, auto_rules.status());
  auto alert_options = collector::ResolveAlertOptions(config.alerting());
  if (!alert_options.ok()) return UsageError(kProgram, alert_options.status());
  auto detector_settings = collector::ResolveDetectorSettings(config.detectors());
  if (!detector_settings.ok()) return UsageError(kProgram, detector_settings.status());
  std::shared_ptr<const Topology> topology;
  if (!config.topology().empty()) {
    auto loaded = Topology::Load(config.topology());
    if (!loaded.ok()) return UsageError(kProgram, loaded.status());
    topology = *loaded;
  }
  auto retention = ResolveDurationUs("--retention", app.count("--retention") > 0, retention_text,
                                     config.has_retention(), config.retention());
  if (!retention.ok()) return UsageError(kProgram, retention.status());
  const int64_t retention_us = *retention;
  int64_t records_retention_us = 30LL * 86400 * 1'000'000;
  if (config.has_records_retention()) {
    records_retention_us = DurationToUs(config.records_retention());
    if (records_retention_us <= 0) return UsageError(kProgram, absl::InvalidArgumentError("records_retention must be positive"));
  }
  records_retention_us = std::max(records_retention_us, retention_us);
  if (auto status = ResolveSecurity(security, config.has_tls(), config.mutable_tls(),
                                    config.mutable_authorization());
      !status.ok())
    return UsageError(kProgram, status);
  if (auto status = ValidateTls(config.tls()); !status.ok()) return UsageError(kProgram, status);
  if (config.remediation().has_tls())
    if (auto status = ValidateTls(config.remediation().tls()); !status.ok())
      return UsageError(kProgram, absl::InvalidArgumentError(StrCat("remediation.", status.message())));
  const int64_t max_future_us =
      config.has_max_clock_skew() ? DurationToUs(config.max_clock_skew()) : 10'000'000;
  if (max_future_us < 0) return UsageError(kProgram, absl::InvalidArgumentError("max_clock_skew must not be negative"));

  // Signals are taken synchronously by the main thread; block them before
  // any thread starts so none of gRPC's threads receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const Clock& clock = SystemClock::Instance();
  auto store = collector::Store::Open({.path = config.db(), .relaxed_durability = config.relaxed_durability()});
  if (!store.ok()) {
    std::cerr << "rocefab-collectord: " << store.status().message() << "\n";
    return 1;
  }
  auto registry = std::make_shared<prometheus::Registry>();
  collector::CollectorMetrics metrics(*registry);
  if (app.count("--metrics-top-k")) config.mutable_metrics()->set_top_k(metrics_top_k);
  if (metrics_all_entities) config.mutable_metrics()->set_all_entities(true);
  auto latest = std::make_shared<collector::LatestValues>(
      collector::ExportOptions{config.metrics().top_k() ? config.metrics().top_k() : 20,
                               config.metrics().all_entities()},
      topology);
  auto diagnosis_metrics = std::make_shared<collector::DiagnosisMetrics>();
  collector::Ingester::Options ingest_options;
  ingest_options.retention_us = retention_us;
  ingest_options.records_retention_us = records_retention_us;
  // Ingester -> Observer: batches once they are durably stored.
  // Bounded in samples, so that observation that falls behind pushes back
  // on the store instead of growing memory (docs/architecture.md).
  Queue<collector::StoredBatch> stored_batches(500'000);
  collector::Ingester ingester(ingest_options, **store, &stored_batches, metrics, clock);
  // Ingester -> RemoteWriters: the newest durable commit. They read it back
  // from the store; retention keeps what the slowest has not sent.
  std::vector<std::unique_ptr<collector::RemoteWriter>> remote_writers;
  for (auto& options : remote_write_options)
    remote_writers.push_back(
        std::make_unique<collector::RemoteWriter>(std::move(options), **store, *registry, clock));
  if (!remote_writers.empty()) {
    ingester.SetCommitListener([&remote_writers, &ingester](uint64_t commit) {
      uint64_t slowest = UINT64_MAX;
      for (auto& writer : remote_writers) {
        writer->Notify(commit);
        slowest = std::min(slowest, writer->cursor());
      }
      ingester.HoldAfterCommit(slowest);
    });
  }
  auto last_anomaly = (*store)->anomalies().CloseOpen(clock.NowUs());
  if (!last_anomaly.ok()) {
    std::cerr << "rocefab-collectord: " << last_anomaly.status().message() << "\n";
    return 1;
  }
  auto alerter = collector::Alerter::Open(config.db(), *alert_options, metrics, clock);
  if (!alerter.ok()) {
    std::cerr << "rocefab-collectord: " << alerter.status().message() << "\n";
    return 1;
  }
  collector::Detectors detectors(*detector_settings);
  detectors.SetNextId(*last_anomaly + 1);
  collector::FabricContextSource context(topology, **store, config.controller(), config.tls(), clock);
  collector::TrafficRates traffic_rates;  // outlives the observer that feeds it
  collector::Observer observer(
      stored_batches, *latest, &detectors, [&context] { return context.Get(); },
      [&](const collector::Detectors& d, const collector::FabricContext& c) {
        const auto active = d.Active();
        const auto drained = context.Drained();
        diagnosis_metrics->Set(active, d.JobSummaries(), c, drained);
        latest->SetHighlighted(diagnosis_metrics->Highlighted());
        (*alerter)->Evaluate(active, c, drained, clock.NowUs());
      },
      **store, metrics, clock);
  collector::AgentRegistry agents(metrics);
  Authorizer authorizer(config.authorization(), TlsEnabled(config.tls()));
  authorizer.CountIn(&metrics.rpcs_denied);
  authorizer.set_self_identity("rocefab-collectord");
  collector::TelemetryService telemetry(ingester, agents, metrics, clock,
                                        {.authorizer = &authorizer, .max_future_us = max_future_us});
  collector::QueryService query(**store, agents, clock, authorizer, &context, alerter->get());
  query.SetEvaluatedThrough(&observer.evaluated_through());
  observer.SetTrafficRates(&traffic_rates);
  query.SetTrafficRates(&traffic_rates);
  query.SetComponentLog(&detectors.components());
  std::unique_ptr<collector::PromqlHistory> history;
  if (history_options) {
    history = std::make_unique<collector::PromqlHistory>(std::move(*history_options), *registry);
    query.SetHistory(history.get());
  }
  collector::AutoRemediator remediator(*auto_rules, **store, query, **alerter, context,
                                       config.remediation().has_tls() ? config.remediation().tls() : config.tls(),
                                       clock);
  (*alerter)->SetOnFiring([&remediator](const v1::Alert& a) { remediator.OnFiring(a); });

  auto metrics_server = StartMetrics(config.metrics_listen(), config.metrics_web_config(), config.tls(),
                                     {registry, latest, diagnosis_metrics});
  if (!metrics_server.ok()) {
    std::cerr << "rocefab-collectord: " << metrics_server.status().message() << "\n";
    return 1;
  }

  context.Start();
  (*alerter)->Start();
  remediator.Start();
  observer.Start();
  for (auto& writer : remote_writers) {
    if (auto status = writer->Start(); !status.ok()) {
      std::cerr << "rocefab-collectord: remote-write: " << status.message() << "\n";
      return 1;
    }
  }
  ingester.Start();
  auto server = StartGrpcServer(config.listen(), config.tls(), {&telemetry, &query});
  if (!server.ok()) {
    std::cerr << "rocefab-collectord: " << server.status().message() << "\n";
    ingester.Stop();
    observer.Stop();
    return 1;
  }
  const std::string status = StrCat("listening grpc=", server->bound_address,
                                          " metrics=", (*metrics_server)->bound_address());
  LOG_INFO("collectord", status, " db=", config.db(),
           " retention=", FormatDurationUs(retention_us));
  systemd::NotifyReady(status);

  // Main loop: wait for a signal, pinging the watchdog while the ingester
  // keeps making progress.
  const int64_t watchdog_us = systemd::WatchdogPingIntervalUs();
  const int64_t tick_us = watchdog_us > 0 ? std::min<int64_t>(watchdog_us, 1'000'000) : 1'000'000;
  for (;;) {
    timespec timeout{tick_us / 1'000'000, (tick_us % 1'000'000) * 1000};
    const int signal = sigtimedwait(&signals, nullptr, &timeout);
    if (signal == SIGINT || signal == SIGTERM) {
      LOG_INFO("collectord", "signal ", signal, ": stopping");
      break;
    }
    if (watchdog_us > 0 && clock.MonotonicUs() - ingester.last_progress_us() < 5 * 1'000'000)
      systemd::NotifyWatchdog();
  }
  systemd::NotifyStopping();
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  ingester.Stop();  // closes the observer's queue
  observer.Stop();
  for (auto& writer : remote_writers) writer->Stop();
  remediator.Stop();
  context.Stop();
  (*alerter)->Stop();
  server->server->Wait();
  return 0;
}
