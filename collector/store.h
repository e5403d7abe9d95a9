#pragma once
// The collector's durable store: one SQLite file in WAL mode. Schema in
// docs/architecture.md ("Collector store"). Store itself is the telemetry
// store (agents, counter samples, collective records); the job registry,
// the anomaly store and the playbook audit log live beside it in the same
// file (collector/store/) and are reached through jobs(), anomalies() and
// audit().
//
// Writes come from one writer thread (the Ingester) through WriteBatches,
// which stores many batches in one transaction; reads (the Query service)
// use a second connection and may run concurrently, as WAL allows.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "collector/store/anomaly_store.h"
#include "collector/store/audit_log.h"
#include "collector/store/job_registry.h"
#include "collector/store/sample_store.h"
#include "common/sqlite.h"
#include "rocefab/v1/diagnosis.pb.h"
#include "rocefab/v1/playbook.pb.h"
#include "rocefab/v1/query.pb.h"
#include "rocefab/v1/telemetry.pb.h"

namespace rocefab::collector {

struct StoreOptions {
  std::string path;
  bool relaxed_durability = false;  // synchronous=NORMAL instead of FULL
  SampleStore::Options samples = {};
  // A file in the row-per-sample schema (version 1) is converted on open;
  // false refuses it with a message instead.
  bool migrate = true;
  // Reads only (tests, tools beside a running collector): no writer, no
  // schema changes; write calls fail.
  bool read_only = false;
};

// One stored sample, as tests and exports read them back.
struct SampleRow {
  SeriesInfo series;
  int64_t ts_us = 0;
  uint64_t value = 0;
  bool has_delta = false;
  uint64_t delta = 0;
  bool reset = false;
  uint64_t commit = 0;
};

// Outcome of storing one batch.
struct WriteOutcome {
  v1::AckStatus status = v1::ACK_STATUS_STORED;
  uint64_t samples_written = 0;
  uint64_t samples_rejected = 0;  // unknown counter names, bad scope
  uint64_t collectives_written = 0;
};

// Counter samples older than the local store holds, from a TSDB
// (collector/history/promql_history.h).
class HistorySource {
 public:
  virtual ~HistorySource() = default;
  // Samples of every counter series of `device` (a host or a switch) with
  // timestamps in [from_us, to_us), oldest first.
  virtual absl::StatusOr<std::vector<SampleRow>> Read(const std::string& device, int64_t from_us,
                                                      int64_t to_us) = 0;
  // A job's collective timeline (as Store::JobTimeline) over the buckets
  // that start in [from_us, to_us), buckets aligned to multiples of
  // `bucket_us`.
  virtual absl::StatusOr<std::vector<v1::JobTimelinePoint>> ReadTimeline(const std::string& job, int64_t from_us,
                                                                         int64_t to_us, int64_t bucket_us) = 0;
};

// Runs of commits as stored, column by column, with each column's series:
// what remote-write sends without a row per sample.
struct CommitRuns {
  std::vector<DecodedRun> runs;
  // Per run, per series column in layout order: the series (valid as long as
  // the Store), or null when its row is unreadable.
  std::vector<std::vector<const SeriesInfo*>> series;
};

// A collective record as stored, with the commit that stored it.
struct CollectiveRow {
  v1::CollectiveRecord record;
  uint64_t commit = 0;
};

class Store final {
 public:
  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Stores the batches in one transaction and returns one outcome each, in
  // order: STORED, or DUPLICATE for an (agent, boot, seq) seen before. An
  // error means nothing was committed. Writer thread only.
  absl::StatusOr<std::vector<WriteOutcome>> WriteBatches(
      std::span<const v1::TelemetryBatch* const> batches, int64_t received_us);

  // Deletes samples and records older than `cutoff_us`; sample runs with
  // commits after `keep_after_commit` (not yet exported) stay. Writer thread
  // only. Returns samples and rows deleted.
  // Closed anomalies go by `records_cutoff_us` when it is older: they are
  // small, and diagnosis needs them after the samples went to the TSDB.
  absl::StatusOr<uint64_t> Prune(int64_t cutoff_us, uint64_t keep_after_commit = UINT64_MAX,
                                 int64_t records_cutoff_us = INT64_MAX);
  // Seals full and idle sample runs; off the ack path. Writer thread only.
  absl::StatusOr<int> SealRuns(int64_t now_us, int max_runs);
  // The id of the newest durable commit (remote-write follows it).
  uint64_t last_commit() const { return samples_ ? samples_->last_commit() : 0; }
  // Which seqs of (agent, boot) are stored: every one up to the watermark,
  // plus those above it.
  struct StoredSeqs {
    uint64_t watermark = 0;
    std::set<uint64_t> above;
  };
  absl::StatusOr<StoredSeqs> GetStoredSeqs(const std::string& agent, const std::string& boot);

