#pragma once
// rocefab job start|end|list: the collector's job registry. Slurm's prolog
// and epilog (deploy/slurm/) call these.

#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "rocefab/v1/jobs.pb.h"

namespace rocefab::cli {

struct JobOptions {
  std::string id, name, ranks_file, hostlist, topology;
  uint32_t gpus_per_host = 8;
  bool all = false;
  bool allow_unknown = false;
  std::string since = "10m";
  std::string bucket = "10s";
};

// A ranks file: one "rank host gpu nic" per line (spaces or commas), '#'
// comments. Errors name the line.
absl::StatusOr<v1::Job> ParseRanksFile(std::string_view text, std::string_view source);

// Ranks from a Slurm hostlist, host-major: rank = host index * G + gpu. The
// NIC of GPU g is the topology's NIC with that gpu, else mlx5_<g>.
absl::StatusOr<v1::Job> RanksFromHostlist(const std::string& hostlist, uint32_t gpus_per_host,
                                          const std::string& topology_path);

// job show's table: one row per bucket and collective, the slowest rank as
// host/gpuN with its busbw, and a STALL row for each whole bucket of the
// job's life with no record. `*stalls` counts those rows.
Table JobShowTable(const v1::JobTimelineResponse& response, int64_t bucket_us, int64_t now_us, int* stalls);

int RunJobStart(const GlobalOptions& g, const JobOptions& o, std::ostream& out, std::ostream& err);
int RunJobEnd(const GlobalOptions& g, const JobOptions& o, std::ostream& out, std::ostream& err);
int RunJobShow(const GlobalOptions& g, const JobOptions& o, std::ostream& out, std::ostream& err);
int RunJobList(const GlobalOptions& g, const JobOptions& o, std::ostream& out, std::ostream& err);

}  // namespace rocefab::cli
