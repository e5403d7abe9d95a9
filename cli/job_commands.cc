#include "cli/job_commands.h"

#include <charconv>
#include <cstdio>
#include <set>

#include "cli/table.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/fs_root.h"
#include "common/grpc_util.h"
#include "common/hostlist.h"
#include "common/strings.h"
#include "common/topology.h"
#include "rocefab/v1/query.grpc.pb.h"

namespace rocefab::cli {

absl::StatusOr<v1::Job> ParseRanksFile(std::string_view text, std::string_view source) {
  v1::Job job;
  int line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string line(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    for (char& c : line)
      if (c == ',' || c == '\t' || c == '\r') c = ' ';
    std::vector<std::string> fields;
    for (size_t i = 0; i < line.size();) {
      while (i < line.size() && line[i] == ' ') ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ') ++j;
      if (j > i) fields.push_back(line.substr(i, j - i));
      i = j;
    }
    if (fields.empty()) continue;
    uint32_t rank = 0, gpu = 0;
    auto number = [](const std::string& t, uint32_t* v) {
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *v);
      return ec == std::errc() && p == t.data() + t.size();
    };
    if (fields.size() != 4 || !number(fields[0], &rank) || !number(fields[2], &gpu))
      return absl::InvalidArgumentError(
          StrCat(source, ":", line_no, ": expected 'rank host gpu nic', e.g. '0 z1-r01-h1 0 mlx5_0'"));
    auto* r = job.add_ranks();
    r->set_rank(rank);
    r->set_host(fields[1]);
    r->set_gpu(gpu);
    r->set_nic(fields[3]);
  }
  if (job.ranks().empty()) return absl::InvalidArgumentError(StrCat(source, ": no ranks"));
  return job;
}

absl::StatusOr<v1::Job> RanksFromHostlist(const std::string& hostlist, uint32_t gpus_per_host,
                                          const std::string& topology_path) {
  if (gpus_per_host == 0 || gpus_per_host > 64)
    return absl::InvalidArgumentError("--gpus-per-host must be 1-64");
  auto hosts = ExpandHostlist(hostlist);
  if (!hosts.ok()) return hosts.status();
  std::shared_ptr<const Topology> topology;
  if (!topology_path.empty()) {
    auto loaded = Topology::Load(topology_path);
    if (!loaded.ok()) return loaded.status();
    topology = *loaded;
  }
  v1::Job job;
  for (size_t h = 0; h < hosts->size(); ++h) {
    const v1::TopoHost* host = topology ? topology->FindHost((*hosts)[h]) : nullptr;
    if (topology && host == nullptr)
      return absl::InvalidArgumentError(StrCat("host ", (*hosts)[h], " is not in ", topology_path));
    for (uint32_t g = 0; g < gpus_per_host; ++g) {
      auto* r = job.add_ranks();
      r->set_rank(static_cast<uint32_t>(h) * gpus_per_host + g);
      r->set_host((*hosts)[h]);
      r->set_gpu(g);
      r->set_nic(StrCat("mlx5_", g));
      if (host != nullptr)
        for (const auto& nic : host->nics())
          if (nic.gpu() == g) r->set_nic(nic.name());
    }
  }
  return job;
}

int RunJobStart(const GlobalOptions& g, const JobOptions& o, std::ostream& out, std::ostream& err) {
  if (o.ranks_file.empty() == o.hostlist.empty()) {
    err << "rocefab: job start needs --ranks FILE or --hostlist LIST (one of them)\n";
    return 2;
  }
  absl::StatusOr<v1::Job> job = absl::InternalError("unset");
  if (!o.ranks_file.empty()) {
    auto text = ReadWholeFile(o.ranks_file);
    if (!text.ok()) {
      err << "rocefab: " << text.status().message() << "\n";
      return 2;
    }
    job = ParseRanksFile(*text, o.ranks_file);
  } else {
    job = RanksFromHostlist(o.hostlist, o.gpus_per_host, o.topology);
  }
  if (!job.ok()) {
    err << "rocefab: " << job.status().message() << "\n";
    return 2;
  }
  job->set_id(o.id);
  job->set_name(o.name);
  v1::StartJobRequest request;
  request.set_allow_unknown(o.allow_unknown);
  *request.mutable_job() = *job;
  // Every shard keeps the registry: each correlates the job with its part
  // of the fabric.
  std::vector<v1::StartJobResponse> responses(CollectorShards(g).size());
  if (int code = WithShards(g, err, [&](auto& stub, auto* ctx, size_t i) {
        return stub.StartJob(ctx, request, &responses[i]);
      });
      code != 0)
    return code;
  const v1::StartJobResponse& response = responses[0];
  if (g.output == "json")
    PrintJson(response, out);
  else
    out << "job " << response.job().id() << " started: " << response.job().ranks_size() << " ranks\n";
  return 0;
}

int RunJobEnd(const GlobalOptions& g, const JobOptions& o, std::ostream& out, std::ostream& err) {
  v1::EndJobRequest request;
  request.set_id(o.id);
  std::vector<v1::EndJobResponse> responses(CollectorShards(g).size());
  if (int code = WithShards(g, err, [&](auto& stub, auto* ctx, size_t i) {
        return stub.EndJob(ctx, request, &responses[i]);
      });
      code != 0)
    return code;
  out << "job " << o.id << " ended\n";
  return 0;
}

