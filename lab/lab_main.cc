// rocefab-lab: the fabric emulator. Generates topologies and runs scenarios
// against the real daemons.
#include "common/program_main.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/topology.h"
#include "common/process.h"
#include "common/strings.h"
#include "cli/commands.h"
#include "common/grpc_util.h"
#include "lab/generate.h"
#include "lab/runner.h"
#include "lab/score.h"
#include "lab/study.h"
#include "lab/topology_gen.h"
#include "rocefab/v1/query.grpc.pb.h"

namespace {

// The directory of this executable: the daemons are built beside it.
std::string SelfDir() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

}  // namespace

namespace {

// rocefab-lab study --placement-from-registry: the job's hosts (in rank
// order) and its dominant collective from the collector, then every scheme
// on that placement.
int RunWhatIfCommand(const rocefab::cli::GlobalOptions& g, const std::string& job_id, const std::string& topology_path,
                     const std::string& output) {
  using namespace rocefab;
  if (job_id.empty() || topology_path.empty()) {
    std::cerr << "rocefab-lab: study --placement-from-registry needs --job ID and --topology FILE\n";
    return 2;
  }
  auto topology = Topology::Load(topology_path);
  if (!topology.ok()) {
    std::cerr << "rocefab-lab: " << topology.status().message() << "\n";
    return 2;
  }
  auto tls = cli::ClientTls(g);
  if (!tls.ok()) {
    std::cerr << "rocefab-lab: " << tls.status().message() << "\n";
    return 2;
  }
  auto channel = MakeChannel(g.collector, *tls);
  if (!channel.ok()) {
    std::cerr << "rocefab-lab: " << channel.status().message() << "\n";
    return 2;
  }
  auto stub = v1::Query::NewStub(*channel);
  v1::ListJobsResponse jobs;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const grpc::Status status = stub->ListJobs(&ctx, v1::ListJobsRequest(), &jobs);
    if (!status.ok()) {
      std::cerr << "rocefab-lab: collector " << g.collector << ": " << status.error_message() << "\n";
      return 1;
    }
  }
  const v1::Job* job = nullptr;
  for (const auto& j : jobs.jobs())
    if (j.id() == job_id) job = &j;
  if (job == nullptr) {
    std::cerr << "rocefab-lab: job " << job_id << " is not running in the registry (rocefab job list)\n";
    return 1;
  }
  std::vector<const v1::RankPlacement*> ranks;
  for (const auto& r : job->ranks()) ranks.push_back(&r);
  std::stable_sort(ranks.begin(), ranks.end(), [](auto* a, auto* b) { return a->rank() < b->rank(); });
  std::vector<std::string> hosts;
  for (const auto* r : ranks)
    if (std::find(hosts.begin(), hosts.end(), r->host()) == hosts.end()) hosts.push_back(r->host());
  // The collective that moved the most records over the last 10 minutes.
  v1::JobTimelineResponse timeline;
  std::string op = "AllReduce", note;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::JobTimelineRequest request;
    request.set_job(job_id);
    request.set_since_us(jobs.now_us() - 600'000'000);
    std::map<std::string, uint64_t> records;
    if (stub->JobTimeline(&ctx, request, &timeline).ok())
      for (const auto& p : timeline.points()) records[p.op()] += p.records();
    if (records.empty()) {
      note = "no collective records in the last 10 minutes: assumed AllReduce";
    } else {
      op = std::max_element(records.begin(), records.end(),
                            [](const auto& a, const auto& b) { return a.second < b.second; })
               ->first;
    }
  }
  const v1::Collective collective = op == "AllToAll"        ? v1::COLLECTIVE_ALL_TO_ALL
                                    : op == "AllGather"     ? v1::COLLECTIVE_ALL_GATHER
                                    : op == "ReduceScatter" ? v1::COLLECTIVE_REDUCE_SCATTER
                                                            : v1::COLLECTIVE_ALL_REDUCE;
  auto what_if = lab::RunWhatIf(*topology, hosts, collective);
  if (!what_if.ok()) {
    std::cerr << "rocefab-lab: job " << job_id << ": " << what_if.status().message() << "\n";
    return 1;
  }
  const lab::StudyRow& best = what_if->rows[what_if->recommended];
  const std::string recommendation =
      best.scheme == "eecmp" ? StrCat("eecmp with qp_scaling: ", best.qps)
      : best.scheme == "te"  ? "te (E-ECMP with 4 QPs as its fallback)"
                             : best.scheme;
  if (output == "json") {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : what_if->rows)
      rows.push_back({{"scheme", r.scheme}, {"qps", r.qps}, {"busbw_gbs", r.busbw_gbs},
                      {"ideal_busbw_gbs", r.ideal_busbw_gbs}, {"max_to_mean", r.max_to_mean},
                      {"max_utilization", r.max_utilization}});
    std::cout << nlohmann::json{{"job", job_id}, {"hosts", hosts.size()}, {"collective", op}, {"rows", rows},
                                {"recommended", recommendation}, {"note", note}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::printf("job %s: %zu hosts, %s%s%s; predicted on its placement (the fabric model, docs/routing-study.md):\n",
              job_id.c_str(), hosts.size(), op.c_str(), note.empty() ? "" : "; ", note.c_str());
  std::printf("  %-12s %3s  %9s %6s  %8s\n", "SCHEME", "QPS", "BUSBW", "IDEAL", "MAX/MEAN");
  for (size_t i = 0; i < what_if->rows.size(); ++i) {
    const auto& r = what_if->rows[i];
    std::printf("  %-12s %3u  %9.1f %5.0f%%  %8.2f%s\n", r.scheme.c_str(), r.qps, r.busbw_gbs,
                r.ideal_busbw_gbs > 0 ? 100 * r.busbw_gbs / r.ideal_busbw_gbs : 0, r.max_to_mean,
                i == what_if->recommended ? "  <- recommended" : "");
  }
  std::printf("recommended: %s (the simplest scheme within 2%% of the best predicted busbw)\n",
              recommendation.c_str());
  return 0;
}

}  // namespace

