// rocefab-controllerd: compiles routing and QoS policy into per-switch
// desired config and rolls it out to the switch agents.
//
//   CLI -> Controller service -> Store (SQLite) and SwitchAgent stubs
#include "common/program_main.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/config_loader.h"
#include "common/agent_metrics.h"
#include "common/daemon_setup.h"
#include "common/fs_root.h"
#include "common/grpc_util.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/sd_notify.h"
#include "controller/compiler.h"
#include "common/authz.h"
#include "controller/controller.h"
#include "controller/fleet.h"
#include "controller/gate.h"
#include "controller/service.h"
#include "controller/store.h"
#include "controller/te_loop.h"

int RocefabControllerdMain(int argc, char** argv) {
  using namespace rocefab;
  SetUpDaemonProcess();
  constexpr char kProgram[] = "rocefab-controllerd";
  CLI::App app{"rocefab-controllerd: compiles routing (ecmp, eecmp, path_pinning, te) and QoS policy "
               "over the fabric topology into per-switch desired config and rolls it out safely.\n"
               "Flags override the config file."};
  app.get_formatter()->column_width(36);
  std::string config_path, listen = "0.0.0.0:9412", db = "/var/lib/rocefab/controller.db",
                           topology_path, policy_path, collector, agents_json, log_level = "info";
  app.add_option("--config", config_path, "YAML config (ControllerdConfig keys)")->check(CLI::ExistingFile);
  app.add_option("--listen", listen, "gRPC address for the CLI (port 0 picks one)")->capture_default_str();
  app.add_option("--db", db, "SQLite file for desired state and the audit log")->capture_default_str();
  app.add_option("--topology", topology_path, "topology YAML");
  app.add_option("--policy", policy_path, "policy YAML (see docs/controller.md)");
  app.add_option("--collector", collector, "rocefab-collectord address for health gates; with one collector per AI Zone, all of them, comma-separated");
  app.add_option("--switch-agents-json", agents_json,
                 "JSON with {\"switch_agents\": {switch: host:port}} (rocefab-lab's endpoints.json)");
  app.add_option("--log-level", log_level, "debug, info, warning or error")->capture_default_str();
  uint32_t te_period_s = 0;
  app.add_option("--te-period", te_period_s,
                 "seconds between centralized TE allocations while a zone runs scheme te (te.period_s; default 30)")
      ->check(CLI::Range(1, 3600));
  SecurityFlags security;
  AddSecurityFlags(app, &security, /*serves_rpcs=*/true);
  MetricsFlags metrics_flags;
  AddMetricsFlags(app, &metrics_flags, "Prometheus /metrics address (denied RPCs); default none");
  if (const int code = ParseFlags(app, argc, argv); code >= 0) return code;
  if (auto status = ApplyLogLevel(log_level); !status.ok()) return UsageError(kProgram, status);

  v1::ControllerdConfig config;
  config.set_listen(listen);
  config.set_db(db);
  if (auto status = LoadConfigIfGiven(config_path, &config); !status.ok()) return UsageError(kProgram, status);
  if (app.count("--listen")) config.set_listen(listen);
  if (app.count("--db")) config.set_db(db);
  if (!topology_path.empty()) config.set_topology(topology_path);
  if (!policy_path.empty()) config.set_policy(policy_path);
  if (!collector.empty()) config.set_collector(collector);
  if (te_period_s > 0) config.mutable_te()->set_period_s(te_period_s);
  if (!agents_json.empty()) {
    auto text = ReadWholeFile(agents_json);
    auto json = text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    if (!text.ok() || json.is_discarded() || !json.contains("switch_agents") ||
        !json["switch_agents"].is_object())
      return UsageError(kProgram, absl::InvalidArgumentError(StrCat(
                                      agents_json, ": expected {\"switch_agents\": {name: address}}")));
    for (const auto& [name, address] : json["switch_agents"].items()) {
      if (!address.is_string()) continue;
      auto* endpoint = config.add_switch_agents();
      endpoint->set_switch_name(name);
      endpoint->set_address(address.get<std::string>());
    }
  }
  if (auto status = ResolveSecurity(security, config.has_tls(), config.mutable_tls(),
                                    config.mutable_authorization());
      !status.ok())
    return UsageError(kProgram, status);
  if (auto status = ValidateTls(config.tls()); !status.ok()) return UsageError(kProgram, status);
  if (!config.unreachable().empty() && config.unreachable() != "fail" && config.unreachable() != "skip")
    return UsageError(kProgram, absl::InvalidArgumentError(StrCat("unreachable: '", config.unreachable(),
                                                                  "' is neither fail nor skip")));
  if (config.topology().empty() || config.policy().empty())
    return UsageError(kProgram, absl::InvalidArgumentError("--topology and --policy are required"));
  auto topology = Topology::Load(config.topology());
  if (!topology.ok()) return UsageError(kProgram, topology.status());
  v1::Policy raw_policy;
  if (auto status = LoadYamlConfigFile(config.policy(), &raw_policy); !status.ok())
    return UsageError(kProgram, status);
  auto policy = controller::ValidatePolicy(raw_policy);
  if (!policy.ok()) return UsageError(kProgram, absl::InvalidArgumentError(StrCat(config.policy(), ": ", policy.status().message())));

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto store = controller::Store::Open(config.db());
  if (!store.ok()) {
    std::cerr << kProgram << ": " << store.status().message() << "\n";
    return 1;
  }
  controller::GrpcFleet fleet(config);
  controller::CollectorGate gate(*topology, config.collector(), config.tls());
  controller::Controller controller(*topology, *policy, **store, fleet, gate.empty() ? nullptr : &gate, config,
                                    SystemClock::Instance());
  auto generation = controller.Start("rocefab-controllerd", StrCat("start with ", config.policy()));
  if (!generation.ok()) {
    std::cerr << kProgram << ": " << generation.status().message() << "\n";
    return 1;
  }
  Authorizer authorizer(config.authorization(), TlsEnabled(config.tls()));
  if (!metrics_flags.listen.empty()) config.set_metrics_listen(metrics_flags.listen);
  if (!metrics_flags.web_config.empty()) config.set_metrics_web_config(metrics_flags.web_config);
  auto registry = std::make_shared<prometheus::Registry>();
  authorizer.CountIn(&AddDeniedRpcs(*registry));
  // The endpoint holds its collectables weakly: they live here.
  const std::vector<std::shared_ptr<prometheus::Collectable>> collectables = {
      registry, BuildInfoCollectable(kProgram),
      GaugeOf("rocefab_controller_desired_generation", "The config generation the controller wants in force",
              [&controller] { return static_cast<double>(controller.generation()); }),
      CollectableOf([&controller] {
        using prometheus::MetricType;
        const controller::Controller::Activity a = controller.activity();
        return std::vector<prometheus::MetricFamily>{
            OneValue("rocefab_controller_rollout_active", "1 while a rollout runs", MetricType::Gauge,
                     a.rollout_active ? 1 : 0),
            OneValue("rocefab_controller_rollout_wave", "The running rollout's wave (0 is the canary)",
                     MetricType::Gauge, static_cast<double>(a.wave)),
            OneValue("rocefab_controller_rollout_waves", "The running rollout's number of waves", MetricType::Gauge,
                     static_cast<double>(a.waves)),
            ByLabel("rocefab_controller_rollouts_total",
                    "Rollouts since the controller started, by how they ended: applied, rolled_back (a gate "
                    "or a switch failed), aborted (rocefab config abort)",
                    MetricType::Counter, "result",
                    {{"applied", static_cast<double>(a.rollouts_applied)},
                     {"rolled_back", static_cast<double>(a.rollouts_rolled_back)},
                     {"aborted", static_cast<double>(a.rollouts_aborted)}}),
            ByLabel("rocefab_controller_drains_total", "Drains and undrains since the controller started",
                    MetricType::Counter, "action",
                    {{"drain", static_cast<double>(a.drains)}, {"undrain", static_cast<double>(a.undrains)}})};
      })};
  auto started = StartMetrics(config.metrics_listen(), config.metrics_web_config(), config.tls(), collectables);
  if (!started.ok()) return UsageError(kProgram, started.status());
  std::unique_ptr<MetricsServer> metrics = std::move(*started);
  // Idle unless the running policy has a zone on `scheme: te`.
  controller::TeLoop te_loop(controller, *topology, gate, config.te(), SystemClock::Instance(), registry.get());
  if (!config.te().disabled()) te_loop.Start();
  controller::ControllerService service(controller, authorizer);
  auto server = StartGrpcServer(config.listen(), config.tls(), {&service});
  if (!server.ok()) {
    std::cerr << kProgram << ": " << server.status().message() << "\n";
    return 1;
  }
  LOG_INFO("controllerd", "listening grpc=", server->bound_address, " desired generation ", *generation);
  systemd::NotifyReady(StrCat("listening grpc=", server->bound_address, " generation=", *generation,
                              metrics ? StrCat(" metrics=", metrics->bound_address()) : std::string()));
  int signal = 0;
  sigwait(&signals, &signal);
  systemd::NotifyStopping();
  te_loop.RequestStop();
  controller.Shutdown();  // a running rollout stops at its next step and rolls back
  te_loop.Stop();
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}
