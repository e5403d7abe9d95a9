#pragma once
// The collector's durable store: one SQLite file in WAL mode. Schema in
// docs/architecture.md ("Collector store").
//
// Writes come from one writer thread (the Ingester) through WriteBatches,
// which stores many batches in one transaction; reads (the Query service)
// use a second connection and may run concurrently, as WAL allows.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "rocefab/v1/diagnosis.pb.h"
#include "rocefab/v1/playbook.pb.h"
#include "rocefab/v1/query.pb.h"
#include "rocefab/v1/telemetry.pb.h"

namespace rocefab::collector {

// RAII for one prepared statement.
class Statement final {
 public:
  Statement() = default;
  Statement(sqlite3* db, const char* sql);
  ~Statement();
  Statement(Statement&& other) noexcept : stmt_(other.stmt_) { other.stmt_ = nullptr; }
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  sqlite3_stmt* get() const { return stmt_; }
  bool ok() const { return stmt_ != nullptr; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

struct StoreOptions {
  std::string path;
  bool relaxed_durability = false;  // synchronous=NORMAL instead of FULL
};

// Outcome of storing one batch.
struct WriteOutcome {
  v1::AckStatus status = v1::ACK_STATUS_STORED;
  uint64_t samples_written = 0;
  uint64_t samples_rejected = 0;  // unknown counter names, bad scope
  uint64_t collectives_written = 0;
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

  // Deletes samples and batch records older than `cutoff_us`. Writer thread only.
  absl::StatusOr<uint64_t> Prune(int64_t cutoff_us);

  // The job registry; any thread (job changes are rare and short).
  absl::StatusOr<v1::Job> StartJob(const v1::Job& job);
  absl::StatusOr<v1::Job> EndJob(const std::string& id, int64_t end_us);
  absl::StatusOr<std::vector<v1::Job>> ListJobs(bool include_ended);
  absl::StatusOr<std::vector<v1::JobTimelinePoint>> JobTimeline(const std::string& job, int64_t since_us,
                                                                int64_t bucket_us);

  // Anomalies (insert or update by id). Writer thread only.
  absl::Status WriteAnomalies(std::span<const v1::Anomaly> anomalies);
  // At start: anomalies left open by a previous run are closed at their last
  // update (they reopen if the condition persists). Returns the highest id.
  absl::StatusOr<uint64_t> CloseOpenAnomalies(int64_t at_us);
  // Anomalies active at some point in [since_us, until_us] (until 0: now).
  absl::StatusOr<std::vector<v1::Anomaly>> ListAnomalies(int64_t since_us, int64_t until_us,
                                                         bool active_only);
  // The registered job running on `host` at `at_us`, or "".
  absl::StatusOr<std::string> RunningJobOnHost(const std::string& host, int64_t at_us);
  absl::StatusOr<v1::Job> GetJob(const std::string& id);
  // The playbook audit log; any thread.
  absl::StatusOr<uint64_t> RecordPlaybookRun(v1::PlaybookRun run);
  absl::StatusOr<std::vector<v1::PlaybookRun>> ListPlaybookRuns(uint32_t limit);

  // Reads; any thread.
  absl::StatusOr<std::vector<v1::AgentInfo>> ListAgents();
  absl::StatusOr<std::vector<v1::CounterRow>> GetCounters(const v1::GetCountersRequest& request);

 private:
  Store() = default;
  absl::Status Init(const StoreOptions& options);
  absl::StatusOr<int64_t> SeriesId(const v1::EntitySamples& entity, const v1::Sample& sample);
  absl::StatusOr<WriteOutcome> WriteOne(const v1::TelemetryBatch& batch, int64_t received_us);

  sqlite3* writer_ = nullptr;
  sqlite3* reader_ = nullptr;
  std::mutex reader_mu_;
  sqlite3* jobs_db_ = nullptr;
  std::mutex jobs_mu_;
  // Writer statements.
  Statement begin_, commit_, rollback_, insert_batch_, upsert_agent_, insert_series_,
      find_series_, insert_sample_, insert_collective_;
  std::unordered_map<std::string, int64_t> series_cache_;
  std::string key_;
};

}  // namespace rocefab::collector
