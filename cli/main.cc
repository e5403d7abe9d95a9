// rocefab: the operator's command line. Tables for people, -o json for
// scripts; exit 0 on success, 1 when the collector fails or is unreachable,
// 2 on bad usage.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.h"
#include "cli/control_commands.h"
#include "cli/diagnose_commands.h"
#include "cli/job_commands.h"
#include "cli/playbook_commands.h"

int main(int argc, char** argv) {
  using namespace rocefab::cli;
  CLI::App app{"rocefab: troubleshoot the RoCE training fabric and drive its controller."};
  app.require_subcommand(1);
  // Global options may follow the subcommand: `rocefab counters --host h -o json`.
  app.fallthrough();
  app.get_formatter()->column_width(34);
  GlobalOptions global;
  app.add_option("--collector", global.collector, "rocefab-collectord gRPC address")
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
  counters->add_option("--scope", counters_options.scope, "nic, port, queue or coll");
  counters->add_option("--since", counters_options.since, "rate window, e.g. 30s, 5m")
      ->capture_default_str();
  counters->add_option("--top", counters_options.top,
                       "only the N series with the highest rate, highest first")
      ->check(CLI::PositiveNumber);

  ControlOptions control;
  app.add_option("--controller", control.controller, "rocefab-controllerd gRPC address")
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
  auto* drain = app.add_subcommand("drain", "take a link or switch out of ECMP (checks capacity)");
  auto* undrain = app.add_subcommand("undrain", "put a drained link or switch back");
  for (auto* cmd : {drain, undrain}) {
    cmd->add_option("kind", control.kind, "link or switch")->required()->check(CLI::IsMember({"link", "switch"}));
    cmd->add_option("name", control.name, "a port (device/port) for a link, or a switch name")->required();
    cmd->add_option("--reason", control.reason, "why, for the audit log");
  }
  drain->add_flag("--force", control.force, "drain even below the policy's minimum uplink capacity");
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
  job_diagnose->add_option("--at", diagnose_options.at_unix_s,
                           "end of the window, Unix seconds (default: now)");
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
  auto* playbook_runs = playbook->add_subcommand("runs", "the audit log of playbook runs");
  playbook_runs->add_option("--limit", playbook_options.limit, "newest N")->capture_default_str();
  auto* job_list = job->add_subcommand("list", "running jobs (--all: ended ones too)");
  job_list->add_flag("--all", job_options.all, "include ended jobs");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (agents->parsed()) return RunAgents(global, std::cout, std::cerr);
  if (counters->parsed()) return RunCounters(global, counters_options, std::cout, std::cerr);
  if (job_start->parsed()) return RunJobStart(global, job_options, std::cout, std::cerr);
  if (job_end->parsed()) return RunJobEnd(global, job_options, std::cout, std::cerr);
  if (job_list->parsed()) return RunJobList(global, job_options, std::cout, std::cerr);
  if (job_show->parsed()) return RunJobShow(global, job_options, std::cout, std::cerr);
  if (job_diagnose->parsed()) return RunJobDiagnose(global, diagnose_options, std::cout, std::cerr);
  if (playbook_run->parsed()) return RunPlaybookRun(global, control, playbook_options, std::cout, std::cerr);
  if (playbook_runs->parsed()) return RunPlaybookRuns(global, playbook_options, std::cout, std::cerr);
  if (alert_list->parsed()) return RunAlertList(global, alert_options, std::cout, std::cerr);
  if (alert_silence->parsed()) return RunAlertSilence(global, alert_options, std::cout, std::cerr);
  if (alert_unsilence->parsed()) return RunAlertUnsilence(global, alert_options, std::cout, std::cerr);
  if (fabric_health->parsed()) return RunFabricHealth(global, health_options, std::cout, std::cerr);
  if (plan->parsed()) return RunConfigPlan(global, control, std::cout, std::cerr);
  if (apply->parsed()) return RunConfigApply(global, control, std::cout, std::cerr);
  if (status->parsed()) return RunConfigStatus(global, control, std::cout, std::cerr);
  if (history->parsed()) return RunConfigHistory(global, control, std::cout, std::cerr);
  if (abort_cmd->parsed()) return RunConfigAbort(global, control, std::cout, std::cerr);
  if (drain->parsed()) return RunDrain(global, control, false, std::cout, std::cerr);
  if (undrain->parsed()) return RunDrain(global, control, true, std::cout, std::cerr);
  return 2;
}