int RocefabLabMain(int argc, char** argv) {
  using namespace rocefab;
  CLI::App app{"rocefab-lab: emulates an AI-training RoCE fabric on one machine and drives the "
               "real rocefab daemons with it."};
  app.require_subcommand(1);
  app.get_formatter()->column_width(34);

  lab::TopologyParams params;
  std::string topo_out;
  auto* topology = app.add_subcommand("topology", "generate an AI-Zone topology YAML");
  topology->add_option("--zones", params.zones, "AI Zones")->capture_default_str();
  topology->add_option("--racks-per-zone", params.racks_per_zone, "racks (RTSWs) per zone")
      ->capture_default_str();
  topology->add_option("--hosts-per-rack", params.hosts_per_rack, "GPU hosts per rack")
      ->capture_default_str();
  topology->add_option("--nics-per-host", params.nics_per_host, "RDMA NICs (GPUs) per host")
      ->capture_default_str();
  topology->add_option("--ctsw-per-zone", params.ctsw_per_zone, "spine switches per zone")
      ->capture_default_str();
  topology->add_option("--atsw", params.atsw, "aggregation switches joining the zones")
      ->capture_default_str();
  topology->add_option("--uplink-ratio", params.uplink_ratio,
                       "CTSW downlink:uplink capacity (7 means 1:7)")
      ->capture_default_str();
  topology->add_option("-o,--output", topo_out, "output file (- for stdout)")->required();
  bool llama3 = false;
  topology->add_flag("--llama3", llama3,
                     "the Llama 3 cluster's shape (24,576 NICs); other size flags are ignored");

  lab::RunOptions run;
  run.bin_dir = SelfDir();
  bool no_daemons = false, fast = false, no_files = false;
  auto* run_cmd = app.add_subcommand("run", "run a scenario: model, daemons, faults, timeline");
  run_cmd->add_option("scenario", run.scenario_path, "scenario YAML (see lab/scenarios/)")
      ->required()
      ->check(CLI::ExistingFile);
  run_cmd->add_option("--run-dir", run.run_dir, "directory for the run's files")->required();
  run_cmd->add_option("--duration", run.duration_s, "seconds to run (default: the scenario's)");
  run_cmd->add_flag("--no-daemons", no_daemons, "model only: write files, start no daemons");
  run_cmd->add_flag("--fast", fast, "with --no-daemons: do not pace ticks to the wall clock");
  run_cmd->add_flag("--no-files", no_files,
                    "with --no-daemons: model only, write no host or switch files (scale runs)");
  run_cmd->add_flag("--keep", run.keep, "keep running after the scenario ends, until interrupted");
  run_cmd->add_option("--bin-dir", run.bin_dir, "where the rocefab daemons are")
      ->capture_default_str();
  run_cmd->add_option("--timeline-every", run.timeline_every_s, "seconds between timeline lines")
      ->capture_default_str();
  run_cmd->add_option("--show", run.show_commands,
                      "a rocefab CLI command to run against the collector at the end, e.g. "
                      "--show 'counters --counter pfc_tx_pause_frames --since 30s' (repeatable)");
  run_cmd->add_option("--live-dir", run.live_dir,
                      "where the polled files live during the run (default: a tmpfs under /dev/shm)");

  run_cmd->add_option("--collector-arg", run.collector_args,
                      "an extra rocefab-collectord flag (repeatable), e.g. --collector-arg=--alertmanager "
                      "--collector-arg=http://127.0.0.1:9093");
  run_cmd->add_option("--time-scale", run.time_scale,
                      "scale the scenario's times (length, fault times, flap periods), e.g. 0.5")
      ->check(CLI::Range(0.1, 10.0));

  std::string score_dir, score_output = "table";
  auto* score = app.add_subcommand("score", "compare a run's anomalies and diagnoses with its truth.json");
  score->add_option("--run-dir", score_dir, "a finished run's directory")->required()->check(CLI::ExistingDirectory);
  score->add_option("-o,--output", score_output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();

  std::string suite_dir = ROCEFAB_SCENARIO_DIR, suite_out, suite_output = "table";
  std::vector<std::string> suite_only;
  double suite_scale = 1;
  int suite_parallel = 1;
  auto* suite = app.add_subcommand("suite", "run every scenario, score each, print the summary");
  suite->add_option("--scenarios", suite_dir, "directory of scenario YAMLs")->capture_default_str()
      ->check(CLI::ExistingDirectory);
  suite->add_option("--out", suite_out, "directory for the runs (default: a new one under /tmp)");
  suite->add_option("--only", suite_only, "scenario names to run (repeatable; default: all)");
  suite->add_option("--time-scale", suite_scale, "passed to every run, e.g. 0.5 for a quick suite")
      ->check(CLI::Range(0.1, 10.0))
      ->capture_default_str();
  suite->add_option("--parallel", suite_parallel, "runs at once")->check(CLI::Range(1, 8))->capture_default_str();
  suite->add_option("-o,--output", suite_output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  suite->add_option("--bin-dir", run.bin_dir, "where the rocefab daemons are")->capture_default_str();
  lab::GenerateOptions generate;
  int suite_generate = 0;
  suite->add_option("--generate", suite_generate,
                    "run N generated scenarios (random fabric, jobs and faults; docs/lab.md) instead of --scenarios")
      ->check(CLI::Range(1, 10000));
  suite->add_option("--seed", generate.seed, "seed of the generated scenarios")->capture_default_str();
  std::string generate_out;
  auto* generate_cmd = app.add_subcommand(
      "generate", "write N random scenarios (fabric, jobs, faults, severities, timings) to a directory");
  generate_cmd->add_option("--count", generate.count, "scenarios")->check(CLI::Range(1, 10000))->capture_default_str();
  generate_cmd->add_option("--seed", generate.seed, "seed: the same seed gives the same scenarios")
      ->capture_default_str();
  generate_cmd->add_option("-o,--out", generate_out, "directory for the scenario YAMLs")->required();
  lab::StudyOptions study_options;
  std::string study_failures = "0,1,4", study_output = "table";
  bool study_small = false;
  auto* study = app.add_subcommand(
      "study", "flow-level routing study: ECMP, path pinning, E-ECMP 1/4/16 QPs and TE on the Llama 3 "
               "fabric, AllReduce and AllToAll, packed and fragmented, with failed uplinks (docs/routing-study.md)");
  study->add_option("--allreduce-hosts", study_options.allreduce_hosts, "hosts of the AllReduce job")
      ->check(CLI::Range(2, 4096))
      ->capture_default_str();
  study->add_option("--alltoall-hosts", study_options.alltoall_hosts,
                    "hosts of the AllToAll job (its flows grow as hosts^2)")
      ->check(CLI::Range(2, 256))
      ->capture_default_str();
  study->add_option("--failures", study_failures, "failed rack uplinks per case, comma-separated")
      ->capture_default_str();
  study->add_option("--seed", study_options.seed, "placement and failure seed")->capture_default_str();
  study->add_flag("--small", study_small,
                  "the demo zone (8 racks x 2 hosts x 8 NICs, 4 CTSWs) instead of the Llama 3 fabric, with 8 "
                  "and 6 host jobs: seconds instead of minutes");
  bool from_registry = false;
  std::string whatif_job, whatif_topology;
  cli::GlobalOptions whatif;
  study->add_flag("--placement-from-registry", from_registry,
                  "what-if: predict one running job's busbw under each scheme for its real placement, from the "
                  "collector's job registry, and recommend one (needs --job and --topology)");
  study->add_option("--job", whatif_job, "the job for --placement-from-registry");
  study->add_option("--topology", whatif_topology, "the fabric's topology YAML for --placement-from-registry")
      ->check(CLI::ExistingFile);
  study->add_option("--collector", whatif.collector, "rocefab-collectord address (any shard: each holds the registry)")
      ->envname("ROCEFAB_COLLECTOR")
      ->capture_default_str();
  study->add_option("--tls-ca", whatif.tls_ca, "CA file (PEM)")->envname("ROCEFAB_TLS_CA");
  study->add_option("--tls-cert", whatif.tls_cert, "your certificate (PEM)")->envname("ROCEFAB_TLS_CERT");
  study->add_option("--tls-key", whatif.tls_key, "your private key (PEM)")->envname("ROCEFAB_TLS_KEY");
  study->add_option("-o,--output", study_output, "table, json or csv (for plots: scripts/routing-study.sh)")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  if (study->parsed() && from_registry) return RunWhatIfCommand(whatif, whatif_job, whatif_topology, study_output);
  if (study->parsed()) {
    study_options.failures.clear();
    for (std::string_view rest = study_failures; !rest.empty();) {
      const size_t comma = rest.find(',');
      const std::string item(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      char* end = nullptr;
      const unsigned long k = std::strtoul(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || k > 64) {
        std::cerr << "rocefab-lab: --failures: '" << item << "' is not a count of 0 to 64\n";
        return 2;
      }
      study_options.failures.push_back(static_cast<uint32_t>(k));
    }
    if (study_small) {
      study_options.topology = lab::TopologyParams{};
      study_options.allreduce_hosts = std::min<uint32_t>(study_options.allreduce_hosts, 8);
      study_options.alltoall_hosts = std::min<uint32_t>(study_options.alltoall_hosts, 6);
    }
    const auto start = std::chrono::steady_clock::now();
    auto rows = lab::RunStudy(study_options);
    if (!rows.ok()) {
      std::cerr << "rocefab-lab: study: " << rows.status().message() << "\n";
      return 1;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (study_output == "json") {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& r : *rows)
        out.push_back({{"collective", r.collective}, {"placement", r.placement}, {"failures", r.failures},
                       {"scheme", r.scheme}, {"qps", r.qps}, {"hosts", r.hosts}, {"max_to_mean", r.max_to_mean},
                       {"max_utilization", r.max_utilization}, {"mean_utilization", r.mean_utilization},
                       {"busbw_gbs", r.busbw_gbs}, {"ideal_busbw_gbs", r.ideal_busbw_gbs}});
      std::cout << nlohmann::json{{"rows", out}, {"ecmp_1000_flows_16_links_max_to_mean",
                                                  lab::EcmpMaxToMean(1000, 16, 1000, study_options.seed)},
                                  {"seconds", seconds}}
                       .dump(2)
                << "\n";
      return 0;
    }
    if (study_output == "csv") {
      std::printf("collective,placement,failures,scheme,qps,hosts,max_to_mean,max_utilization,mean_utilization,"
                  "busbw_gbs,ideal_busbw_gbs\n");
      for (const auto& r : *rows)
        std::printf("%s,%s,%u,%s,%u,%u,%.4f,%.4f,%.4f,%.2f,%.2f\n", r.collective.c_str(), r.placement.c_str(),
                    r.failures, r.scheme.c_str(), r.qps, r.hosts, r.max_to_mean, r.max_utilization,
                    r.mean_utilization, r.busbw_gbs, r.ideal_busbw_gbs);
      return 0;
    }
    std::printf("%-10s %-10s %3s  %-12s %3s  %8s %8s %8s %9s %6s\n", "COLLECTIVE", "PLACEMENT", "FL", "SCHEME",
                "QPS", "MAX/MEAN", "MAX UTIL", "MEAN", "BUSBW", "IDEAL");
    for (const auto& r : *rows)
      std::printf("%-10s %-10s %3u  %-12s %3u  %8.2f %8.2f %8.2f %9.1f %5.0f%%\n", r.collective.c_str(),
                  r.placement.c_str(), r.failures, r.scheme.c_str(), r.qps, r.max_to_mean, r.max_utilization,
                  r.mean_utilization, r.busbw_gbs, r.ideal_busbw_gbs > 0 ? 100 * r.busbw_gbs / r.ideal_busbw_gbs : 0);
    std::printf("ECMP's entropy: 1,000 flows hashed onto 16 links give max/mean %.2f (mean of 1,000 draws)\n",
                lab::EcmpMaxToMean(1000, 16, 1000, study_options.seed));
    std::printf("(%zu cases in %.1f s; FL: failed rack uplinks; MAX/MEAN over the footprint's links that carry "
                "traffic, MEAN over all of them; BUSBW in GB/s, IDEAL: share of the idle fabric's)\n",
                rows->size(), seconds);
    return 0;
  }
  if (topology->parsed()) {
    if (llama3) params = lab::Llama3Params();
    const auto start = std::chrono::steady_clock::now();
    auto proto = lab::GenerateTopology(params);
    if (!proto.ok()) {
      std::cerr << "rocefab-lab: " << proto.status().message() << "\n";
      return 2;
    }
    // Validate what we generate exactly as loaders will.
    auto checked = Topology::Build(*proto);
    if (!checked.ok()) {
      std::cerr << "rocefab-lab: generated an invalid topology: " << checked.status().message() << "\n";
      return 1;
    }
    if (topo_out == "-") {
      WriteTopologyYaml(*proto, std::cout);
    } else {
      std::ofstream out(topo_out);
      if (!out) {
        std::cerr << "rocefab-lab: cannot write " << topo_out << "\n";
        return 1;
      }
      WriteTopologyYaml(*proto, out);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      size_t nics = 0;
      for (const auto& host : proto->hosts()) nics += host.nics_size();
      std::cerr << "rocefab-lab: wrote " << topo_out << ": " << proto->switches_size()
                << " switches, " << proto->hosts_size() << " hosts, " << nics << " NICs, "
                << proto->links_size() << " links in " << seconds << " s\n";
    }
    return 0;
  }
  if (score->parsed()) {
    auto result = lab::ScoreRun(score_dir);
    if (!result.ok()) {
      std::cerr << "rocefab-lab: " << result.status().message() << "\n";
      return 1;
    }
    if (score_output == "json") std::cout << result->ToJson().dump(2) << "\n";
    else std::cout << lab::FormatScores({*result});
    return 0;
  }
  if (generate_cmd->parsed()) {
    auto paths = lab::WriteGeneratedScenarios(generate, generate_out);
    if (!paths.ok()) {
      std::cerr << "rocefab-lab: " << paths.status().message() << "\n";
      return 1;
    }
    for (const auto& path : *paths) std::cout << path << "\n";
    return 0;
  }
  if (suite->parsed()) {
    namespace fs = std::filesystem;
    if (suite_generate > 0) {
      if (suite_out.empty()) {
        char tmpl[] = "/tmp/rocefab-suite-XXXXXX";
        if (mkdtemp(tmpl) == nullptr) {
          std::cerr << "rocefab-lab: cannot create a directory under /tmp\n";
          return 1;
        }
        suite_out = tmpl;
      }
      generate.count = suite_generate;
      suite_dir = suite_out + "/scenarios";
      fs::remove_all(suite_dir);
      auto paths = lab::WriteGeneratedScenarios(generate, suite_dir);
      if (!paths.ok()) {
        std::cerr << "rocefab-lab: generating scenarios: " << paths.status().message() << "\n";
        return 1;
      }
    }
    std::vector<std::string> scenarios;
    for (const auto& entry : fs::directory_iterator(suite_dir)) {
      if (entry.path().extension() != ".yaml") continue;
      const std::string name = entry.path().stem().string();
      if (!suite_only.empty() && std::find(suite_only.begin(), suite_only.end(), name) == suite_only.end())
        continue;
      scenarios.push_back(entry.path().string());
    }
    std::sort(scenarios.begin(), scenarios.end());
    if (scenarios.empty()) {
      std::cerr << "rocefab-lab: no scenarios to run in " << suite_dir << "\n";
      return 2;
    }
    if (suite_out.empty()) {
      char tmpl[] = "/tmp/rocefab-suite-XXXXXX";
      if (mkdtemp(tmpl) == nullptr) {
        std::cerr << "rocefab-lab: cannot create a directory under /tmp\n";
        return 1;
      }
      suite_out = tmpl;
    }
    fs::create_directories(suite_out);
    std::cerr << "rocefab-lab: suite of " << scenarios.size() << " scenarios into " << suite_out << "\n";
    std::vector<std::string> pending = scenarios;
    std::reverse(pending.begin(), pending.end());
    struct Running {
      std::string name;
      std::unique_ptr<Subprocess> process;
    };
    std::vector<Running> running;
    std::vector<std::string> failed;
    while (!pending.empty() || !running.empty()) {
      while (!pending.empty() && static_cast<int>(running.size()) < suite_parallel) {
        const std::string path = pending.back();
        pending.pop_back();
        const std::string name = fs::path(path).stem().string();
        const std::string dir = suite_out + "/" + name;
        fs::remove_all(dir);
        auto p = Subprocess::Spawn({{run.bin_dir + "/rocefab-lab", "run", path, "--run-dir", dir, "--bin-dir",
                                     run.bin_dir, "--time-scale", StrCat(suite_scale), "--timeline-every", "1000"},
                                    {},
                                    suite_out + "/" + name + ".log",
                                    suite_out + "/" + name + ".log"});
        if (!p.ok()) {
          failed.push_back(name);
          continue;
        }
        std::cerr << "rocefab-lab: running " << name << "\n";
        running.push_back({name, std::move(*p)});
      }
      for (auto it = running.begin(); it != running.end();) {
        // Waiting for the runs themselves to finish.
        auto code = it->process->WaitFor(std::chrono::milliseconds(200));
        if (!code) {
          ++it;
          continue;
        }
        if (*code != 0) failed.push_back(it->name);
        it = running.erase(it);
      }
    }
    std::vector<lab::RunScore> scores;
    for (const std::string& path : scenarios) {
      const std::string name = fs::path(path).stem().string();
      if (std::find(failed.begin(), failed.end(), name) != failed.end()) continue;
      auto result = lab::ScoreRun(suite_out + "/" + name);
      if (!result.ok()) {
        std::cerr << "rocefab-lab: scoring " << name << ": " << result.status().message() << "\n";
        failed.push_back(name);
        continue;
      }
      if (result->scenario.empty()) result->scenario = name;
      scores.push_back(std::move(*result));
    }
    if (suite_output == "json") {
      nlohmann::json out = lab::Summarize(scores);
      out["run_dir"] = suite_out;
      out["failed_runs"] = failed;
      nlohmann::json runs = nlohmann::json::array();
      for (const auto& s : scores) runs.push_back(s.ToJson());
      out["scenarios"] = runs;
      std::cout << out.dump(2) << "\n";
    } else {
      std::cout << lab::FormatScores(scores);
      for (const auto& name : failed) std::cout << "run failed: " << name << " (see " << suite_out << "/" << name << ".log)\n";
    }
    return failed.empty() ? 0 : 1;
  }
  run.daemons = !no_daemons;
  run.realtime = !(no_daemons && fast);
  run.write_files = !no_files;
  return lab::Run(run);
}
