#pragma once
// The remote-write export module: forwards every stored counter sample to a
// Prometheus remote-write 1.0 receiver (VictoriaMetrics, Mimir, Thanos
// Receive, Prometheus), in commit order.
//
// The queue is the local store itself: the module keeps a durable cursor
// (the last commit the receiver accepted) and reads what was committed after
// it, so a receiver outage loses nothing an agent was acked for, across
// collector restarts too. Retention spares unsent commits (HoldAfter) up to
// `max_queue_bytes`; past that the oldest unsent samples are dropped and
// counted. Status codes follow the specification: 2xx accepted; 5xx, 429 and
// transport errors retried with backoff; any other 4xx dropped and counted.
//
// One thread per receiver. Notify() is called from the store thread.

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "collector/store.h"
#include "common/clock.h"
#include "prometheus/remote.pb.h"
#include "rocefab/v1/config.pb.h"

namespace rocefab::collector {

struct RemoteWriteOptions {
  std::string url;
  std::string name;  // the cursor's key
  std::set<v1::Scope> scopes;         // empty: nic, port, queue and coll
  std::set<std::string> counters;     // empty: every counter
  std::vector<std::pair<std::string, std::string>> extra_labels;
  uint64_t max_queue_bytes = 1ULL << 30;
  uint32_t max_samples_per_request = 20'000;
  int64_t timeout_us = 30'000'000;
  std::string basic_auth;  // user:password
  int64_t initial_backoff_us = 250'000;
  int64_t max_backoff_us = 30'000'000;
};

// Checks and fills defaults. Errors name the offending key.
absl::StatusOr<RemoteWriteOptions> ResolveRemoteWrite(const v1::RemoteWriteConfig& config);

// How each series is sent, worked out once per series: its labels (with
// __name__ and the extra labels, sorted) and its unit scale, or not at all
// (filtered out, or not in the vocabulary).
struct SeriesOut {
  bool send = false;
  double scale = 1;
  std::vector<std::pair<std::string, std::string>> labels;
};
using SeriesOutCache = std::unordered_map<const SeriesInfo*, SeriesOut>;

// Builds the WriteRequests for `runs`, column by column: at most
// `max_samples_per_request` samples each, split only between commits (a
// commit larger than that is one request). Exposed for tests.
std::vector<std::pair<prometheus::WriteRequest, uint64_t /*last commit*/>> BuildWriteRequests(
    const CommitRuns& runs, const RemoteWriteOptions& options, SeriesOutCache* cache);

// The WriteRequests for collective records: per (job, communicator, op,
// rank) a rocefab_collective_busbw_gbs and a
// rocefab_collective_exec_time_seconds series (docs/metrics.md). Empty when
// the scopes leave out "coll". Exposed for tests.
std::vector<prometheus::WriteRequest> BuildCollectiveRequests(const std::vector<CollectiveRow>& rows,
                                                             const RemoteWriteOptions& options);

class RemoteWriter final {
 public:
  RemoteWriter(RemoteWriteOptions options, Store& store, prometheus::Registry& registry,
               const Clock& clock);
  ~RemoteWriter();
  RemoteWriter(const RemoteWriter&) = delete;
  RemoteWriter& operator=(const RemoteWriter&) = delete;

  // Loads the cursor (a new receiver starts at the current commit: history
  // is not replayed to it) and starts the thread.
  absl::Status Start();
  void Stop();
  // The store committed up to `commit`.
  void Notify(uint64_t commit);
  // Commits at or below this one were accepted (or dropped); retention may
  // take them. Any thread.
  uint64_t cursor() const { return cursor_.load(); }

 private:
  void Loop();
  // Sends one request until it is accepted or dropped, or Stop(). False on Stop.
  bool Send(const prometheus::WriteRequest& request, size_t samples);
  void SaveCursor(uint64_t commit);
  void EnforceBound();
  bool SleepFor(int64_t us);

  RemoteWriteOptions options_;
  Store& store_;
  const Clock& clock_;
  std::atomic<uint64_t> cursor_{0};
  std::atomic<uint64_t> committed_{0};
  prometheus::Family<prometheus::Counter>& samples_family_;
  prometheus::Counter& sent_;
  prometheus::Counter& failed_;
  prometheus::Counter& dropped_;
  prometheus::Gauge& pending_;
  prometheus::Gauge& lag_;
  prometheus::Gauge& queue_bytes_;
  CommitCursorCache cache_;  // the loop thread's
  SeriesOutCache series_out_;
  uint64_t commits_per_read_ = 256;  // adapts to keep a read near kSamplesPerRead
  uint64_t cache_from_ = 0;  // the read the cache follows on from
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  int64_t last_bound_check_us_ = 0;
  std::thread thread_;
};

}  // namespace rocefab::collector
