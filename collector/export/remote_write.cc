#include "collector/export/remote_write.h"

#include <snappy.h>

#include <algorithm>
#include <map>

#include "common/counters.h"
#include "common/daemon_setup.h"
#include "common/http_client.h"
#include "common/log.h"
#include "common/strings.h"

namespace rocefab::collector {
namespace {

constexpr char kRemoteWriteLog[] = "remote-write";

bool ValidLabelName(const std::string& name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (i > 0 && std::isdigit(static_cast<unsigned char>(c)))))
      return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<RemoteWriteOptions> ResolveRemoteWrite(const v1::RemoteWriteConfig& config) {
  RemoteWriteOptions o;
  if (!config.url().starts_with("http://") && !config.url().starts_with("https://"))
    return absl::InvalidArgumentError(
        StrCat("remote_write url '", config.url(), "': expected http:// or https://"));
  o.url = config.url();
  o.name = config.name().empty() ? config.url() : config.name();
  for (const std::string& scope : config.scopes()) {
    v1::Scope parsed;
    if (!ParseScope(scope, &parsed))
      return absl::InvalidArgumentError(
          StrCat("remote_write scopes: '", scope, "' is not one of nic, port, queue, coll"));
    o.scopes.insert(parsed);
  }
  for (const std::string& counter : config.counters()) {
    bool known = false;
    for (const CounterDef& def : AllCounters()) known = known || def.name == counter;
    if (!known)
      return absl::InvalidArgumentError(
          StrCat("remote_write counters: '", counter, "' is not in the vocabulary (docs/counters.md)"));
    o.counters.insert(counter);
  }
  for (const auto& [name, value] : config.extra_labels()) {
    if (!ValidLabelName(name))
      return absl::InvalidArgumentError(
          StrCat("remote_write extra_labels: '", name, "' is not a label name"));
    o.extra_labels.emplace_back(name, value);
  }
  std::sort(o.extra_labels.begin(), o.extra_labels.end());
  if (config.max_queue_bytes()) o.max_queue_bytes = config.max_queue_bytes();
  if (config.max_samples_per_request()) o.max_samples_per_request = config.max_samples_per_request();
  if (config.has_timeout()) {
    const int64_t timeout = DurationToUs(config.timeout());
    if (timeout <= 0) return absl::InvalidArgumentError("remote_write timeout must be positive");
    o.timeout_us = timeout;
  }
  if (!config.basic_auth_file().empty()) {
    auto auth = ReadBasicAuthFile(config.basic_auth_file(), "remote_write");
    if (!auth.ok()) return auth.status();
    o.basic_auth = *auth;
  }
  return o;
}

namespace {

const SeriesOut& OutOf(const SeriesInfo* info, const RemoteWriteOptions& options, SeriesOutCache* cache) {
  auto [it, added] = cache->try_emplace(info);
  SeriesOut& out = it->second;
  if (!added || info == nullptr) return out;
  if (!options.scopes.empty() && !options.scopes.count(info->scope)) return out;
  if (!options.counters.empty() && !options.counters.count(info->counter)) return out;
  const CounterDef* def = FindCounter(info->scope, info->counter);
  if (def == nullptr || info->scope == v1::SCOPE_COLL) return out;
  out.send = true;
  out.scale = MetricScale(*def);
  out.labels = SeriesLabels(info->scope, info->entity, info->port, info->prio, info->queue);
  out.labels.emplace_back("__name__", MetricName(*def));
  for (const auto& extra : options.extra_labels) out.labels.push_back(extra);
  std::sort(out.labels.begin(), out.labels.end());
  return out;
}

}  // namespace

std::vector<std::pair<prometheus::WriteRequest, uint64_t>> BuildWriteRequests(const CommitRuns& runs,
                                                                              const RemoteWriteOptions& options,
                                                                              SeriesOutCache* cache) {
  // Per run: the columns to send and the entity (timestamp column) of each.
  struct Columns {
    std::vector<std::pair<size_t, size_t>> sent;  // (series index, entity index)
    std::vector<const SeriesOut*> out;
  };
  std::vector<Columns> columns(runs.runs.size());
  std::map<uint64_t, size_t> per_commit;  // samples each commit sends
  for (size_t r = 0; r < runs.runs.size(); ++r) {
    const DecodedRun& run = runs.runs[r];
    size_t s = 0;
    for (size_t e = 0; e < run.layout.entities(); ++e) {
      for (uint32_t k = 0; k < run.layout.entity_sizes[e]; ++k, ++s) {
        const SeriesOut& out = OutOf(runs.series[r][s], options, cache);
        if (!out.send) continue;
        columns[r].sent.emplace_back(s, e);
        columns[r].out.push_back(&out);
      }
    }
    for (const blocks::Poll& p : run.polls) per_commit[p.commit] += columns[r].sent.size();
  }
  // Requests end only where a commit ends, so the cursor is exact.
  std::vector<uint64_t> ends;
  size_t samples = 0;
  uint64_t previous = 0;
  for (const auto& [commit, n] : per_commit) {
    if (samples > 0 && samples + n > options.max_samples_per_request) {
      ends.push_back(previous);
      samples = 0;
    }
    samples += n;
    previous = commit;
  }
  if (samples > 0) ends.push_back(per_commit.rbegin()->first);
  std::vector<std::pair<prometheus::WriteRequest, uint64_t>> out;
  std::vector<size_t> next(runs.runs.size(), 0);  // per run: the first poll not yet sent
  for (uint64_t end : ends) {
    prometheus::WriteRequest request;
    for (size_t r = 0; r < runs.runs.size(); ++r) {
      const DecodedRun& run = runs.runs[r];
      size_t stop = next[r];
      while (stop < run.polls.size() && run.polls[stop].commit <= end) ++stop;
      if (stop == next[r]) continue;
      for (size_t c = 0; c < columns[r].sent.size(); ++c) {
        const auto [si, ei] = columns[r].sent[c];
        const SeriesOut& series_out = *columns[r].out[c];
        auto* series = request.add_timeseries();
        for (const auto& [name, value] : series_out.labels) {
          auto* label = series->add_labels();
          label->set_name(name);
          label->set_value(value);
        }
        for (size_t i = next[r]; i < stop; ++i) {
          auto* sample = series->add_samples();
          sample->set_value(static_cast<double>(run.polls[i].value[si]) * series_out.scale);
          sample->set_timestamp(run.polls[i].ts_us[ei] / 1000);
        }
      }
      next[r] = stop;
    }
    if (request.timeseries_size() > 0) out.emplace_back(std::move(request), end);
  }
  return out;
}

std::vector<prometheus::WriteRequest> BuildCollectiveRequests(const std::vector<CollectiveRow>& rows,
                                                             const RemoteWriteOptions& options) {
  std::vector<prometheus::WriteRequest> out;
  if (!options.scopes.empty() && !options.scopes.count(v1::SCOPE_COLL)) return out;
  prometheus::WriteRequest request;
  std::map<std::string, prometheus::TimeSeries*> by_series;
  size_t samples = 0;
  auto flush = [&] {
    if (request.timeseries_size() > 0) out.push_back(std::move(request));
    request = prometheus::WriteRequest();
    by_series.clear();
    samples = 0;
  };
  std::string key;
  for (const CollectiveRow& row : rows) {
    if (samples + 2 > options.max_samples_per_request) flush();
    const v1::CollectiveRecord& r = row.record;
    for (const auto& [name, value] : {std::pair{"rocefab_collective_busbw_gbs", r.busbw_gbs()},
                                      std::pair{"rocefab_collective_exec_time_seconds", r.exec_time_us() * 1e-6}}) {
      key.clear();
      StrAppend(&key, name, "|", r.job(), "|", r.comm(), "|", r.op(), "|", r.rank());
      prometheus::TimeSeries*& series = by_series[key];
      if (series == nullptr) {
        series = request.add_timeseries();
        // One series per (job, communicator, op, rank); host says where.
        std::vector<std::pair<std::string, std::string>> labels = {
            {"__name__", name},     {"job_id", r.job()},
            {"comm", r.comm()},     {"op", r.op()},
            {"rank", StrCat(r.rank())}, {"host", r.host()}};
        for (const auto& extra : options.extra_labels) labels.push_back(extra);
        std::sort(labels.begin(), labels.end());
        for (auto& [n, v] : labels) {
          auto* label = series->add_labels();
          label->set_name(std::move(n));
          label->set_value(std::move(v));
        }
      }
      auto* sample = series->add_samples();
      sample->set_value(value);
      sample->set_timestamp(r.timestamp_us() / 1000);
      ++samples;
    }
  }
  flush();
  return out;
}

RemoteWriter::RemoteWriter(RemoteWriteOptions options, Store& store, prometheus::Registry& registry,
                           const Clock& clock)
    : options_(std::move(options)),
      store_(store),
      clock_(clock),
      samples_family_(prometheus::BuildCounter()
                          .Name("rocefab_collector_remote_write_samples_total")
                          .Help("Samples by what became of them: sent (accepted by the receiver), "
                                "failed (a retried attempt), dropped (4xx, or over the queue bound)")
                          .Register(registry)),
      sent_(samples_family_.Add({{"remote", options_.name}, {"result", "sent"}})),
      failed_(samples_family_.Add({{"remote", options_.name}, {"result", "failed"}})),
      dropped_(samples_family_.Add({{"remote", options_.name}, {"result", "dropped"}})),
      pending_(prometheus::BuildGauge()
                   .Name("rocefab_collector_remote_write_pending_samples")
                   .Help("Stored samples the receiver has not accepted yet")
                   .Register(registry)
                   .Add({{"remote", options_.name}})),
      lag_(prometheus::BuildGauge()
               .Name("rocefab_collector_remote_write_lag_seconds")
               .Help("Age of the newest sample the receiver accepted, at acceptance")
               .Register(registry)
               .Add({{"remote", options_.name}})),
      queue_bytes_(prometheus::BuildGauge()
                       .Name("rocefab_collector_remote_write_queue_bytes")
                       .Help("Compressed bytes of stored samples not yet accepted")
                       .Register(registry)
                       .Add({{"remote", options_.name}})) {}

RemoteWriter::~RemoteWriter() { Stop(); }

absl::Status RemoteWriter::Start() {
  const std::string key = "remote_write_cursor:" + options_.name;
  auto saved = store_.GetMeta(key);
  if (saved.ok()) {
    cursor_ = std::strtoull(saved->c_str(), nullptr, 10);
  } else if (absl::IsNotFound(saved.status())) {
    cursor_ = store_.last_commit();
    SaveCursor(cursor_);
    LOG_INFO(kRemoteWriteLog, options_.name, ": new receiver, sending from commit ", cursor_.load());
  } else {
    return saved.status();
  }
  committed_ = store_.last_commit();
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void RemoteWriter::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void RemoteWriter::Notify(uint64_t commit) {
  committed_.store(commit);
  cv_.notify_one();
}

void RemoteWriter::SaveCursor(uint64_t commit) {
  if (auto s = store_.SetMeta("remote_write_cursor:" + options_.name, std::to_string(commit)); !s.ok())
    LOG_WARN(kRemoteWriteLog, options_.name, ": saving the cursor: ", s.message());
}

bool RemoteWriter::SleepFor(int64_t us) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::microseconds(us), [this] { return stopping_; });
  return !stopping_;
}

