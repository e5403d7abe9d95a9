// rocefab-switchd: the per-switch agent. Wires config, backend, shipper and
// the poll loop.
//
//   Poll loop (io thread) -> TelemetryShipper queue -> collector stream
#include "common/program_main.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <iostream>

#include "agents/switch/config_applier.h"
#include "agents/switch/config_service.h"
#include "agents/switch/file_backend.h"
#include "agents/switch/file_config_backend.h"
#include "agents/switch/linux_backend.h"
#include "agents/switch/sonic_backend.h"
#include <filesystem>
#include "agents/switch/switch_agent.h"
#include "common/agent_loop.h"
#include "common/agent_metrics.h"
#include "common/build_info.h"
#include "common/authz.h"
#include "common/daemon_setup.h"
#include "common/duration.h"
#include "common/grpc_util.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/sd_notify.h"

int RocefabSwitchdMain(int argc, char** argv) {
  using namespace rocefab;
  SetUpDaemonProcess();
  constexpr char kProgram[] = "rocefab-switchd";
  CLI::App app{
      "rocefab-switchd: reads a switch's port, queue and buffer counters and streams them to "
      "rocefab-collectord, and applies the controller's desired config.\nBackends: linux (the "
      "kernel's routing and interfaces, through netlink), sonic (SONiC's Redis databases: "
      "COUNTERS_DB, APPL_DB and STATE_DB read, CONFIG_DB written), file (switches emulated by "
      "rocefab-lab)."};
  app.get_formatter()->column_width(36);
  std::string collector = "127.0.0.1:9410", interval_text = "1s", backend_name = "file",
              state_dir, switch_name, output = "json", log_level = "info", listen = "0.0.0.0:9413",
              applied_state;
  bool once = false;
  app.add_option("--collector", collector, "rocefab-collectord gRPC address")->capture_default_str();
  app.add_option("--interval", interval_text, "poll interval, e.g. 1s")->capture_default_str();
  std::string fast_interval_text = "100ms";
  app.add_option("--fast-interval", fast_interval_text,
                 "the PFC fast path: read only the pause counters this often between polls, and send "
                 "them when they move (docs/diagnosis.md); must divide --interval; 0s: off")
      ->capture_default_str();
  app.add_option("--backend", backend_name, "where counters come from")
      ->check(CLI::IsMember({"file", "linux", "sonic"}))
      ->capture_default_str();
  app.add_option("--state-dir", state_dir,
                 "file backend: directory holding <switch>/counters.json; linux and sonic: where "
                 "the applied config is kept");
  std::string sonic_db_config = "/var/run/redis/sonic-db/database_config.json", redis_address;
  app.add_option("--sonic-db-config", sonic_db_config,
                 "sonic: SONiC's database_config.json (database ids, Redis socket); when it is "
                 "absent SONiC's default ids are used")
      ->capture_default_str();
  app.add_option("--redis", redis_address,
                 "sonic: Redis address, unix:/path or host:port (default: the socket "
                 "database_config.json names, else unix:/var/run/redis/redis.sock)");
  app.add_option("--switch-name", switch_name, "switch to report (default: the system hostname)");
  app.add_option("--listen", listen,
                 "gRPC address of the SwitchAgent service (ApplyConfig, GetState); port 0 picks one")
      ->capture_default_str();
  app.add_option("--applied-state", applied_state,
                 "file that keeps the applied config across restarts "
                 "(default: <state-dir>/<switch>/applied.pb)");
  std::string spool_dir;
  app.add_option("--spool-dir", spool_dir,
                 "keep unacked batches in files here too, so an agent restart loses none");
  app.add_flag("--once", once, "print one reading of cumulative values and exit");
  app.add_option("-o,--output", output, "--once output format")
      ->check(CLI::IsMember({"json"}))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "debug, info, warning or error")->capture_default_str();
  std::string config_path;
  app.add_option("--config", config_path, "YAML config (SwitchdConfig keys: collector, interval, backend, "
                                          "state_dir, switch_name, listen, applied_state, spool_dir, tls, "
                                          "authorization, metrics_listen, metrics_web_config, sonic_db_config, "
                                          "redis); flags override it")
      ->check(CLI::ExistingFile);
  SecurityFlags security;
  AddSecurityFlags(app, &security, /*serves_rpcs=*/true);
  MetricsFlags metrics_flags;
  AddMetricsFlags(app, &metrics_flags, "Prometheus /metrics address (the agent's own metrics, docs/metrics.md); default none");
  if (const int code = ParseFlags(app, argc, argv); code >= 0) return code;

  v1::SwitchdConfig config;
  if (auto status = LoadConfigIfGiven(config_path, &config); !status.ok()) return UsageError(kProgram, status);
  // The file's values stand where no flag was given.
  auto from_config = [&](const char* flag, const std::string& value, std::string* target) {
    if (!app.count(flag) && !value.empty()) *target = value;
  };
  from_config("--collector", config.collector(), &collector);
  from_config("--backend", config.backend(), &backend_name);
  from_config("--state-dir", config.state_dir(), &state_dir);
  from_config("--switch-name", config.switch_name(), &switch_name);
  from_config("--listen", config.listen(), &listen);
  from_config("--applied-state", config.applied_state(), &applied_state);
  from_config("--spool-dir", config.spool_dir(), &spool_dir);
  from_config("--sonic-db-config", config.sonic_db_config(), &sonic_db_config);
  from_config("--redis", config.redis(), &redis_address);
  if (backend_name != "file" && backend_name != "linux" && backend_name != "sonic")
    return UsageError(kProgram, absl::InvalidArgumentError(
                                    StrCat("backend: '", backend_name, "' is not file, linux or sonic")));

  if (auto status = ApplyLogLevel(log_level); !status.ok()) return UsageError(kProgram, status);
  auto interval = ResolveDurationUs("--interval", app.count("--interval") > 0, interval_text,
                                    config.has_interval(), config.interval());
  if (!interval.ok()) return UsageError(kProgram, interval.status());
  if (*interval < 10'000)
    return UsageError(kProgram, absl::InvalidArgumentError("interval must be at least 10ms"));
  auto fast_interval = ResolveFastIntervalUs(app.count("--fast-interval") > 0, fast_interval_text,
                                             config.has_fast_interval(), config.fast_interval(), *interval);
  if (!fast_interval.ok()) return UsageError(kProgram, fast_interval.status());
  if (switch_name.empty()) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    switch_name = name;
  }
  if (state_dir.empty() && !(once && backend_name != "file"))
    return UsageError(kProgram, absl::InvalidArgumentError(
                                    "--state-dir is needed (file backend: the lab's tree; linux and "
                                    "sonic: where the applied config is kept)"));
  // The linux backend serves both halves; the file backend has one object each.
  std::unique_ptr<switchd::LinuxBackend> linux_backend;
  std::unique_ptr<switchd::FileBackend> file_counters;
  std::unique_ptr<switchd::FileConfigBackend> file_config;
  std::unique_ptr<switchd::SonicBackend> sonic_counters;
  std::unique_ptr<switchd::SonicConfigBackend> sonic_config;
  switchd::SwitchBackend* counters_backend = nullptr;
  switchd::ConfigBackend* config_backend = nullptr;
  if (backend_name == "linux") {
    linux_backend = std::make_unique<switchd::LinuxBackend>(switch_name);
    counters_backend = linux_backend.get();
    config_backend = linux_backend.get();
  } else if (backend_name == "sonic") {
    auto layout = switchd::ResolveSonicDbLayout(sonic_db_config, redis_address);
    if (!layout.ok()) return UsageError(kProgram, layout.status());
    LOG_INFO("switchd", "SONiC databases at ", layout->address.ToString(), ": APPL_DB ", layout->appl_db,
             ", COUNTERS_DB ", layout->counters_db, ", CONFIG_DB ", layout->config_db, ", STATE_DB ",
             layout->state_db);
    sonic_counters = std::make_unique<switchd::SonicBackend>(*layout, switch_name);
    sonic_config = std::make_unique<switchd::SonicConfigBackend>(*layout, switch_name);
    counters_backend = sonic_counters.get();
    config_backend = sonic_config.get();
  } else {
    file_counters = std::make_unique<switchd::FileBackend>(state_dir, switch_name);
    file_config = std::make_unique<switchd::FileConfigBackend>(state_dir, switch_name);
    counters_backend = file_counters.get();
    config_backend = file_config.get();
  }
  switchd::SwitchBackend& backend = *counters_backend;

  if (!once) {
    if (auto status = ResolveSecurity(security, config.has_tls(), config.mutable_tls(),
                                      config.mutable_authorization());
        !status.ok())
      return UsageError(kProgram, status);
    if (auto status = ValidateTls(config.tls()); !status.ok()) return UsageError(kProgram, status);
  }
  if (once) {
    auto reading = backend.ReadCounters();
    if (!reading.ok()) {
      std::cerr << kProgram << ": " << reading.status().message() << "\n";
      return 1;
    }
    std::cout << switchd::ReadingToJson(*reading).dump(2) << "\n";
    return 0;
  }

  // Config half: reconcile to the persisted config, then serve ApplyConfig.
  if (applied_state.empty()) applied_state = StrCat(state_dir, "/", switch_name, "/applied.pb");
  std::filesystem::create_directories(std::filesystem::path(applied_state).parent_path());
  switchd::ConfigApplier applier(switch_name, *config_backend, applied_state);
  if (auto status = applier.Reconcile(); !status.ok()) {
    std::cerr << kProgram << ": " << status.message() << "\n";
    return 1;
  }
  Authorizer authorizer(config.authorization(), TlsEnabled(config.tls()));
  from_config("--metrics-listen", config.metrics_listen(), &metrics_flags.listen);
  from_config("--metrics-web-config", config.metrics_web_config(), &metrics_flags.web_config);
  auto registry = std::make_shared<prometheus::Registry>();
  authorizer.CountIn(&AddDeniedRpcs(*registry));
  // The endpoint holds its collectables weakly: they live here.
  auto build_info = BuildInfoCollectable(kProgram);
  auto started = StartMetrics(metrics_flags.listen, metrics_flags.web_config, config.tls(), {registry, build_info});
  if (!started.ok()) return UsageError(kProgram, started.status());
  std::unique_ptr<MetricsServer> metrics = std::move(*started);
  switchd::ConfigService config_service(applier, authorizer);
  config_service.CountIn(&AddCounterFamily(*registry, "rocefab_switchd_applies_total",
                                           "ApplyConfig calls by result: ok, rolled_back, refused"),
                         &AddGauge(*registry, "rocefab_switchd_applied_generation",
                                   "The config generation in force on this switch"));
  auto server = StartGrpcServer(listen, config.tls(), {&config_service});
  if (!server.ok()) {
    std::cerr << kProgram << ": " << server.status().message() << "\n";
    return 1;
  }

  const Clock& clock = SystemClock::Instance();
  TelemetryShipper::Options options;
  options.target = collector;
  options.agent_id = switch_name;
  options.agent_kind = v1::AGENT_KIND_SWITCH;
  options.spool_dir = spool_dir;
  options.tls = config.tls();
  TelemetryShipper shipper(options, clock);
  if (auto status = shipper.Start(); !status.ok()) return UsageError(kProgram, status);
  switchd::SwitchAgent agent(backend, shipper, clock, backend_name);
  // A SONiC image upgrade reboots the switch, and so restarts the agent:
  // its version is read once. The file backend's os_version is read with
  // its counters.
  auto components = SystemComponents();
  components[kProgram] = BuildVersion();
  if (backend_name == "sonic")
    if (auto version = switchd::SonicImageVersion("/etc/sonic/sonic_version.yml"); !version.empty())
      components["os"] = version;
  agent.SetComponents(components);
  agent.CountDegradedIn(&AddGauge(*registry, "rocefab_switchd_degraded_sources",
                                  "Tables the backend expected and did not find at the last poll "
                                  "(the log names them)"));
  AgentLoop loop(*interval, [&] { agent.PollOnce(); }, shipper, clock);
  if (*fast_interval > 0) loop.SetFastPoll(*fast_interval, [&] { agent.PollFast(); });
  std::shared_ptr<AgentMetrics> self_metrics;
  if (metrics) {
    self_metrics = std::make_shared<AgentMetrics>(loop, shipper, agent.problems(), components);
    metrics->Register(self_metrics);
  }
  boost::asio::io_context io;
  LOG_INFO("switchd", "switch ", switch_name, ": ", backend_name, " backend, polling every ",
           FormatDurationUs(*interval),
           *fast_interval > 0 ? StrCat(", PFC counters every ", FormatDurationUs(*fast_interval)) : "",
           ", shipping to ", collector);
  systemd::NotifyReady(StrCat("polling switch=", switch_name, " collector=", collector,
                              metrics ? StrCat(" metrics=", metrics->bound_address()) : std::string(),
                              " grpc=", server->bound_address));
  loop.Run(io, /*flush_timeout_us=*/3'000'000);
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  const auto stats = shipper.stats();
  std::cout << nlohmann::json{{"event", "exit"},
                              {"agent_id", switch_name},
                              {"agent_boot_id", shipper.agent_boot_id()},
                              {"polls", loop.polls()},
                              {"last_seq", stats.last_seq},
                              {"max_acked_seq", stats.max_acked_seq},
                              {"pending", stats.pending},
                              {"replay_pending", stats.replay_pending},
                              {"stream_failures", stats.stream_failures}}
                   .dump()
            << std::endl;
  return 0;
}
