// rocefab-hostd: the per-GPU-host agent. Wires config, sources, poller,
// shipper and the poll loop; the logic lives in the modules.
//
//   Poll loop (io thread) -> TelemetryShipper queue -> collector stream
#include "common/program_main.h"

#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "agents/host/ethtool_stats.h"
#include "agents/host/host_agent.h"
#include "agents/host/host_poller.h"
#include "agents/host/link_state.h"
#include "agents/host/rdma_netlink.h"
#include "common/agent_loop.h"
#include "common/agent_metrics.h"
#include "common/build_info.h"
#include "common/daemon_setup.h"
#include "common/duration.h"
#include "common/grpc_util.h"
#include "common/log.h"
#include "common/sd_notify.h"
#include "common/telemetry_shipper.h"
#include "rocefab/v1/config.pb.h"

namespace {

std::string SystemHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

void PrintTable(const rocefab::hostd::HostSnapshot& snapshot) {
  std::printf("host %s\n", snapshot.host.c_str());
  for (const auto& nic : snapshot.nics) {
    std::printf("\n%s port %u  netdev %s\n", nic.device.c_str(), nic.port,
                nic.netdev.empty() ? "-" : nic.netdev.c_str());
    for (const auto& [name, value] : nic.counters)
      std::printf("  %-28s %20llu\n", std::string(name).c_str(), static_cast<unsigned long long>(value));
    for (const auto& [name, by_prio] : nic.per_prio)
      for (const auto& [prio, value] : by_prio)
        std::printf("  %-22s prio=%u %20llu\n", std::string(name).c_str(), prio,
                    static_cast<unsigned long long>(value));
    if (nic.link_up) std::printf("  %-28s %20d\n", "link_up", *nic.link_up ? 1 : 0);
    if (nic.rate_bytes_per_second)
      std::printf("  %-28s %20llu\n", "rate_bytes_per_second",
                  static_cast<unsigned long long>(*nic.rate_bytes_per_second));
  }
  std::printf("\nskipped %llu, parse errors %llu, source errors %llu\n",
              static_cast<unsigned long long>(snapshot.health.skipped_values),
              static_cast<unsigned long long>(snapshot.health.parse_errors),
              static_cast<unsigned long long>(snapshot.health.source_errors));
}

}  // namespace