  // The records beside the telemetry, in the same file; any thread.
  JobRegistry& jobs() { return *jobs_; }
  AnomalyStore& anomalies() { return *anomalies_; }
  AuditLog& audit() { return *audit_; }

  // Per-bucket and per-op summaries of a job's collective records, buckets
  // aligned to multiples of `bucket_us`. With `history`, buckets older than
  // the oldest record the local store holds (and the one that holds it) come
  // from the TSDB; `notes` says so, or that history failed.
  absl::StatusOr<std::vector<v1::JobTimelinePoint>> JobTimeline(const std::string& job, int64_t since_us,
                                                                int64_t bucket_us, HistorySource* history = nullptr,
                                                                std::vector<std::string>* notes = nullptr);
  // Collective records of commits in (after, upto], in commit order.
  absl::StatusOr<std::vector<CollectiveRow>> ReadCollectiveCommits(uint64_t after, uint64_t upto);

  // Reads; any thread.
  absl::StatusOr<std::vector<v1::AgentInfo>> ListAgents();
  // The newest value of each matching series and its rate since
  // `request.since_us`. With `history`, and a host named, the part of the
  // window older than the local store holds for that host is read from it
  // and the rates span the whole window. `notes` (optional) says what
  // history added, or that it failed (then the local rows still come back).
  absl::StatusOr<std::vector<v1::CounterRow>> GetCounters(const v1::GetCountersRequest& request,
                                                          HistorySource* history = nullptr,
                                                          std::vector<std::string>* notes = nullptr);
  // Every sample of `entity` (all entities when empty) and `counter` (all
  // when empty) in [from_us, to_us], oldest first.
  absl::StatusOr<std::vector<SampleRow>> ReadSamples(const std::string& entity,
                                                     const std::string& counter, int64_t from_us,
                                                     int64_t to_us);
  // Samples of commits in (after, upto], in commit order, with their series.
  absl::StatusOr<std::vector<SampleRow>> ReadCommits(uint64_t after, uint64_t upto);
  // The same, as runs and columns. With `cache` (one per follower), each
  // stored part is decoded once across successive reads.
  absl::StatusOr<CommitRuns> ReadCommitRuns(uint64_t after, uint64_t upto, CommitCursorCache* cache);
  absl::StatusOr<SampleStore::Footprint> MeasureSamples();
  // Compressed bytes and samples of the runs with commits after `commit`.
  struct Backlog {
    uint64_t bytes = 0, samples = 0;
  };
  absl::StatusOr<Backlog> BacklogAfter(uint64_t commit);
  // The lowest commit such that the runs after it hold at most `max_bytes`.
  absl::StatusOr<uint64_t> CommitKeeping(uint64_t after, uint64_t max_bytes);
  // Small durable settings (remote-write cursors); any thread.
  absl::StatusOr<std::string> GetMeta(const std::string& key);
  absl::Status SetMeta(const std::string& key, const std::string& value);

 private:
  Store() = default;
  absl::Status Init(const StoreOptions& options);
  absl::Status MigrateRowSamples(const std::string& path);
  void MakeRecordStores();
  absl::StatusOr<WriteOutcome> WriteOne(const v1::TelemetryBatch& batch, int64_t received_us,
                                        uint64_t commit);
  // Flattens decoded runs into rows; series names from the reader cache.
  absl::Status AppendRows(const std::vector<DecodedRun>& runs, const std::string& entity,
                          const std::string& counter, int64_t from_us, int64_t to_us,
                          std::vector<SampleRow>* out);
  const SeriesInfo* Series(int64_t id);  // REQUIRES: reader_mu_ held

  sqlite::Db writer_db_, reader_db_, jobs_db_holder_;
  sqlite3* writer_ = nullptr;
  sqlite3* reader_ = nullptr;
  std::mutex reader_mu_;
  sqlite3* jobs_db_ = nullptr;
  std::mutex jobs_mu_;
  // Writer statements.
  sqlite::Stmt begin_, commit_, rollback_, upsert_agent_, insert_collective_;
  std::unique_ptr<SampleStore> samples_;
  std::unique_ptr<JobRegistry> jobs_;
  std::unique_ptr<AnomalyStore> anomalies_;
  std::unique_ptr<AuditLog> audit_;
  std::unordered_map<int64_t, SeriesInfo> series_info_;  // reader side; series never change
};

}  // namespace rocefab::collector
