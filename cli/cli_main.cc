// rocefab: the operator's command line. Tables for people, -o json for
// scripts; the exit codes are cli/commands.h's ExitCode.
#include "common/program_main.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <string_view>

#include "cli/commands.h"
#include "cli/control_commands.h"
#include "cli/diagnose_commands.h"
#include "cli/job_commands.h"
#include "cli/playbook_commands.h"
#include "common/nearest.h"
#include "common/strings.h"

namespace {

// The first word on the command line that no command of its level knows,
// as an error naming it and the nearest commands; "" when every word is
// known (then CLI11's own message says what is wrong).
std::string UnknownCommandHint(CLI::App& app, int argc, char** argv) {
  using rocefab::StrCat;
  CLI::App* level = &app;
  std::string path = "rocefab";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.starts_with("-")) {
      if (arg.find('=') != std::string_view::npos) continue;
      // An option that takes a value consumes the next word.
      const CLI::Option* option = nullptr;
      for (CLI::App* a = level; a != nullptr && option == nullptr; a = a->get_parent())
        option = a->get_option_no_throw(std::string(arg));
      if (option != nullptr && option->get_items_expected_min() > 0) ++i;
      continue;
    }
    const std::vector<CLI::App*> commands = level->get_subcommands([](CLI::App*) { return true; });
    if (commands.empty()) return "";  // an argument of a command
    CLI::App* next = nullptr;
    std::vector<std::string> names;
    for (CLI::App* c : commands) {
      if (c->check_name(std::string(arg))) next = c;
      names.push_back(c->get_name());
    }
    if (next != nullptr) {
      level = next;
      path = StrCat(path, " ", next->get_name());
      continue;
    }
    const std::vector<std::string> near = rocefab::NearestNames(arg, names, 1);
    return StrCat("unknown command '", arg, "' for '", path, "'",
                  near.empty() ? "" : StrCat("; did you mean '", path, " ", near[0], "'?"), " (", path, " --help)");
  }
  return "";
}

}  // namespace