Table JobShowTable(const v1::JobTimelineResponse& response, int64_t bucket_us, int64_t now_us, int* stalls) {
  Table table({"TIME", "COLLECTIVE", "RANKS", "RECORDS", "BUSBW GB/S (MEAN)", "SLOWEST RANK (ITS BUSBW)",
               "MAX KERNEL MS"});
  *stalls = 0;
  if (response.points().empty() || bucket_us <= 0) return table;
  // Buckets with no record at all, from the first one up to the last whole
  // bucket of the job's life: nothing completed, a stall.
  const int64_t life_end_us = response.job().end_us() ? std::min(now_us, response.job().end_us()) : now_us;
  const int64_t last_whole_us = life_end_us - life_end_us % bucket_us - bucket_us;
  std::set<int64_t> with_records;
  for (const auto& p : response.points()) with_records.insert(p.start_us());
  char mean[32], slowest[96], exec[32];
  int64_t next_us = response.points(0).start_us();
  auto add_stalls_until = [&](int64_t until_us) {
    for (; next_us < until_us; next_us += bucket_us)
      if (!with_records.count(next_us)) {
        table.AddRow({Ago(now_us, next_us), "STALL", "0", "0", "-", "no collective completed", "-"});
        ++*stalls;
      }
  };
  for (const auto& p : response.points()) {
    add_stalls_until(p.start_us());
    next_us = std::max(next_us, p.start_us() + bucket_us);
    std::snprintf(mean, sizeof mean, "%.1f", p.mean_busbw_gbs());
    const std::string who = !p.slowest_rank_at().empty() ? p.slowest_rank_at()
                            : p.has_slowest_rank()       ? StrCat("rank ", p.slowest_rank())
                                                         : "-";
    std::snprintf(slowest, sizeof slowest, "%s (%.1f GB/s)", who.c_str(), p.min_busbw_gbs());
    std::snprintf(exec, sizeof exec, "%.2f", p.max_exec_time_us() / 1000);
    table.AddRow({Ago(now_us, p.start_us()), p.op(), StrCat(p.ranks()), StrCat(p.records()), mean, slowest, exec});
  }
  add_stalls_until(last_whole_us + 1);
  return table;
}

int RunJobShow(const GlobalOptions& g, const JobOptions& o, std::ostream& out, std::ostream& err) {
  auto since = ParseDurationUs(o.since);
  if (!since.ok()) {
    err << "rocefab: --since: " << since.status().message() << "\n";
    return 2;
  }
  auto bucket = ParseDurationUs(o.bucket);
  if (!bucket.ok() || *bucket < 1'000'000) {
    err << "rocefab: --bucket: a duration of at least 1s, e.g. 10s or 1m\n";
    return 2;
  }
  v1::JobTimelineRequest request;
  request.set_job(o.id);
  request.set_since_us(SystemClock::Instance().NowUs() - *since);
  request.set_bucket_seconds(static_cast<uint32_t>(std::min<int64_t>(*bucket / 1'000'000, 86400)));
  v1::JobTimelineResponse response;
  if (int code = WithCollector(g, err, [&](auto& stub, auto* ctx) { return stub.JobTimeline(ctx, request, &response); });
      code != 0)
    return code;
  if (g.output == "json") {
    PrintJson(response, out);
    return response.points().empty() ? 1 : 0;
  }
  for (const auto& note : response.notes()) err << "note: " << note << "\n";
  if (response.points().empty()) {
    out << "no collective records for job " << o.id << " in the last " << o.since
        << " (is rocefab-hostd following its NCCL Inspector logs?)\n";
    return 1;
  }
  const int64_t now = response.now_us() ? response.now_us() : SystemClock::Instance().NowUs();
  int stalls = 0;
  const Table table =
      JobShowTable(response, static_cast<int64_t>(request.bucket_seconds()) * 1'000'000, now, &stalls);
  table.Print(out);
  if (stalls > 0)
    out << stalls << " bucket(s) of " << o.bucket << " with no collective record: the job stalled there "
        << "(rocefab job diagnose " << o.id << ")\n";
  return 0;
}

int RunJobList(const GlobalOptions& g, const JobOptions& o, std::ostream& out, std::ostream& err) {
  v1::ListJobsRequest request;
  request.set_include_ended(o.all);
  v1::ListJobsResponse response;
  if (int code = WithCollector(g, err, [&](auto& stub, auto* ctx) { return stub.ListJobs(ctx, request, &response); });
      code != 0)
    return code;
  if (g.output == "json") {
    PrintJson(response, out);
    return 0;
  }
  Table table({"JOB", "NAME", "STARTED", "ENDED", "RANKS", "HOSTS"});
  for (const auto& job : response.jobs()) {
    std::set<std::string> hosts;
    for (const auto& r : job.ranks()) hosts.insert(r.host());
    table.AddRow({job.id(), job.name(), Ago(response.now_us(), job.start_us()),
                  job.end_us() ? Ago(response.now_us(), job.end_us()) : "running",
                  StrCat(job.ranks_size()), StrCat(hosts.size())});
  }
  if (table.rows() == 0) out << "no jobs\n";
  else table.Print(out);
  return 0;
}

}  // namespace rocefab::cli