int RocefabHostdMain(int argc, char** argv) {
  using namespace rocefab;
  SetUpDaemonProcess();
  CLI::App app{
      "rocefab-hostd: reads RDMA NIC counters (sysfs), PFC/pause statistics (ethtool) and link "
      "state (netlink) on a GPU host and streams them to rocefab-collectord.\n"
      "Flags override the config file; the config file overrides the defaults."};
  app.get_formatter()->column_width(36);
  std::string config_path, collector = "127.0.0.1:9410", interval_text = "1s", sysfs_root = "/sys",
                           proc_root = "/proc", ethtool_dir, host_name, output = "json",
                           log_level = "info";
  bool once = false, no_netlink = false;
  std::string spool_dir;
  app.add_option("--config", config_path, "YAML config file (keys: see deploy/config/hostd.yaml)")
      ->check(CLI::ExistingFile);
  app.add_option("--collector", collector, "rocefab-collectord gRPC address")->capture_default_str();
  app.add_option("--interval", interval_text, "poll interval, e.g. 1s, 500ms")->capture_default_str();
  std::string fast_interval_text = "100ms";
  app.add_option("--fast-interval", fast_interval_text,
                 "the PFC fast path: read only the pause counters this often between polls, and send "
                 "them when they move (docs/diagnosis.md); must divide --interval; 0s: off")
      ->capture_default_str();
  app.add_option("--sysfs-root", sysfs_root, "where sysfs is mounted (like node_exporter's --path.sysfs)")
      ->capture_default_str();
  app.add_option("--proc-root", proc_root, "where procfs is mounted")->capture_default_str();
  app.add_option("--ethtool-dir", ethtool_dir,
                 "read DIR/<netdev>/statistics (`ethtool -S` text) instead of the SIOCETHTOOL ioctl");
  app.add_option("--host-name", host_name, "host name to report (default: the system hostname)");
  app.add_flag("--no-netlink", no_netlink,
               "do not use netlink: link state, DCB and RDMA counters come from sysfs and ethtool only");
  app.add_option("--spool-dir", spool_dir,
                 "keep unacked batches in files here too, so an agent restart loses none "
                 "(e.g. /var/lib/rocefab-hostd/spool)");
  std::vector<std::string> inspector_globs;
  app.add_option("--inspector-glob", inspector_globs,
                 "NCCL Inspector dump directories to follow, e.g. '/var/log/nccl-inspector/nccl-inspector-*' "
                 "(repeatable)");
  app.add_flag("--once", once, "print one snapshot of cumulative values and exit");
  app.add_option("-o,--output", output, "--once output format")
      ->check(CLI::IsMember({"json", "table"}))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "debug, info, warning or error")->capture_default_str();
  SecurityFlags security;
  AddSecurityFlags(app, &security, /*serves_rpcs=*/false);
  MetricsFlags metrics_flags;
  AddMetricsFlags(app, &metrics_flags,
                  "Prometheus /metrics address (the agent's own metrics, docs/metrics.md), e.g. "
                  "0.0.0.0:9414; default none");
  if (const int code = ParseFlags(app, argc, argv); code >= 0) return code;

  constexpr char kProgram[] = "rocefab-hostd";
  if (auto status = ApplyLogLevel(log_level); !status.ok()) return UsageError(kProgram, status);

  v1::HostdConfig config;
  config.set_collector(collector);
  config.set_sysfs_root(sysfs_root);
  config.set_proc_root(proc_root);
  config.set_netlink(true);
  config.set_max_pending_batches(3600);
  if (auto status = LoadConfigIfGiven(config_path, &config); !status.ok())
    return UsageError(kProgram, status);
  // Flags given on the command line win over the file.
  if (app.count("--collector")) config.set_collector(collector);
  if (app.count("--sysfs-root")) config.set_sysfs_root(sysfs_root);
  if (app.count("--proc-root")) config.set_proc_root(proc_root);
  if (app.count("--ethtool-dir")) config.set_ethtool_dir(ethtool_dir);
  if (app.count("--host-name")) config.set_host_name(host_name);
  if (no_netlink) config.set_netlink(false);
  if (app.count("--spool-dir")) config.set_spool_dir(spool_dir);
  if (app.count("--metrics-listen")) config.set_metrics_listen(metrics_flags.listen);
  if (app.count("--metrics-web-config")) config.set_metrics_web_config(metrics_flags.web_config);
  for (const auto& pattern : inspector_globs) config.add_inspector_globs(pattern);
  auto interval = ResolveDurationUs("--interval", app.count("--interval") > 0, interval_text,
                                    config.has_interval(), config.interval());
  if (!interval.ok()) return UsageError(kProgram, interval.status());
  const int64_t interval_us = *interval;
  if (interval_us < 10'000) {
    return UsageError(kProgram, absl::InvalidArgumentError("interval must be at least 10ms"));
  }
  auto fast_interval = ResolveFastIntervalUs(app.count("--fast-interval") > 0, fast_interval_text,
                                             config.has_fast_interval(), config.fast_interval(), interval_us);
  if (!fast_interval.ok()) return UsageError(kProgram, fast_interval.status());
  if (config.host_name().empty()) config.set_host_name(SystemHostName());

  // Counter files stay open between polls (common/file_cache.h), about 30
  // to 70 per RDMA port: lift the soft descriptor limit to the hard one.
  if (rlimit limit{}; getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) LOG_WARN("hostd", "cannot raise the open file limit");
  }
  const Clock& clock = SystemClock::Instance();
  FsRoot sysfs(config.sysfs_root());
  FsRoot proc(config.proc_root());
  std::unique_ptr<hostd::EthtoolSource> ethtool;
  if (config.ethtool_dir().empty()) ethtool = std::make_unique<hostd::IoctlEthtoolSource>();
  else ethtool = std::make_unique<hostd::TextEthtoolSource>(config.ethtool_dir());
  std::unique_ptr<hostd::NetlinkLinkSource> links;
  if (config.netlink()) links = std::make_unique<hostd::NetlinkLinkSource>();
  std::unique_ptr<NetlinkDcbSource> dcb;
  if (config.netlink()) dcb = std::make_unique<NetlinkDcbSource>();
  // RDMA netlink reads the running kernel's devices: only when sysfs is
  // that kernel's too, not a tree given with --sysfs-root (the lab's).
  std::unique_ptr<hostd::RdmaNetlinkSource> rdma_netlink;
  std::error_code canonical_error;
  if (config.netlink() && std::filesystem::weakly_canonical(config.sysfs_root(), canonical_error) == "/sys") {
    rdma_netlink = std::make_unique<hostd::RdmaNetlinkSource>();
    if (!rdma_netlink->available()) {
      LOG_INFO("hostd", rdma_netlink->unavailable_reason(), ": hw_counters are read from sysfs");
      rdma_netlink.reset();
    }
  }
  hostd::HostPoller poller(config.host_name(), {&sysfs, ethtool.get(), links.get(), dcb.get(), rdma_netlink.get()},
                           clock);

  if (once) {
    hostd::HostSnapshot snapshot = poller.Poll();
    if (output == "json") std::cout << hostd::SnapshotToJson(snapshot).dump(2) << "\n";
    else PrintTable(snapshot);
    return 0;
  }

  v1::AuthorizationConfig unused;
  if (auto status = ResolveSecurity(security, config.has_tls(), config.mutable_tls(), &unused); !status.ok())
    return UsageError(kProgram, status);
  if (auto status = ValidateTls(config.tls()); !status.ok()) return UsageError(kProgram, status);
  TelemetryShipper::Options shipper_options;
  shipper_options.target = config.collector();
  shipper_options.tls = config.tls();
  shipper_options.agent_id = config.host_name();
  shipper_options.agent_kind = v1::AGENT_KIND_HOST;
  shipper_options.max_pending = config.max_pending_batches();
  shipper_options.spool_dir = config.spool_dir();
  if (config.spool_max_bytes()) shipper_options.spool_max_bytes = config.spool_max_bytes();
  TelemetryShipper shipper(shipper_options, clock);
  if (auto status = shipper.Start(); !status.ok()) return UsageError(kProgram, status);
  std::unique_ptr<hostd::InspectorTailer> inspector;
  if (!config.inspector_globs().empty())
    inspector = std::make_unique<hostd::InspectorTailer>(
        std::vector<std::string>(config.inspector_globs().begin(), config.inspector_globs().end()));
  hostd::HostAgent agent(poller, shipper, proc, clock, inspector.get());
  AgentLoop loop(interval_us, [&] { agent.PollOnce(); }, shipper, clock);
  if (*fast_interval > 0) loop.SetFastPoll(*fast_interval, [&] { agent.PollFast(); });
  auto read_components = [&sysfs, program = std::string(kProgram)] {
    auto components = SystemComponents();
    components[program] = BuildVersion();
    for (const auto& [device, version] : hostd::NicFirmwareVersions(sysfs)) components[device + " firmware"] = version;
    return components;
  };
  // Firmware can change under a running agent (mlxfwreset): read again
  // about every minute.
  agent.SetComponents(read_components, static_cast<int>(std::max<int64_t>(1, 60'000'000 / interval_us)));
  auto components = read_components();
  // The endpoint holds its collectables weakly: they live here.
  auto self_metrics = std::make_shared<AgentMetrics>(loop, shipper, agent.problems(), std::move(components));
  auto build_info = BuildInfoCollectable(kProgram);
  auto metrics =
      StartMetrics(config.metrics_listen(), config.metrics_web_config(), config.tls(), {build_info, self_metrics});
  if (!metrics.ok()) return UsageError(kProgram, metrics.status());
  boost::asio::io_context io;
  LOG_INFO("hostd", "host ", config.host_name(), ": polling every ", FormatDurationUs(interval_us),
           *fast_interval > 0 ? StrCat(", PFC counters every ", FormatDurationUs(*fast_interval)) : "",
           ", shipping to ", config.collector(), " (agent boot id ", shipper.agent_boot_id(), ")");
  systemd::NotifyReady(StrCat("polling host=", config.host_name(), " collector=", config.collector(),
                              *metrics ? StrCat(" metrics=", (*metrics)->bound_address()) : std::string()));
  loop.Run(io, /*flush_timeout_us=*/3'000'000);

  // One JSON line of delivery accounting, for operators and tests.
  const auto stats = shipper.stats();
  std::cout << nlohmann::json{{"event", "exit"},
                              {"agent_id", config.host_name()},
                              {"agent_boot_id", shipper.agent_boot_id()},
                              {"polls", loop.polls()},
                              {"enqueued", stats.enqueued},
                              {"last_seq", stats.last_seq},
                              {"acked_stored", stats.acked_stored},
                              {"acked_duplicate", stats.acked_duplicate},
                              {"max_acked_seq", stats.max_acked_seq},
                              {"rejected", stats.rejected},
                              {"dropped_overflow", stats.dropped_overflow},
                              {"pending", stats.pending},
                              {"replay_pending", stats.replay_pending},
                              {"spool_bytes", stats.spool_bytes},
                              {"stream_failures", stats.stream_failures},
                              {"sent", stats.sent}}
                   .dump()
            << std::endl;
  return 0;
}
