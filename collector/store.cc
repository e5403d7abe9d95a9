#include "collector/store.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/counters.h"
#include "common/log.h"
#include "common/strings.h"

namespace rocefab::collector {
namespace {

constexpr char kStoreLog[] = "store";
// 1: a row per sample (samples, batches). 2: compressed sample runs.
// 3: collective records carry their commit id (remote-write follows it).
constexpr int kSchemaVersion = 3;

using Statement = sqlite::Stmt;
using sqlite::FromDb;
using sqlite::ToDb;

// The schema besides the sample store's. docs/architecture.md explains each
// table.
constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS meta(
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS agents(
  agent_id TEXT PRIMARY KEY,
  kind INTEGER NOT NULL,
  agent_boot_id TEXT NOT NULL,
  host_boot_id TEXT NOT NULL,
  first_seen_us INTEGER NOT NULL,
  last_seen_us INTEGER NOT NULL,
  batches INTEGER NOT NULL,
  samples INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  skipped_values INTEGER NOT NULL,
  parse_errors INTEGER NOT NULL,
  source_errors INTEGER NOT NULL,
  stream_failures INTEGER NOT NULL,
  dropped_batches INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS collectives(
  job TEXT NOT NULL,
  comm TEXT NOT NULL,
  rank INTEGER NOT NULL,
  n_ranks INTEGER NOT NULL,
  host TEXT NOT NULL,
  op TEXT NOT NULL,
  seq INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  exec_time_us REAL NOT NULL,
  algbw_gbs REAL NOT NULL,
  busbw_gbs REAL NOT NULL,
  ts_us INTEGER NOT NULL,
  agent_id TEXT NOT NULL,
  commit_id INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS collectives_by_job ON collectives(job, ts_us);
CREATE INDEX IF NOT EXISTS collectives_by_time ON collectives(ts_us);
)sql";

absl::Status SqlError(sqlite3* db, std::string_view what) { return sqlite::Error(db, what); }
absl::Status Exec(sqlite3* db, std::string_view sql) { return sqlite::Exec(db, sql); }

// Resets a statement for reuse when it goes out of scope.
struct Resetter {
  sqlite3_stmt* stmt;
  ~Resetter() {
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
  }
};

void BindText(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

std::string ColumnText(sqlite3_stmt* stmt, int column) {
  const unsigned char* text = sqlite3_column_text(stmt, column);
  return text ? reinterpret_cast<const char*>(text) : "";
}

bool TableExists(sqlite3* db, const char* name) {
  Statement stmt(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
  stmt.Bind(1, std::string_view(name));
  auto row = stmt.Step();
  return row.ok() && *row;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  std::unique_ptr<Store> store(new Store());
  if (auto status = store->Init(options); !status.ok()) return status;
  return store;
}

void Store::MakeRecordStores() {
  // The job registry, anomalies and audit log write from query and observer
  // threads through their own connection, so the ingester's writer
  // connection stays single-threaded.
  const RecordConnections db{jobs_db_, &jobs_mu_, reader_, &reader_mu_};
  jobs_ = std::make_unique<JobRegistry>(db);
  anomalies_ = std::make_unique<AnomalyStore>(db);
  audit_ = std::make_unique<AuditLog>(db);
}

absl::Status Store::Init(const StoreOptions& options) {
  if (options.read_only) {
    sqlite::OpenOptions ro;
    ro.read_only = true;
    auto reader = sqlite::Db::Open(options.path, ro);
    if (!reader.ok()) return reader.status();
    reader_db_ = std::move(*reader);
    reader_ = reader_db_.get();
    if (!TableExists(reader_, "runs"))
      return absl::FailedPreconditionError(
          StrCat(options.path, ": not a collector database of schema version ", kSchemaVersion));
    MakeRecordStores();
    return absl::OkStatus();
  }
  sqlite::OpenOptions writer_options;
  writer_options.synchronous_full = !options.relaxed_durability;
  auto writer = sqlite::Db::Open(options.path, writer_options);
  if (!writer.ok()) return writer.status();
  writer_db_ = std::move(*writer);
  writer_ = writer_db_.get();
  // Refuse a file written by a newer schema rather than misreading it, and
  // convert (or refuse) one of the row-per-sample schema.
  int version = 0;
  if (TableExists(writer_, "meta")) {
    Statement get(writer_, "SELECT value FROM meta WHERE key='schema_version'");
    auto row = get.Step();
    if (!row.ok()) return row.status();
    if (*row) version = std::atoi(get.Text(0).c_str());
  }
  if (version > kSchemaVersion)
    return absl::FailedPreconditionError(
        StrCat(options.path, ": schema version ", version, " is newer than this collector's ",
               kSchemaVersion, "; run a newer rocefab-collectord, or point --db at a new file"));
  const bool row_samples = version == 1 && TableExists(writer_, "samples");
  if (row_samples && !options.migrate)
    return absl::FailedPreconditionError(StrCat(
        options.path, ": holds samples in the version 1 schema (a row per sample); start "
                      "rocefab-collectord without --no-migrate to convert it in place, or move "
                      "the file away to start empty"));
  // Collective records of versions 1 and 2 have no commit id: they get 0,
  // which remote-write, being past them already, never reads.
  if (TableExists(writer_, "collectives")) {
    bool has_commit = false;
    Statement columns(writer_, "SELECT 1 FROM pragma_table_info('collectives') WHERE name = 'commit_id'");
    auto row = columns.Step();
    if (!row.ok()) return row.status();
    has_commit = *row;
    columns = Statement();
    if (!has_commit) {
      if (auto status = Exec(writer_, "ALTER TABLE collectives ADD COLUMN commit_id INTEGER NOT NULL DEFAULT 0");
          !status.ok())
        return absl::Status(status.code(), StrCat(options.path, ": ", status.message()));
    }
  }
  if (auto status = Exec(writer_, kSchema); !status.ok())
    return absl::Status(status.code(), StrCat(options.path, ": ", status.message()));
  if (auto status = Exec(writer_, "CREATE INDEX IF NOT EXISTS collectives_by_commit ON collectives(commit_id)");
      !status.ok())
    return absl::Status(status.code(), StrCat(options.path, ": ", status.message()));
  for (const char* schema : {SampleStore::kSchema, JobRegistry::kSchema, AnomalyStore::kSchema, AuditLog::kSchema}) {
    if (auto status = Exec(writer_, schema); !status.ok())
      return absl::Status(status.code(), StrCat(options.path, ": ", status.message()));
  }

  sqlite::OpenOptions reader_options;
  reader_options.read_only = true;
  auto reader = sqlite::Db::Open(options.path, reader_options);
  if (!reader.ok()) return reader.status();
  reader_db_ = std::move(*reader);
  reader_ = reader_db_.get();
  // The job registry writes from query threads: its own connection, so the
  // ingester's writer connection stays single-threaded.
  sqlite::OpenOptions jobs_options = writer_options;
  jobs_options.full_mutex = true;
  auto jobs = sqlite::Db::Open(options.path, jobs_options);
  if (!jobs.ok()) return jobs.status();
  jobs_db_holder_ = std::move(*jobs);
  jobs_db_ = jobs_db_holder_.get();
  MakeRecordStores();

  begin_ = Statement(writer_, "BEGIN IMMEDIATE", true);
  commit_ = Statement(writer_, "COMMIT", true);
  rollback_ = Statement(writer_, "ROLLBACK", true);
  upsert_agent_ = Statement(writer_, R"sql(
INSERT INTO agents(agent_id, kind, agent_boot_id, host_boot_id, first_seen_us, last_seen_us,
                   batches, samples, last_seq, skipped_values, parse_errors, source_errors,
                   stream_failures, dropped_batches)
VALUES(?1, ?2, ?3, ?4, ?5, ?5, 1, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
ON CONFLICT(agent_id) DO UPDATE SET
  kind = ?2,
  agent_boot_id = ?3,
  host_boot_id = ?4,
  last_seen_us = max(last_seen_us, ?5),
  batches = batches + 1,
  samples = samples + ?6,
  last_seq = CASE WHEN agent_boot_id = ?3 THEN max(last_seq, ?7) ELSE ?7 END,
  skipped_values = skipped_values + ?8,
  parse_errors = parse_errors + ?9,
  source_errors = source_errors + ?10,
  stream_failures = ?11,
  dropped_batches = ?12
)sql", true);
  insert_collective_ = Statement(writer_,
                                 "INSERT INTO collectives(job, comm, rank, n_ranks, host, op, seq, bytes, "
                                 "exec_time_us, algbw_gbs, busbw_gbs, ts_us, agent_id, commit_id) "
                                 "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)", true);
  for (const Statement* s : {&begin_, &commit_, &rollback_, &upsert_agent_, &insert_collective_})
    if (!s->ok()) return s->status();
  samples_ = std::make_unique<SampleStore>(writer_, options.samples);
  if (auto status = samples_->Init(); !status.ok()) return status;
  if (row_samples) {
    if (auto status = MigrateRowSamples(options.path); !status.ok()) return status;
  }
  if (auto status = Exec(writer_, StrCat("INSERT OR REPLACE INTO meta VALUES('schema_version','",
                                         kSchemaVersion, "')"));
      !status.ok())
    return status;
  return absl::OkStatus();
}

absl::Status Store::MigrateRowSamples(const std::string& path) {
  // Rebuilds each entity's readings as batches of one agent (the entity's
  // device) and stores them through the normal write path, then drops the
  // old tables. One transaction: a failure leaves the file as it was.
  LOG_INFO(kStoreLog, path, ": converting version 1 samples to compressed runs");
  Statement rows(writer_, R"sql(
SELECT s.scope, s.entity, s.port, s.counter, s.prio, s.queue, s.kind,
       v.ts_us, v.value, v.delta, v.reset
FROM samples v JOIN series s ON s.id = v.series_id
ORDER BY s.entity, v.ts_us, s.id)sql");
  if (!rows.ok()) return rows.status();
  if (auto s = Exec(writer_, "BEGIN IMMEDIATE"); !s.ok()) return s;
  uint64_t converted = 0;
  absl::Status status;
  v1::TelemetryBatch batch;
  std::map<std::string, uint64_t> seqs;
  auto flush = [&]() -> absl::Status {
    if (batch.entities_size() == 0) return absl::OkStatus();
    batch.set_seq(++seqs[batch.agent_id()]);
    auto outcome = WriteOne(batch, batch.created_us(), samples_->NextCommit());
    if (!outcome.ok()) return outcome.status();
    if (auto s = samples_->Flush(samples_->NextCommit()); !s.ok()) return s;
    converted += outcome->samples_written;
    batch.Clear();
    return absl::OkStatus();
  };
  for (;;) {
    auto row = rows.Step();
    if (!row.ok()) {
      status = row.status();
      break;
    }
    if (!*row) break;
    const std::string entity = rows.Text(1);
    const int64_t ts = rows.Int(7);
    if (batch.entities_size() == 0 || batch.entities(0).entity() != entity ||
        batch.entities(0).timestamp_us() != ts) {
      if (status = flush(); !status.ok()) break;
      const size_t slash = entity.find('/');
      batch.set_agent_id(slash == std::string::npos ? entity : entity.substr(0, slash));
      batch.set_agent_boot_id("migrated-v1");
      batch.set_created_us(ts);
      auto* es = batch.add_entities();
      es->set_scope(static_cast<v1::Scope>(rows.Int(0)));
      es->set_entity(entity);
      es->set_port(static_cast<uint32_t>(rows.Int(2)));
      es->set_timestamp_us(ts);
    }
    auto* sample = batch.mutable_entities(0)->add_samples();
    sample->set_counter(rows.Text(3));
    if (rows.Int(4) >= 0) sample->set_prio(static_cast<uint32_t>(rows.Int(4)));
    if (rows.Int(5) >= 0) sample->set_queue(static_cast<uint32_t>(rows.Int(5)));
    sample->set_kind(static_cast<v1::ValueKind>(rows.Int(6)));
    sample->set_value(FromDb(rows.Int(8)));
    if (!rows.IsNull(9)) sample->set_delta(FromDb(rows.Int(9)));
    sample->set_reset(rows.Int(10) != 0);
  }
  if (status.ok()) status = flush();
  rows = Statement();
  if (status.ok()) status = Exec(writer_, "DROP TABLE samples; DROP TABLE IF EXISTS batches;");
  if (!status.ok()) {
    Exec(writer_, "ROLLBACK").IgnoreError();
    samples_->Abandon();
    return absl::Status(status.code(), StrCat(path, ": converting version 1 samples: ",
                                              status.message(), " (the file is unchanged)"));
  }
  if (auto s = Exec(writer_, "COMMIT"); !s.ok()) return s;
  LOG_INFO(kStoreLog, path, ": converted ", converted, " samples");
  return absl::OkStatus();
}

Store::~Store() {
  // Statements must be finalized before their connections close.
  samples_.reset();
  for (Statement* s : {&begin_, &commit_, &rollback_, &upsert_agent_, &insert_collective_})
    *s = Statement();
}

absl::StatusOr<WriteOutcome> Store::WriteOne(const v1::TelemetryBatch& batch, int64_t received_us,
                                             uint64_t commit) {
  WriteOutcome outcome;
  auto duplicate = samples_->Dedup(batch, received_us);
  if (!duplicate.ok()) return duplicate.status();
  if (*duplicate) {
    // Stored before: its ack was lost (collector restart or broken stream).
    outcome.status = v1::ACK_STATUS_DUPLICATE;
    return outcome;
  }
  if (auto s = samples_->Add(batch, commit, &outcome.samples_written, &outcome.samples_rejected);
      !s.ok())
    return s;
  for (const auto& record : batch.collectives()) {
    sqlite3_stmt* stmt = insert_collective_.get();
    Resetter reset{stmt};
    BindText(stmt, 1, record.job());
    BindText(stmt, 2, record.comm());
    sqlite3_bind_int64(stmt, 3, record.rank());
    sqlite3_bind_int64(stmt, 4, record.n_ranks());
    BindText(stmt, 5, record.host().empty() ? batch.agent_id() : record.host());
    BindText(stmt, 6, record.op());
    sqlite3_bind_int64(stmt, 7, ToDb(record.seq()));
    sqlite3_bind_int64(stmt, 8, ToDb(record.bytes()));
    sqlite3_bind_double(stmt, 9, record.exec_time_us());
    sqlite3_bind_double(stmt, 10, record.algbw_gbs());
    sqlite3_bind_double(stmt, 11, record.busbw_gbs());
    sqlite3_bind_int64(stmt, 12, record.timestamp_us());
    BindText(stmt, 13, batch.agent_id());
    sqlite3_bind_int64(stmt, 14, ToDb(commit));
    if (sqlite3_step(stmt) != SQLITE_DONE) return SqlError(writer_, "insert collective");
    ++outcome.collectives_written;
  }
  {
    sqlite3_stmt* stmt = upsert_agent_.get();
    Resetter reset{stmt};
    BindText(stmt, 1, batch.agent_id());
    sqlite3_bind_int(stmt, 2, batch.agent_kind());
    BindText(stmt, 3, batch.agent_boot_id());
    BindText(stmt, 4, batch.host_boot_id());
    sqlite3_bind_int64(stmt, 5, received_us);
    sqlite3_bind_int64(stmt, 6, ToDb(outcome.samples_written));
    sqlite3_bind_int64(stmt, 7, ToDb(batch.seq()));
    sqlite3_bind_int64(stmt, 8, ToDb(batch.health().skipped_values()));
    sqlite3_bind_int64(stmt, 9, ToDb(batch.health().parse_errors()));
    sqlite3_bind_int64(stmt, 10, ToDb(batch.health().source_errors()));
    sqlite3_bind_int64(stmt, 11, ToDb(batch.delivery().stream_failures()));
    sqlite3_bind_int64(stmt, 12, ToDb(batch.delivery().dropped_overflow()));
    if (sqlite3_step(stmt) != SQLITE_DONE) return SqlError(writer_, "upsert agent");
  }
  return outcome;
}

absl::StatusOr<std::vector<WriteOutcome>> Store::WriteBatches(
    std::span<const v1::TelemetryBatch* const> batches, int64_t received_us) {
  std::vector<WriteOutcome> outcomes;
  outcomes.reserve(batches.size());
  {
    Resetter reset{begin_.get()};
    if (sqlite3_step(begin_.get()) != SQLITE_DONE) return SqlError(writer_, "begin");
  }
  auto fail = [&](absl::Status status) {
    Resetter reset{rollback_.get()};
    sqlite3_step(rollback_.get());
    // What the rolled-back transaction handed out no longer exists.
    samples_->Abandon();
    return status;
  };
  const uint64_t commit = samples_->NextCommit();
  for (const v1::TelemetryBatch* batch : batches) {
    auto outcome = WriteOne(*batch, received_us, commit);
    if (!outcome.ok()) return fail(outcome.status());
    outcomes.push_back(*outcome);
  }
  if (auto status = samples_->Flush(commit); !status.ok()) return fail(status);
  Resetter reset{commit_.get()};
  if (sqlite3_step(commit_.get()) != SQLITE_DONE) return fail(SqlError(writer_, "commit"));
  return outcomes;
}

absl::StatusOr<int> Store::SealRuns(int64_t now_us, int max_runs) {
  return samples_->Seal(now_us, max_runs);
}

absl::StatusOr<uint64_t> Store::Prune(int64_t cutoff_us, uint64_t keep_after_commit, int64_t records_cutoff_us) {
  auto deleted = samples_->Prune(cutoff_us, keep_after_commit);
  if (!deleted.ok()) return deleted.status();
  // Collective records a remote-write receiver still waits for stay too.
  Statement stmt(writer_, "DELETE FROM collectives WHERE ts_us < ?1 AND commit_id <= ?2");
  if (!stmt.ok()) return stmt.status();
  if (auto s = stmt.Bind(1, cutoff_us).Bind(2, ToDb(std::min<uint64_t>(keep_after_commit, INT64_MAX))).Run(); !s.ok())
    return s;
  *deleted += sqlite3_changes(writer_);
  auto anomalies = anomalies_->Prune(std::min(cutoff_us, records_cutoff_us));
  if (!anomalies.ok()) return anomalies.status();
  return *deleted + *anomalies;
}

absl::StatusOr<std::vector<v1::JobTimelinePoint>> Store::JobTimeline(const std::string& job,
                                                                     int64_t since_us, int64_t bucket_us,
                                                                     HistorySource* history,
                                                                     std::vector<std::string>* notes) {
  if (bucket_us <= 0) return absl::InvalidArgumentError("timeline bucket must be positive");
  std::vector<v1::JobTimelinePoint> points;
  int64_t horizon = INT64_MAX;  // the oldest record the local store holds
  {
    std::lock_guard lock(reader_mu_);
    sqlite::ReadTransaction txn(reader_);
    if (!txn.status().ok()) return txn.status();
    // The slowest rank of a bucket: the first by busbw (then rank number).
    Statement stmt(reader_, R"sql(
WITH r AS (
  SELECT (ts_us / ?3) * ?3 AS bucket, op, rank, busbw_gbs, exec_time_us,
         row_number() OVER (PARTITION BY (ts_us / ?3) * ?3, op ORDER BY busbw_gbs, rank) AS nth
  FROM collectives WHERE job = ?1 AND ts_us >= ?2)
SELECT bucket, op, count(*), count(DISTINCT rank), avg(busbw_gbs),
       min(busbw_gbs), max(exec_time_us), max(CASE WHEN nth = 1 THEN rank END)
FROM r GROUP BY bucket, op ORDER BY bucket, op)sql");
    if (!stmt.ok()) return SqlError(reader_, "job timeline");
    stmt.Bind(1, job).Bind(2, since_us).Bind(3, bucket_us);
    for (;;) {
      auto row = stmt.Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      v1::JobTimelinePoint p;
      p.set_start_us(stmt.Int(0));
      p.set_op(stmt.Text(1));
      p.set_records(FromDb(stmt.Int(2)));
      p.set_ranks(static_cast<uint32_t>(stmt.Int(3)));
      p.set_mean_busbw_gbs(stmt.Double(4));
      p.set_min_busbw_gbs(stmt.Double(5));
      p.set_max_exec_time_us(stmt.Double(6));
      if (!stmt.IsNull(7)) p.set_slowest_rank(static_cast<uint32_t>(stmt.Int(7)));
      points.push_back(std::move(p));
    }
    if (history != nullptr) {
      Statement oldest(reader_, "SELECT min(ts_us) FROM collectives");
      auto row = oldest.Step();
      if (!row.ok()) return row.status();
      if (*row && !oldest.IsNull(0)) horizon = oldest.Int(0);
    }
  }
  if (history == nullptr || since_us >= horizon) return points;
  // The TSDB holds every bucket up to the one the horizon falls in (which
  // the local store holds only in part): those come from it.
  const int64_t boundary = horizon == INT64_MAX ? INT64_MAX / 2 : horizon - horizon % bucket_us;
  auto older = history->ReadTimeline(job, since_us, boundary + (horizon == INT64_MAX ? 0 : 1), bucket_us);
  if (!older.ok()) {
    if (notes != nullptr)
      notes->push_back(StrCat("history unavailable (", older.status().message(),
                              "): the timeline covers only what the local store holds"));
    return points;
  }
  if (older->empty()) return points;
  if (notes != nullptr)
    notes->push_back(StrCat(older->size(), " timeline points ", horizon == INT64_MAX ? "" : "before the local store's ",
                            "read from the history TSDB"));
  std::set<std::pair<int64_t, std::string>> remote;
  for (const auto& p : *older) remote.insert({p.start_us(), p.op()});
  std::erase_if(points, [&](const v1::JobTimelinePoint& p) { return remote.count({p.start_us(), p.op()}) > 0; });
  points.insert(points.end(), older->begin(), older->end());
  std::sort(points.begin(), points.end(), [](const v1::JobTimelinePoint& a, const v1::JobTimelinePoint& b) {
    return a.start_us() != b.start_us() ? a.start_us() < b.start_us() : a.op() < b.op();
  });
  return points;
}

absl::StatusOr<std::vector<CollectiveRow>> Store::ReadCollectiveCommits(uint64_t after, uint64_t upto) {
  std::lock_guard lock(reader_mu_);
  Statement stmt(reader_, R"sql(
SELECT job, comm, rank, n_ranks, host, op, seq, bytes, exec_time_us, algbw_gbs, busbw_gbs, ts_us, commit_id
FROM collectives WHERE commit_id > ?1 AND commit_id <= ?2 ORDER BY commit_id, rowid)sql");
  if (!stmt.ok()) return stmt.status();
  stmt.Bind(1, ToDb(std::min<uint64_t>(after, INT64_MAX))).Bind(2, ToDb(std::min<uint64_t>(upto, INT64_MAX)));
  std::vector<CollectiveRow> out;
  for (;;) {
    auto row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    CollectiveRow r;
    r.record.set_job(stmt.Text(0));
    r.record.set_comm(stmt.Text(1));
    r.record.set_rank(static_cast<uint32_t>(stmt.Int(2)));
    r.record.set_n_ranks(static_cast<uint32_t>(stmt.Int(3)));
    r.record.set_host(stmt.Text(4));
    r.record.set_op(stmt.Text(5));
    r.record.set_seq(FromDb(stmt.Int(6)));
    r.record.set_bytes(FromDb(stmt.Int(7)));
    r.record.set_exec_time_us(stmt.Double(8));
    r.record.set_algbw_gbs(stmt.Double(9));
    r.record.set_busbw_gbs(stmt.Double(10));
    r.record.set_timestamp_us(stmt.Int(11));
    r.commit = FromDb(stmt.Int(12));
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::vector<v1::AgentInfo>> Store::ListAgents() {
  std::lock_guard lock(reader_mu_);
  Statement stmt(reader_,
                 "SELECT agent_id, kind, agent_boot_id, host_boot_id, first_seen_us, last_seen_us, "
                 "batches, samples, last_seq, skipped_values, parse_errors, source_errors, "
                 "stream_failures, dropped_batches FROM agents ORDER BY agent_id");
  if (!stmt.ok()) return SqlError(reader_, "list agents");
  std::vector<v1::AgentInfo> agents;
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    v1::AgentInfo info;
    sqlite3_stmt* s = stmt.get();
    info.set_agent_id(ColumnText(s, 0));
    info.set_kind(static_cast<v1::AgentKind>(sqlite3_column_int(s, 1)));
    info.set_agent_boot_id(ColumnText(s, 2));
    info.set_host_boot_id(ColumnText(s, 3));
    info.set_first_seen_us(sqlite3_column_int64(s, 4));
    info.set_last_seen_us(sqlite3_column_int64(s, 5));
    info.set_batches(FromDb(sqlite3_column_int64(s, 6)));
    info.set_samples(FromDb(sqlite3_column_int64(s, 7)));
    info.set_last_seq(FromDb(sqlite3_column_int64(s, 8)));
    info.mutable_health()->set_skipped_values(FromDb(sqlite3_column_int64(s, 9)));
    info.mutable_health()->set_parse_errors(FromDb(sqlite3_column_int64(s, 10)));
    info.mutable_health()->set_source_errors(FromDb(sqlite3_column_int64(s, 11)));
    info.mutable_delivery()->set_stream_failures(FromDb(sqlite3_column_int64(s, 12)));
    info.mutable_delivery()->set_dropped_overflow(FromDb(sqlite3_column_int64(s, 13)));
    agents.push_back(std::move(info));
  }
  if (rc != SQLITE_DONE) return SqlError(reader_, "list agents");
  return agents;
}

const SeriesInfo* Store::Series(int64_t id) {
  auto it = series_info_.find(id);
  if (it != series_info_.end()) return &it->second;
  auto info = SampleStore::ReadSeries(reader_, id);
  if (!info.ok()) return nullptr;
  return &series_info_.emplace(id, std::move(*info)).first->second;
}

absl::Status Store::AppendRows(const std::vector<DecodedRun>& runs, const std::string& entity,
                               const std::string& counter, int64_t from_us, int64_t to_us,
                               std::vector<SampleRow>* out) {
  for (const DecodedRun& run : runs) {
    // Which columns match, and the entity (timestamp column) of each.
    std::vector<std::pair<size_t, size_t>> columns;  // (series index, entity index)
    std::vector<const SeriesInfo*> infos;
    size_t s = 0;
    for (size_t e = 0; e < run.layout.entities(); ++e) {
      for (uint32_t k = 0; k < run.layout.entity_sizes[e]; ++k, ++s) {
        const SeriesInfo* info = Series(run.layout.series[s]);
        if (info == nullptr) continue;
        if ((!entity.empty() && info->entity != entity) || (!counter.empty() && info->counter != counter))
          continue;
        columns.emplace_back(s, e);
        infos.push_back(info);
      }
    }
    for (size_t c = 0; c < columns.size(); ++c) {
      const auto [si, ei] = columns[c];
      for (const blocks::Poll& poll : run.polls) {
        if (poll.ts_us[ei] < from_us || poll.ts_us[ei] > to_us) continue;
        SampleRow row;
        row.series = *infos[c];
        row.ts_us = poll.ts_us[ei];
        row.value = poll.value[si];
        row.has_delta = poll.flags[si] & blocks::kHasDelta;
        row.delta = poll.delta[si];
        row.reset = poll.flags[si] & blocks::kReset;
        row.commit = poll.commit;
        out->push_back(std::move(row));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SampleRow>> Store::ReadSamples(const std::string& entity,
                                                          const std::string& counter,
                                                          int64_t from_us, int64_t to_us) {
  std::lock_guard lock(reader_mu_);
  sqlite::ReadTransaction txn(reader_);
  if (!txn.status().ok()) return txn.status();
  std::vector<std::string> agents;
  {
    Statement get(reader_, entity.empty() ? "SELECT DISTINCT agent_id FROM entity_agents"
                                          : "SELECT agent_id FROM entity_agents WHERE entity = ?1");
    if (!entity.empty()) get.Bind(1, entity);
    for (;;) {
      auto row = get.Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      agents.push_back(get.Text(0));
    }
  }
  std::vector<SampleRow> out;
  for (const std::string& agent : agents) {
    auto runs = SampleStore::ReadRuns(reader_, agent, from_us, to_us);
    if (!runs.ok()) return runs.status();
    if (auto s = AppendRows(*runs, entity, counter, from_us, to_us, &out); !s.ok()) return s;
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const SampleRow& a, const SampleRow& b) { return a.ts_us < b.ts_us; });
  return out;
}

absl::StatusOr<std::vector<SampleRow>> Store::ReadCommits(uint64_t after, uint64_t upto) {
  std::lock_guard lock(reader_mu_);
  sqlite::ReadTransaction txn(reader_);
  if (!txn.status().ok()) return txn.status();
  auto runs = SampleStore::ReadCommits(reader_, after, upto);
  if (!runs.ok()) return runs.status();
  std::vector<SampleRow> out;
  if (auto s = AppendRows(*runs, "", "", INT64_MIN, INT64_MAX, &out); !s.ok()) return s;
  std::stable_sort(out.begin(), out.end(),
                   [](const SampleRow& a, const SampleRow& b) { return a.commit < b.commit; });
  return out;
}

absl::StatusOr<CommitRuns> Store::ReadCommitRuns(uint64_t after, uint64_t upto, CommitCursorCache* cache) {
  std::lock_guard lock(reader_mu_);
  sqlite::ReadTransaction txn(reader_);
  if (!txn.status().ok()) return txn.status();
  auto runs = SampleStore::ReadCommits(reader_, after, upto, cache);
  if (!runs.ok()) return runs.status();
  CommitRuns out;
  out.runs = std::move(*runs);
  out.series.reserve(out.runs.size());
  for (const DecodedRun& run : out.runs) {
    auto& columns = out.series.emplace_back();
    columns.reserve(run.layout.series.size());
    // series_info_ is an unordered_map: its elements stay put.
    for (int64_t id : run.layout.series) columns.push_back(Series(id));
  }
  return out;
}

absl::StatusOr<Store::StoredSeqs> Store::GetStoredSeqs(const std::string& agent,
                                                       const std::string& boot) {
  std::lock_guard lock(reader_mu_);
  Statement get(reader_,
                "SELECT watermark, above FROM agent_boots WHERE agent_id = ?1 AND agent_boot_id = ?2");
  get.Bind(1, agent).Bind(2, boot);
  auto row = get.Step();
  if (!row.ok()) return row.status();
  StoredSeqs seqs;
  if (!*row) return seqs;
  seqs.watermark = FromDb(get.Int(0));
  seqs.above = SampleStore::DecodeAbove(get.Blob(1));
  return seqs;
}

absl::StatusOr<Store::Backlog> Store::BacklogAfter(uint64_t commit) {
  std::lock_guard lock(reader_mu_);
  Statement get(reader_,
                "SELECT coalesce(sum(bytes), 0), coalesce(sum(samples), 0) FROM runs WHERE "
                "last_commit > ?1");
  get.Bind(1, ToDb(std::min<uint64_t>(commit, INT64_MAX)));
  auto row = get.Step();
  if (!row.ok()) return row.status();
  return Backlog{FromDb(get.Int(0)), FromDb(get.Int(1))};
}

absl::StatusOr<uint64_t> Store::CommitKeeping(uint64_t after, uint64_t max_bytes) {
  std::lock_guard lock(reader_mu_);
  Statement get(reader_,
                "SELECT last_commit, bytes FROM runs WHERE last_commit > ?1 ORDER BY last_commit DESC");
  get.Bind(1, ToDb(std::min<uint64_t>(after, INT64_MAX)));
  uint64_t total = 0;
  for (;;) {
    auto row = get.Step();
    if (!row.ok()) return row.status();
    if (!*row) return after;
    total += FromDb(get.Int(1));
    if (total > max_bytes) return FromDb(get.Int(0));
  }
}

absl::StatusOr<std::string> Store::GetMeta(const std::string& key) {
  std::lock_guard lock(jobs_mu_);
  Statement get(jobs_db_, "SELECT value FROM meta WHERE key = ?1");
  get.Bind(1, key);
  auto row = get.Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::NotFoundError(StrCat("no ", key));
  return get.Text(0);
}

absl::Status Store::SetMeta(const std::string& key, const std::string& value) {
  std::lock_guard lock(jobs_mu_);
  Statement put(jobs_db_, "INSERT OR REPLACE INTO meta VALUES(?1, ?2)");
  put.Bind(1, key).Bind(2, value);
  return put.Run();
}

absl::StatusOr<SampleStore::Footprint> Store::MeasureSamples() {
  std::lock_guard lock(reader_mu_);
  return SampleStore::Measure(reader_);
}

absl::StatusOr<std::vector<v1::CounterRow>> Store::GetCounters(const v1::GetCountersRequest& request,
                                                               HistorySource* history,
                                                               std::vector<std::string>* notes) {
  std::lock_guard lock(reader_mu_);
  sqlite::ReadTransaction txn(reader_);
  if (!txn.status().ok()) return txn.status();
  // The host filter is a range on the entity prefix "<host>/" so the
  // series_by_entity index serves it; '0' is the character after '/'.
  Statement series(reader_, R"sql(
SELECT id, scope, entity, port, counter, prio, queue, kind FROM series
WHERE (?1 = '' OR (entity >= ?1 || '/' AND entity < ?1 || '0'))
  AND (?2 = '' OR substr(entity, instr(entity, '/') + 1) = ?2)
  AND (?3 = '' OR counter = ?3)
  AND (?4 = 0 OR scope = ?4)
ORDER BY entity, port, counter, prio, queue)sql");
  if (!series.ok()) return series.status();
  series.Bind(1, request.host()).Bind(2, request.device()).Bind(3, request.counter());
  series.Bind(4, int64_t{request.scope()});
  std::vector<int64_t> ids;
  std::set<std::string> entities;
  for (;;) {
    auto row = series.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    SeriesInfo info = SampleStore::SeriesFromRow(series, 1);
    ids.push_back(series.Int(0));
    entities.insert(info.entity);
    series_info_.emplace(series.Int(0), std::move(info));
  }
  // With history, a host the local store knows nothing of may still have
  // series in the TSDB.
  if (ids.empty() && (history == nullptr || request.host().empty())) return std::vector<v1::CounterRow>();
  const std::set<int64_t> wanted(ids.begin(), ids.end());
  std::set<std::string> agents;
  {
    Statement get(reader_, "SELECT agent_id FROM entity_agents WHERE entity = ?1");
    for (const std::string& entity : entities) {
      get.Bind(1, entity);
      for (;;) {
        auto row = get.Step();
        if (!row.ok()) return row.status();
        if (!*row) break;
        agents.insert(get.Text(0));
      }
    }
  }
  // Per series: the newest sample, and the increase over the window: the
  // deltas after the window's first sample, over the time they span.
  struct Acc {
    int64_t latest_ts = INT64_MIN;
    uint64_t latest_value = 0;
    int64_t first_ts = 0, last_ts = 0;
    uint64_t increase = 0;
    int n = 0;
    // The first sample in the window's own delta: the increase since the
    // sample before it, which history may hold.
    bool first_has_delta = false;
    uint64_t first_delta = 0;
  };
  std::unordered_map<int64_t, Acc> acc;
  auto fold = [&](const DecodedRun& run, bool window) {
    size_t s = 0;
    for (size_t e = 0; e < run.layout.entities(); ++e) {
      for (uint32_t k = 0; k < run.layout.entity_sizes[e]; ++k, ++s) {
        const int64_t id = run.layout.series[s];
        if (!wanted.count(id)) continue;
        Acc& a = acc[id];
        for (const blocks::Poll& poll : run.polls) {
          const int64_t ts = poll.ts_us[e];
          if (ts >= a.latest_ts) {
            a.latest_ts = ts;
            a.latest_value = poll.value[s];
          }
          if (!window || ts < request.since_us()) continue;
          if (a.n == 0) {
            a.first_ts = ts;
            a.first_has_delta = poll.flags[s] & blocks::kHasDelta;
            a.first_delta = poll.delta[s];
          } else if (poll.flags[s] & blocks::kHasDelta) {
            a.increase += poll.delta[s];
          }
          a.last_ts = ts;
          ++a.n;
        }
      }
    }
  };
  for (const std::string& agent : agents) {
    auto runs = SampleStore::ReadRuns(reader_, agent, request.since_us(), INT64_MAX);
    if (!runs.ok()) return runs.status();
    for (const DecodedRun& run : *runs) fold(run, true);
    // Series with nothing in the window still show their newest value.
    std::set<int64_t> missing;
    for (int64_t id : wanted)
      if (!acc.count(id)) missing.insert(id);
    if (missing.empty()) continue;
    auto older = SampleStore::ReadNewestHolding(reader_, agent, request.since_us(), missing, 64);
    if (!older.ok()) return older.status();
    if (older->has_value()) fold(**older, false);
  }
  std::map<int64_t, SeriesInfo> remote_only;
  auto info_of = [&](int64_t id) -> const SeriesInfo& {
    return id < 0 ? remote_only.at(id) : series_info_.at(id);
  };
  // History: the part of the window older than anything the local store
  // holds for the host comes from the TSDB, and is folded in before the
  // local samples.
  if (history != nullptr && !request.host().empty()) {
    Statement oldest(reader_, R"sql(
SELECT min(r.t_min) FROM runs r
WHERE r.agent_id IN (SELECT agent_id FROM entity_agents WHERE entity >= ?1 || '/' AND entity < ?1 || '0'))sql");
    if (!oldest.ok()) return oldest.status();
    oldest.Bind(1, request.host());
    auto row = oldest.Step();
    if (!row.ok()) return row.status();
    const int64_t local_from = *row && !oldest.IsNull(0) ? oldest.Int(0) : INT64_MAX;
    if (request.since_us() < local_from) {
      const int64_t to = local_from == INT64_MAX ? INT64_MAX / 2 : local_from;
      auto older = history->Read(request.host(), request.since_us(), to);
      if (!older.ok() && notes != nullptr)
        notes->push_back(StrCat("history unavailable (", older.status().message(), "): rates cover only what the "
                                "local store holds",
                                local_from == INT64_MAX ? "" : StrCat(", from ", local_from / 1'000'000, " (Unix s)")));
      if (older.ok() && notes != nullptr && !older->empty())
        notes->push_back(StrCat(older->size(), " samples before ",
                                local_from == INT64_MAX ? std::string("now") : StrCat(local_from / 1'000'000, " (Unix s)"),
                                " read from the history TSDB"));
      if (!older.ok()) older = std::vector<SampleRow>();
      // Series ids by key; series only the TSDB knows get ids below zero,
      // kept in `remote_only` (not in the reader's series cache).
      auto key_of = [](const SeriesInfo& i) {
        return std::make_tuple(static_cast<int>(i.scope), i.entity, i.port, i.counter, i.prio, i.queue);
      };
      std::map<decltype(key_of(SeriesInfo())), int64_t> by_key;
      for (int64_t id : ids) by_key.emplace(key_of(info_of(id)), id);
      int64_t next_remote = -1;
      std::map<int64_t, std::vector<const SampleRow*>> groups;
      for (const SampleRow& r : *older) {
        const SeriesInfo& info = r.series;
        const std::string device = info.entity.substr(info.entity.find('/') + 1);
        if ((!request.device().empty() && device != request.device()) ||
            (!request.counter().empty() && info.counter != request.counter()) ||
            (request.scope() != v1::SCOPE_UNSPECIFIED && info.scope != request.scope()))
          continue;
        auto [it, added] = by_key.try_emplace(key_of(info), next_remote);
        if (added) {
          remote_only.emplace(next_remote, info);
          ids.push_back(next_remote--);
        }
        groups[it->second].push_back(&r);
      }
      for (auto& [id, samples] : groups) {
        Acc& a = acc[id];
        Acc old;
        for (const SampleRow* r : samples) {
          if (old.n == 0) old.first_ts = r->ts_us;
          // A value below the one before is a counter reset.
          else old.increase += r->value >= old.latest_value ? r->value - old.latest_value : r->value;
          old.last_ts = r->ts_us;
          old.latest_ts = r->ts_us;
          old.latest_value = r->value;
          ++old.n;
        }
        if (a.n > 0) {
          // The local window's first sample carries the increase since the
          // sample before it: the last one the TSDB holds.
          old.increase += a.increase + (a.first_has_delta ? a.first_delta : 0);
          old.last_ts = a.last_ts;
          old.n += a.n;
        }
        if (a.latest_ts > old.latest_ts) {
          old.latest_ts = a.latest_ts;
          old.latest_value = a.latest_value;
        }
        a = old;
      }
      // Remote-only series sort in with the rest.
      // (The series query's order: entity, port, counter, prio, queue.)
      std::sort(ids.begin(), ids.end(), [&](int64_t x, int64_t y) {
        const SeriesInfo &a = info_of(x), &b = info_of(y);
        return std::tie(a.entity, a.port, a.counter, a.prio, a.queue, a.scope) <
               std::tie(b.entity, b.port, b.counter, b.prio, b.queue, b.scope);
      });
    }
  }
  std::vector<v1::CounterRow> rows;
  for (int64_t id : ids) {
    auto it = acc.find(id);
    if (it == acc.end()) continue;  // pruned away
    const SeriesInfo& info = info_of(id);
    const Acc& a = it->second;
    v1::CounterRow row;
    row.set_scope(info.scope);
    row.set_entity(info.entity);
    row.set_port(info.port);
    row.set_counter(info.counter);
    if (info.prio >= 0) row.set_prio(static_cast<uint32_t>(info.prio));
    if (info.queue >= 0) row.set_queue(static_cast<uint32_t>(info.queue));
    row.set_kind(info.kind);
    row.set_timestamp_us(a.latest_ts);
    row.set_value(a.latest_value);
    if (info.kind == v1::VALUE_KIND_COUNTER && a.n >= 2 && a.last_ts > a.first_ts) {
      row.set_has_rate(true);
      row.set_rate_per_second(static_cast<double>(a.increase) * 1e6 /
                              static_cast<double>(a.last_ts - a.first_ts));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace rocefab::collector