int RocefabCliMain(int argc, char** argv) {
  using namespace rocefab::cli;
  CLI::App app{"rocefab: troubleshoot the RoCE training fabric and drive its controller."};
  app.require_subcommand(1);
  // Global options may follow the subcommand: `rocefab counters --host h -o json`.
  app.fallthrough();
  app.get_formatter()->column_width(34);
  app.footer(
      "Exit codes: 0 a result; 1 nothing matched, not found, or the change was refused or failed; "
      "2 bad usage (a flag, an unknown name); 3 a daemon did not answer; 4 a daemon refused this "
      "identity. docs/operations.md has the on-call guide.");
  GlobalOptions global;
  app.add_option("--collector", global.collector,
                 "rocefab-collectord gRPC address, HOST[:PORT] (default port 9410); shards comma-separated")
      ->envname("ROCEFAB_COLLECTOR")
      ->capture_default_str();
  app.add_option("-o,--output", global.output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  app.add_option("--timeout-ms", global.timeout_ms, "RPC deadline")->capture_default_str();
  app.add_option("--tls-ca", global.tls_ca, "CA file (PEM) the daemons' certificates are signed by")
      ->envname("ROCEFAB_TLS_CA");
  app.add_option("--tls-cert", global.tls_cert, "your certificate (PEM); its CN is who you are to the daemons")
      ->envname("ROCEFAB_TLS_CERT");
  app.add_option("--tls-key", global.tls_key, "your private key (PEM)")->envname("ROCEFAB_TLS_KEY");
  app.add_flag("--insecure", global.insecure, "plaintext, for daemons started with --insecure");

  auto* agents = app.add_subcommand("agents", "list agents with last-seen time and samples");
  CountersOptions counters_options;
  auto* counters = app.add_subcommand(
      "counters", "latest counter values and per-second rates, from the collector's store");
  counters->add_option("--host", counters_options.host, "host or switch name");
  counters->add_option("--device", counters_options.device, "RDMA device (mlx5_0) or switch port");
  counters->add_option("--counter", counters_options.counter,
                       "vocabulary name, e.g. out_of_sequence, pfc_rx_pause_frames");
  counters->add_option("--scope", counters_options.scope, "nic, port or queue (collective timings: job show)");
  counters->add_option("--since", counters_options.since, "rate window, e.g. 30s, 5m")
      ->capture_default_str();
  counters->add_option("--top", counters_options.top,
                       "only the N series with the highest rate, highest first")
      ->check(CLI::PositiveNumber);
  counters->add_option("--prio", counters_options.prio, "only this PFC priority (0-7)")->check(CLI::Range(0, 7));
  counters->add_flag("--nonzero", counters_options.nonzero, "only series whose value or rate is not 0");
  counters->add_option("--sort", counters_options.sort, "rate: highest rate first")->check(CLI::IsMember({"rate"}));
  counters->add_flag("--allow-unknown", counters_options.allow_unknown,
                     "accept a --host/--device the collector's topology does not know");

  PfcOptions pfc_options;
  auto* pfc = app.add_subcommand("pfc", "PFC per port, pfcstat-style: pause frames per priority and the time paused");
  pfc->add_option("--host", pfc_options.host, "host or switch name");
  pfc->add_option("--device", pfc_options.device, "RDMA device or switch port");
  pfc->add_option("--since", pfc_options.since, "rate window (a few poll intervals shows a storm as it is)")
      ->capture_default_str();
  pfc->add_option("--prio", pfc_options.prio, "only this priority (0-7)")->check(CLI::Range(0, 7));
  pfc->add_flag("--nonzero", pfc_options.nonzero, "only ports with pause frames or pause time");
  pfc->add_flag("--totals", pfc_options.totals, "counter totals instead of rates");
  pfc->add_option("--watch", pfc_options.watch, "print again every period, e.g. 2s, until Ctrl-C");
  pfc->add_flag("--allow-unknown", pfc_options.allow_unknown, "accept a --host the topology does not know");

  ControlOptions control;
  app.add_option("--controller", control.controller, "rocefab-controllerd gRPC address, HOST[:PORT] (default port 9412)")
      ->envname("ROCEFAB_CONTROLLER")
      ->capture_default_str();
  auto* config = app.add_subcommand("config", "desired vs applied switch config, rollout, audit");
  config->require_subcommand(1);
  auto* plan = config->add_subcommand("plan", "what an apply would change, per switch");
  auto* apply = config->add_subcommand(
      "apply", "roll the desired config out: canary, then waves, each behind a health gate");
  apply->add_option("--canary", control.canary, "switches in the first wave")->capture_default_str();
  apply->add_option("--wave-size", control.wave_size, "switches per later wave")->capture_default_str();
  apply->add_option("--gate-seconds", control.gate_seconds,
                    "watch touched switches this long after each wave; a problem rolls back")
      ->capture_default_str();
  apply->add_flag("--dry-run", control.dry_run, "show the waves, change nothing");
  apply->add_option("--why", control.why, "reason, for the audit log");
  auto* status = config->add_subcommand("status", "desired and applied generation per switch, drift");
  auto* history = config->add_subcommand("history", "the audit log: who changed what, when, why");
  auto* abort_cmd = config->add_subcommand(
      "abort", "stop the running rollout before its next wave; it rolls back what it touched");
  abort_cmd->add_option("--why", control.why, "reason, for the audit log");
  history->add_option("--limit", control.limit, "entries")->capture_default_str();
  RoceCheckOptions roce_check;
  auto* check = app.add_subcommand("check", "consistency checks across hosts and switches");
  check->require_subcommand(1);
  auto* check_roce = check->add_subcommand(
      "roce", "each NIC's RoCE settings (PFC, DSCP trust and class, ECN, CNP priority) against the QoS its "
              "switch port applied; exit 1 on a mismatch");
  check_roce->add_option("--topology", roce_check.topology, "topology YAML: which switch port each NIC faces")
      ->envname("ROCEFAB_TOPOLOGY");
  check_roce->add_option("--host", roce_check.host, "only this host's NICs");
  auto* drain = app.add_subcommand("drain", "take a link or switch out of ECMP (checks capacity)");
  auto* undrain = app.add_subcommand("undrain", "put a drained link or switch back");
  for (auto* cmd : {drain, undrain}) {
    cmd->add_option("kind", control.kind, "link or switch")->required()->check(CLI::IsMember({"link", "switch"}));
    cmd->add_option("name", control.name, "a port (device/port) for a link, or a switch name")->required();
    cmd->add_option("--reason", control.reason,
                    cmd == drain ? "why, for the audit log (required)" : "why, for the audit log");
  }
  drain->add_flag("--force", control.force,
                  "drain even below the policy's minimum uplink capacity, or a host-facing port (its jobs stall)");
  for (auto* cmd : {drain, undrain})
    cmd->add_flag("--dry-run", control.dry_run, "run the capacity check and show the switches it would push; change nothing");

  JobOptions job_options;
  auto* job = app.add_subcommand("job", "the training job registry");
  job->require_subcommand(1);
  auto* job_start = job->add_subcommand("start", "register a running job and its ranks");
  job_start->add_option("--id", job_options.id, "job id (Slurm job id)")->required();
  job_start->add_option("--name", job_options.name, "job name");
  job_start->add_option("--ranks", job_options.ranks_file, "file of 'rank host gpu nic' lines");
  job_start->add_option("--hostlist", job_options.hostlist,
                        "Slurm hostlist, e.g. 'z1-r01-h[1-2]' (ranks host-major)");
  job_start->add_option("--gpus-per-host", job_options.gpus_per_host, "with --hostlist")
      ->capture_default_str();
  job_start->add_option("--topology", job_options.topology,
                        "with --hostlist: topology YAML to take each GPU's NIC from");
  job_start->add_flag("--allow-unknown", job_options.allow_unknown, "accept hosts and NICs the topology does not know");
  auto* job_end = job->add_subcommand("end", "mark a job ended");
  job_end->add_option("id", job_options.id, "job id")->required();
  auto* job_show = job->add_subcommand("show", "bus bandwidth per collective over time (NCCL's view)");
  job_show->add_option("id", job_options.id, "job id")->required();
  job_show->add_option("--since", job_options.since, "how far back, e.g. 10m")->capture_default_str();
  job_show->add_option("--bucket", job_options.bucket, "time per row, e.g. 10s, 1m")
      ->capture_default_str();
  DiagnoseOptions diagnose_options;
  auto* job_diagnose = job->add_subcommand(
      "diagnose", "why a job is slow or stuck: verdict, degraded intervals, ranked findings, playbook");
  job_diagnose->add_option("id", diagnose_options.id, "job id")->required();
  job_diagnose->add_option("--window", diagnose_options.window, "how far back to look, e.g. 10m, 1h")
      ->capture_default_str();
  job_diagnose->add_option("--at", diagnose_options.at,
                           "end of the window: RFC 3339 (2026-12-01T18:04:05Z), relative (-10m) or Unix seconds; "
                           "default now");
  job_diagnose->add_flag("--onset-only", diagnose_options.onset_only,
                         "only findings that started inside the window");
  job_diagnose->add_option("--limit", diagnose_options.limit, "findings to list")->capture_default_str();
  auto* fabric = app.add_subcommand("fabric", "fabric-wide views");
  fabric->require_subcommand(1);
  HealthOptions health_options;
  auto* fabric_health = fabric->add_subcommand(
      "health", "anomalies open now, with the jobs whose paths they cross");
  fabric_health->add_option("--since", health_options.since,
                            "also anomalies that ended within this long, e.g. 30m");
  fabric_health->add_flag("--all", health_options.all,
                          "also list consequences (pause-tree victims, loss behind a bad link)");
  TrafficOptions traffic_options;
  auto* fabric_traffic = fabric->add_subcommand(
      "traffic", "the traffic matrix centralized TE allocates over: rack-to-rack bytes/s, busiest first");
  fabric_traffic->add_option("--window", traffic_options.window_s, "seconds of counters to average over")
      ->check(CLI::Range(1, 300))
      ->capture_default_str();
  fabric_traffic->add_option("--top", traffic_options.top, "rack pairs to list")->capture_default_str();
  AlertOptions alert_options;
  auto* alert = app.add_subcommand("alert", "alerts the collector raised from anomalies, and silences");
  alert->require_subcommand(1);
  auto* alert_list = alert->add_subcommand("list", "alerts firing (--all: resolved ones too) and silences");
  alert_list->add_flag("--all", alert_options.all, "include resolved alerts");
  auto* alert_silence = alert->add_subcommand("silence", "mute alerts matching every given field");
  alert_silence->add_option("--kind", alert_options.kind, "finding kind, e.g. link_flap");
  alert_silence->add_option("--entity", alert_options.entity, "e.g. z1-rtsw03/Ethernet44");
  alert_silence->add_option("--job", alert_options.job, "training job id");
  alert_silence->add_option("--for", alert_options.duration, "how long, e.g. 30m, 2h")->capture_default_str();
  alert_silence->add_option("--comment", alert_options.comment, "why (required)");
  alert_silence->add_flag("--allow-unknown", alert_options.allow_unknown,
                          "accept an --entity the topology or a --job the registry does not know");
  auto* alert_unsilence = alert->add_subcommand("unsilence", "end a silence now");
  alert_unsilence->add_option("id", alert_options.id, "silence id (rocefab alert list)")->required();
  PlaybookOptions playbook_options;
  auto* playbook = app.add_subcommand("playbook", "machine-run remediation playbooks (audited)");
  playbook->require_subcommand(1);
  auto* playbook_run = playbook->add_subcommand(
      "run", "check preconditions, act, verify: e.g. drain a flapping fabric link once capacity allows");
  playbook_run->add_option("name", playbook_options.name, "playbook name (in --dir) or a .yaml path")->required();
  playbook_run->add_option("--target", playbook_options.target, "what to act on, e.g. z1-rtsw03/Ethernet44");
  playbook_run->add_flag("--dry-run", playbook_options.dry_run, "run the checks, describe the actions, change nothing");
  playbook_run->add_option("--dir", playbook_options.dir, "where the playbooks are")
      ->envname("ROCEFAB_PLAYBOOKS")
      ->capture_default_str();
  playbook_run->add_option("--topology", playbook_options.topology, "fabric topology, for the fabric_link check")
      ->capture_default_str();
  auto* playbook_list = playbook->add_subcommand("list", "the machine-run playbooks, and where the guides are");
  playbook_list->add_option("--dir", playbook_options.dir, "where the playbooks are")
      ->envname("ROCEFAB_PLAYBOOKS")
      ->capture_default_str();
  auto* playbook_runs = playbook->add_subcommand("runs", "the audit log of playbook runs");
  playbook_runs->add_option("--limit", playbook_options.limit, "newest N")->capture_default_str();
  auto* job_list = job->add_subcommand("list", "running jobs (--all: ended ones too)");
  job_list->add_flag("--all", job_options.all, "include ended jobs");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      if (const std::string hint = UnknownCommandHint(app, argc, argv); !hint.empty()) {
        std::cerr << "rocefab: " << hint << "\n";
        return kExitUsage;
      }
    }
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  // An address without a port means the daemon's default port.
  {
    std::string shards;
    for (const std::string& shard : CollectorShards(global))
      shards += (shards.empty() ? "" : ",") + WithDefaultPort(shard, 9410);
    global.collector = shards;
    control.controller = WithDefaultPort(control.controller, 9412);
  }
  if (agents->parsed()) return RunAgents(global, std::cout, std::cerr);
  if (counters->parsed()) return RunCounters(global, counters_options, std::cout, std::cerr);
  if (pfc->parsed()) return RunPfc(global, pfc_options, std::cout, std::cerr);
  if (job_start->parsed()) return RunJobStart(global, job_options, std::cout, std::cerr);
  if (job_end->parsed()) return RunJobEnd(global, job_options, std::cout, std::cerr);
  if (job_list->parsed()) return RunJobList(global, job_options, std::cout, std::cerr);
  if (job_show->parsed()) return RunJobShow(global, job_options, std::cout, std::cerr);
  if (job_diagnose->parsed()) return RunJobDiagnose(global, diagnose_options, std::cout, std::cerr);
  if (playbook_run->parsed()) return RunPlaybookRun(global, control, playbook_options, std::cout, std::cerr);
  if (playbook_list->parsed()) return RunPlaybookList(playbook_options, std::cout, std::cerr);
  if (playbook_runs->parsed()) return RunPlaybookRuns(global, playbook_options, std::cout, std::cerr);
  if (alert_list->parsed()) return RunAlertList(global, alert_options, std::cout, std::cerr);
  if (alert_silence->parsed()) return RunAlertSilence(global, alert_options, std::cout, std::cerr);
  if (alert_unsilence->parsed()) return RunAlertUnsilence(global, alert_options, std::cout, std::cerr);
  if (check_roce->parsed()) return RunCheckRoce(global, control, roce_check, std::cout, std::cerr);
  if (fabric_health->parsed()) return RunFabricHealth(global, health_options, std::cout, std::cerr);
  if (fabric_traffic->parsed()) return RunFabricTraffic(global, traffic_options, std::cout, std::cerr);
  if (plan->parsed()) return RunConfigPlan(global, control, std::cout, std::cerr);
  if (apply->parsed()) return RunConfigApply(global, control, std::cout, std::cerr);
  if (status->parsed()) return RunConfigStatus(global, control, std::cout, std::cerr);
  if (history->parsed()) return RunConfigHistory(global, control, std::cout, std::cerr);
  if (abort_cmd->parsed()) return RunConfigAbort(global, control, std::cout, std::cerr);
  if (drain->parsed()) return RunDrain(global, control, false, std::cout, std::cerr);
  if (undrain->parsed()) return RunDrain(global, control, true, std::cout, std::cerr);
  return kExitUsage;
}
