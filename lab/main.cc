// rocefab-lab: the fabric emulator. Generates topologies and runs scenarios
// against the real daemons.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "common/topology.h"
#include "lab/runner.h"
#include "lab/topology_gen.h"

namespace {

// The directory of this executable: the daemons are built beside it.
std::string SelfDir() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

}  // namespace

int main(int argc, char** argv) {
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
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
  run.daemons = !no_daemons;
  run.realtime = !(no_daemons && fast);
  run.write_files = !no_files;
  return lab::Run(run);
}