void RemoteWriter::EnforceBound() {
  auto backlog = store_.BacklogAfter(cursor_);
  if (!backlog.ok()) return;
  queue_bytes_.Set(static_cast<double>(backlog->bytes));
  pending_.Set(static_cast<double>(backlog->samples));
  if (backlog->bytes <= options_.max_queue_bytes) return;
  auto keep = store_.CommitKeeping(cursor_, options_.max_queue_bytes);
  if (!keep.ok() || *keep <= cursor_) return;
  auto skipped = store_.BacklogAfter(*keep);
  const uint64_t lost = skipped.ok() ? backlog->samples - skipped->samples : 0;
  dropped_.Increment(static_cast<double>(lost));
  LOG_WARN(kRemoteWriteLog, options_.name, ": unsent samples over max_queue_bytes (", backlog->bytes,
           " bytes); dropping about ", lost, " of the oldest, commits ", cursor_.load() + 1, "..", *keep);
  cursor_ = *keep;
  SaveCursor(*keep);
}

bool RemoteWriter::Send(const prometheus::WriteRequest& request, size_t samples) {
  std::string body;
  snappy::Compress(request.SerializeAsString().data(), request.ByteSizeLong(), &body);
  HttpPostOptions post;
  post.headers = {"Content-Type: application/x-protobuf", "Content-Encoding: snappy",
                  "X-Prometheus-Remote-Write-Version: 0.1.0", "User-Agent: rocefab-collectord"};
  post.timeout_ms = options_.timeout_us / 1000;
  post.basic_auth = options_.basic_auth;
  int64_t backoff = options_.initial_backoff_us;
  for (;;) {
    const HttpResult result = HttpPost(options_.url, body, post);
    if (result.status >= 200 && result.status < 300) {
      sent_.Increment(static_cast<double>(samples));
      return true;
    }
    const bool retry = result.status == 0 || result.status >= 500 || result.status == 429;
    if (!retry) {
      dropped_.Increment(static_cast<double>(samples));
      LOG_WARN(kRemoteWriteLog, options_.name, ": receiver answered ", result.status, " (", result.body.substr(0, 200),
               "); ", samples, " samples dropped");
      return true;
    }
    failed_.Increment(static_cast<double>(samples));
    LOG_DEBUG(kRemoteWriteLog, options_.name, ": ", result.status ? StrCat("HTTP ", result.status) : result.error,
              "; retrying in ", backoff / 1000, " ms");
    if (!SleepFor(backoff)) return false;
    backoff = std::min(backoff * 2, options_.max_backoff_us);
    EnforceBound();
  }
}

