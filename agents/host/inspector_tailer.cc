#include "agents/host/inspector_tailer.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace rocefab::hostd {
namespace {

constexpr size_t kMaxLine = 64 << 10;       // longer "lines" are garbage
constexpr size_t kMaxReadPerPoll = 8 << 20;  // per file, so one poll stays short

std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string JobFromDumpDir(std::string_view dir_name) {
  constexpr std::string_view kPrefix = "nccl-inspector-";
  if (!dir_name.starts_with(kPrefix)) return "";
  std::string_view job = dir_name.substr(kPrefix.size());
  if (job.empty() || job == "unknown-jobid") return "";
  // Printable ASCII of at most 128 characters (the collector's limit), like
  // a Slurm job id; anything else could not travel (proto3 strings must be
  // UTF-8), so the collector's registry names the job instead.
  if (job.size() > 128) return "";
  for (unsigned char c : job)
    if (c < 0x21 || c > 0x7e) return "";
  return std::string(job);
}

absl::StatusOr<v1::CollectiveRecord> ParseInspectorLine(std::string_view line, const std::string& job) {
  auto json = nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return absl::InvalidArgumentError("not a JSON object");
  auto header = json.find("header");
  auto metadata = json.find("metadata");
  if (header == json.end() || !header->is_object() || metadata == json.end() || !metadata->is_object())
    return absl::InvalidArgumentError("no header/metadata");
  const nlohmann::json* perf = nullptr;
  bool p2p = false;
  if (auto it = json.find("coll_perf"); it != json.end() && it->is_object()) perf = &*it;
  else if (auto p = json.find("p2p_perf"); p != json.end() && p->is_object()) perf = &*p, p2p = true;
  if (perf == nullptr) return absl::InvalidArgumentError("no coll_perf or p2p_perf");
  auto str = [](const nlohmann::json& o, const char* key) -> std::string {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : "";
  };
  auto num = [](const nlohmann::json& o, const char* key, double* out) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_number()) return false;
    *out = it->get<double>();
    return *out >= 0 && *out < 1e18;
  };
  const char* prefix = p2p ? "p2p" : "coll";
  double rank = 0, n_ranks = 0, seq = 0, bytes = 0, exec = 0, algbw = 0, busbw = 0, ts = 0;
  if (!num(*header, "rank", &rank) || !num(*header, "n_ranks", &n_ranks) ||
      !num(*perf, StrCat(prefix, "_sn").c_str(), &seq) ||
      !num(*perf, StrCat(prefix, "_msg_size_bytes").c_str(), &bytes) ||
      !num(*perf, StrCat(prefix, "_exec_time_us").c_str(), &exec))
    return absl::InvalidArgumentError("missing rank, n_ranks, sequence, size or time");
  num(*perf, p2p ? "p2p_algobw_gbs" : "coll_algobw_gbs", &algbw);  // "nan" strings stay 0
  num(*perf, p2p ? "p2p_busbw_gbs" : "coll_busbw_gbs", &busbw);
  num(*metadata, "dump_timestamp_us", &ts);
  const std::string op = str(*perf, p2p ? "p2p" : "coll");
  if (op.empty() || op.size() > 32) return absl::InvalidArgumentError("no collective name");
  v1::CollectiveRecord record;
  record.set_job(job);
  record.set_comm(str(*header, "id"));
  record.set_rank(static_cast<uint32_t>(rank));
  record.set_n_ranks(static_cast<uint32_t>(n_ranks));
  record.set_host(str(*metadata, "hostname"));
  record.set_op(op);
  record.set_seq(static_cast<uint64_t>(seq));
  record.set_bytes(static_cast<uint64_t>(bytes));
  record.set_exec_time_us(exec);
  record.set_algbw_gbs(algbw);
  record.set_busbw_gbs(busbw);
  record.set_timestamp_us(static_cast<int64_t>(ts));
  return record;
}

InspectorTailer::InspectorTailer(std::vector<std::string> dir_globs) : globs_(std::move(dir_globs)) {}

void InspectorTailer::ReadFile(const std::string& path, const std::string& job, FileState& state,
                               std::vector<v1::CollectiveRecord>* out, TailStats* stats) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return;
  }
  if (state.inode != 0 && state.inode != st.st_ino) {
    ++stats->rotations;  // a new file under the old name: read it whole
    state.offset = 0;
    state.partial.clear();
  } else if (static_cast<uint64_t>(st.st_size) < state.offset) {
    ++stats->truncations;
    state.offset = 0;
    state.partial.clear();
  }
  state.inode = st.st_ino;
  std::string chunk;
  size_t budget = kMaxReadPerPoll;
  char buf[65536];
  while (budget > 0) {
    const ssize_t n = ::pread(fd, buf, std::min(sizeof buf, budget), static_cast<off_t>(state.offset));
    if (n <= 0) break;
    chunk.append(buf, static_cast<size_t>(n));
    state.offset += static_cast<uint64_t>(n);
    budget -= static_cast<size_t>(n);
  }
  ::close(fd);
  state.partial += chunk;
  size_t start = 0;
  for (size_t nl; (nl = state.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(state.partial.data() + start, nl - start);
    if (line.empty()) continue;
    auto record = ParseInspectorLine(line, job);
    if (record.ok()) {
      out->push_back(std::move(*record));
      ++stats->records;
    } else {
      ++stats->bad_lines;
    }
  }
  state.partial.erase(0, start);
  if (state.partial.size() > kMaxLine) {
    // No newline in sight: not a line this format writes.
    ++stats->bad_lines;
    state.partial.clear();
  }
}

std::vector<v1::CollectiveRecord> InspectorTailer::Poll(TailStats* stats) {
  std::vector<v1::CollectiveRecord> out;
  std::map<std::string, FileState> seen;
  for (const std::string& pattern : globs_) {
    for (const std::string& dir : Glob(pattern)) {
      const std::string job = JobFromDumpDir(dir.substr(dir.rfind('/') + 1));
      for (const std::string& file : Glob(dir + "/*.log")) {
        FileState& state = files_[file];
        ReadFile(file, job, state, &out, stats);
        seen[file] = state;
      }
    }
  }
  files_.swap(seen);  // files that disappeared are forgotten
  stats->files = files_.size();
  return out;
}

}  // namespace rocefab::hostd
