#pragma once
// Collective timings from NCCL's Inspector profiler plugin
// (plugins/profiler/inspector, output format v4.0): JSON Lines files
// <dump-dir>/<hostname>-pid<pid>.log, one `coll_perf` (or `p2p_perf`) record
// a line. Dump directories are named nccl-inspector-<SLURM_JOBID> by default,
// which gives the job; nccl-inspector-unknown-jobid leaves it empty for the
// collector's job registry to fill in.
//
// The tailer follows every file under the configured directory globs: it
// reads only complete new lines, holds a partial last line until it is
// finished, starts over when a file is truncated or replaced (rotation), and
// counts and skips garbage. One thread at a time.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "rocefab/v1/jobs.pb.h"

namespace rocefab::hostd {

struct TailStats {
  uint64_t records = 0;
  uint64_t bad_lines = 0;     // not JSON, or not an Inspector record
  uint64_t truncations = 0;   // a file got shorter: read again from the start
  uint64_t rotations = 0;     // a new file under the same name
  uint64_t files = 0;         // files followed
};

// "nccl-inspector-4711" -> "4711"; "nccl-inspector-unknown-jobid" -> "".
std::string JobFromDumpDir(std::string_view dir_name);

// Parses one line. `job` is the job its directory names (may be empty).
absl::StatusOr<v1::CollectiveRecord> ParseInspectorLine(std::string_view line, const std::string& job);

class InspectorTailer final {
 public:
  // `dir_globs`: patterns of dump directories, e.g. "/var/log/nccl-inspector-*".
  explicit InspectorTailer(std::vector<std::string> dir_globs);
  // New records since the last poll, in file order.
  std::vector<v1::CollectiveRecord> Poll(TailStats* stats);

 private:
  struct FileState {
    uint64_t inode = 0;
    uint64_t offset = 0;
    std::string partial;  // bytes after the last newline
  };
  void ReadFile(const std::string& path, const std::string& job, FileState& state,
                std::vector<v1::CollectiveRecord>* out, TailStats* stats);
  std::vector<std::string> globs_;
  std::map<std::string, FileState> files_;
};

}  // namespace rocefab::hostd