void RemoteWriter::Loop() {
  // A read takes every commit since the last, up to commits_per_read_
  // (at most this many): group commits are small (one per ack round), and
  // each read costs a query per open run, so reads are also spaced by
  // kReadEvery while they keep up.
  constexpr uint64_t kCommitsPerRead = 4096;
  constexpr auto kReadEvery = std::chrono::milliseconds(200);
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(1),
                   [this] { return stopping_ || committed_.load() > cursor_.load(); });
      if (stopping_) return;
      if (committed_.load() - cursor_.load() < commits_per_read_)
        cv_.wait_for(lock, kReadEvery, [this] { return stopping_; });
      if (stopping_) return;
    }
    const int64_t now = clock_.MonotonicUs();
    if (now - last_bound_check_us_ > 1'000'000) {
      last_bound_check_us_ = now;
      EnforceBound();  // also refreshes the pending and queue gauges
    }
    const uint64_t from = cursor_.load();
    const uint64_t upto = std::min(committed_.load(), from + commits_per_read_);
    if (upto <= from) continue;
    if (from != cache_from_) cache_.runs.clear();  // the cursor moved on its own (bound)
    auto runs = store_.ReadCommitRuns(from, upto, &cache_);
    if (!runs.ok()) {
      LOG_ERROR(kRemoteWriteLog, options_.name, ": reading commits ", from + 1, "..", upto, ": ", runs.status().message());
      cache_.runs.clear();
      cache_from_ = UINT64_MAX;
      if (!SleepFor(1'000'000)) return;
      continue;
    }
    // Collective records of the same commits go first: if the collector
    // stops between the two, both are sent again, and a receiver takes a
    // repeated sample as a no-op.
    auto collectives = store_.ReadCollectiveCommits(from, upto);
    if (!collectives.ok()) {
      LOG_ERROR(kRemoteWriteLog, options_.name, ": reading collective records ", from + 1, "..", upto, ": ",
                collectives.status().message());
      cache_.runs.clear();
      cache_from_ = UINT64_MAX;
      if (!SleepFor(1'000'000)) return;
      continue;
    }
    for (auto& request : BuildCollectiveRequests(*collectives, options_)) {
      size_t samples = 0;
      for (const auto& ts : request.timeseries()) samples += ts.samples_size();
      if (!Send(request, samples)) return;
    }
    int64_t newest_us = 0;
    size_t read_samples = 0;
    for (const DecodedRun& run : runs->runs) {
      read_samples += run.polls.size() * run.layout.series.size();
      for (const blocks::Poll& p : run.polls)
        for (int64_t ts : p.ts_us) newest_us = std::max(newest_us, ts);
    }
    // The next read's span: near kSamplesPerRead samples, so memory stays
    // bounded however far behind the receiver is.
    constexpr size_t kSamplesPerRead = 200'000;
    if (read_samples > 2 * kSamplesPerRead) commits_per_read_ = std::max<uint64_t>(1, commits_per_read_ / 2);
    else if (read_samples < kSamplesPerRead / 2 && upto - from == commits_per_read_)
      commits_per_read_ = std::min<uint64_t>(kCommitsPerRead, commits_per_read_ * 2);
    auto requests = BuildWriteRequests(*runs, options_, &series_out_);
    for (auto& [request, last] : requests) {
      size_t samples = 0;
      for (const auto& ts : request.timeseries()) samples += ts.samples_size();
      if (!Send(request, samples)) return;
      cursor_ = std::max(cursor_.load(), last);
    }
    // Commits without samples to send (collectives only, or filtered out)
    // still move the cursor.
    cursor_ = std::max(cursor_.load(), upto);
    cache_from_ = upto;
    SaveCursor(cursor_);
    if (newest_us > 0) lag_.Set(static_cast<double>(clock_.NowUs() - newest_us) / 1e6);
  }
}

}  // namespace rocefab::collector
