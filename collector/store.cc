#include "collector/store.h"

#include <algorithm>
#include <map>

#include "common/strings.h"
#include "common/counters.h"
#include "common/log.h"

namespace rocefab::collector {
namespace {

constexpr char kLog[] = "store";
constexpr int kSchemaVersion = 1;

// The schema. docs/architecture.md explains each table.
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
CREATE TABLE IF NOT EXISTS batches(
  agent_id TEXT NOT NULL,
  agent_boot_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  created_us INTEGER NOT NULL,
  received_us INTEGER NOT NULL,
  n_samples INTEGER NOT NULL,
  PRIMARY KEY(agent_id, agent_boot_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS batches_by_received ON batches(received_us);
CREATE TABLE IF NOT EXISTS series(
  id INTEGER PRIMARY KEY,
  scope INTEGER NOT NULL,
  entity TEXT NOT NULL,
  port INTEGER NOT NULL,
  counter TEXT NOT NULL,
  prio INTEGER NOT NULL,
  queue INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  UNIQUE(scope, entity, port, counter, prio, queue)
);
CREATE INDEX IF NOT EXISTS series_by_entity ON series(entity);
CREATE TABLE IF NOT EXISTS samples(
  series_id INTEGER NOT NULL,
  ts_us INTEGER NOT NULL,
  value INTEGER NOT NULL,
  delta INTEGER,
  reset INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS samples_by_series ON samples(series_id, ts_us);
CREATE INDEX IF NOT EXISTS samples_by_time ON samples(ts_us);
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
  agent_id TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS collectives_by_job ON collectives(job, ts_us);
CREATE TABLE IF NOT EXISTS jobs(
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  start_us INTEGER NOT NULL,
  end_us INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS job_ranks(
  job TEXT NOT NULL,
  rank INTEGER NOT NULL,
  host TEXT NOT NULL,
  gpu INTEGER NOT NULL,
  nic TEXT NOT NULL,
  PRIMARY KEY(job, rank)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS job_ranks_by_host ON job_ranks(host);
CREATE TABLE IF NOT EXISTS anomalies(
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  entity TEXT NOT NULL,
  start_us INTEGER NOT NULL,
  end_us INTEGER NOT NULL,
  proto BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS anomalies_by_end ON anomalies(end_us);
CREATE TABLE IF NOT EXISTS playbook_runs(
  id INTEGER PRIMARY KEY,
  started_us INTEGER NOT NULL,
  proto BLOB NOT NULL
);
)sql";

absl::Status SqlError(sqlite3* db, std::string_view what) {
  return absl::InternalError(StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db)));
}

absl::Status Exec(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return absl::InternalError(StrCat("sqlite: ", message));
  }
  return absl::OkStatus();
}

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

// SQLite integers are signed 64-bit; counters are unsigned. Store the bits.
int64_t ToDb(uint64_t value) { return static_cast<int64_t>(value); }
uint64_t FromDb(int64_t value) { return static_cast<uint64_t>(value); }

}  // namespace

Statement::Statement(sqlite3* db, const char* sql) {
  if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) != SQLITE_OK) {
    LOG_ERROR(kLog, "prepare failed: ", sqlite3_errmsg(db), " in: ", sql);
    stmt_ = nullptr;
  }
}

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_) sqlite3_finalize(stmt_);
    stmt_ = other.stmt_;
    other.stmt_ = nullptr;
  }
  return *this;
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  std::unique_ptr<Store> store(new Store());
  if (auto status = store->Init(options); !status.ok()) return status;
  return store;
}

absl::Status Store::Init(const StoreOptions& options) {
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(options.path.c_str(), &writer_, flags, nullptr) != SQLITE_OK)
    return absl::UnavailableError(StrCat("cannot open database ", options.path, ": ",
                                               writer_ ? sqlite3_errmsg(writer_) : "out of memory"));
  sqlite3_busy_timeout(writer_, 5000);
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA temp_store=MEMORY"}) {
    if (auto status = Exec(writer_, pragma); !status.ok()) return status;
  }
  if (auto status = Exec(writer_, options.relaxed_durability ? "PRAGMA synchronous=NORMAL"
                                                             : "PRAGMA synchronous=FULL");
      !status.ok())
    return status;
  if (auto status = Exec(writer_, kSchema); !status.ok())
    return absl::Status(status.code(), StrCat(options.path, ": ", status.message()));
  // Refuse a file written by a newer schema rather than misreading it.
  {
    Statement get(writer_, "SELECT value FROM meta WHERE key='schema_version'");
    if (sqlite3_step(get.get()) == SQLITE_ROW) {
      const int version = std::stoi(ColumnText(get.get(), 0));
      if (version > kSchemaVersion)
        return absl::FailedPreconditionError(StrCat(
            options.path, ": schema version ", version, " is newer than this collector's ",
            kSchemaVersion));
    }
  }
  if (auto status = Exec(writer_, StrCat("INSERT OR IGNORE INTO meta VALUES('schema_version','",
                                               kSchemaVersion, "')")
                                      .c_str());
      !status.ok())
    return status;

  if (sqlite3_open_v2(options.path.c_str(), &reader_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK)
    return absl::UnavailableError(StrCat("cannot open database ", options.path, " for reading"));
  sqlite3_busy_timeout(reader_, 5000);
  // The job registry writes from query threads: its own connection, so the
  // ingester's writer connection stays single-threaded.
  if (sqlite3_open_v2(options.path.c_str(), &jobs_db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK)
    return absl::UnavailableError(StrCat("cannot open database ", options.path, " for jobs"));
  sqlite3_busy_timeout(jobs_db_, 5000);

  begin_ = Statement(writer_, "BEGIN IMMEDIATE");
  commit_ = Statement(writer_, "COMMIT");
  rollback_ = Statement(writer_, "ROLLBACK");
  insert_batch_ = Statement(writer_,
                            "INSERT OR IGNORE INTO batches(agent_id, agent_boot_id, seq, created_us, "
                            "received_us, n_samples) VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
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
)sql");
  insert_series_ = Statement(writer_,
                             "INSERT OR IGNORE INTO series(scope, entity, port, counter, prio, "
                             "queue, kind) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  find_series_ = Statement(writer_,
                           "SELECT id FROM series WHERE scope=?1 AND entity=?2 AND port=?3 AND "
                           "counter=?4 AND prio=?5 AND queue=?6");
  insert_collective_ = Statement(writer_,
                                 "INSERT INTO collectives VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                                 "?9, ?10, ?11, ?12, ?13)");
  insert_sample_ = Statement(writer_,
                             "INSERT INTO samples(series_id, ts_us, value, delta, reset) "
                             "VALUES(?1, ?2, ?3, ?4, ?5)");
  for (const Statement* s : {&begin_, &commit_, &rollback_, &insert_batch_, &upsert_agent_,
                             &insert_series_, &find_series_, &insert_sample_, &insert_collective_})
    if (!s->ok()) return SqlError(writer_, "prepare");
  return absl::OkStatus();
}

Store::~Store() {
  // Statements must be finalized before their connection closes.
  for (Statement* s : {&begin_, &commit_, &rollback_, &insert_batch_, &upsert_agent_,
                       &insert_series_, &find_series_, &insert_sample_, &insert_collective_})
    *s = Statement();
  if (writer_) sqlite3_close(writer_);
  if (reader_) sqlite3_close(reader_);
  if (jobs_db_) sqlite3_close(jobs_db_);
}

absl::StatusOr<int64_t> Store::SeriesId(const v1::EntitySamples& entity, const v1::Sample& sample) {
  const int64_t prio = sample.has_prio() ? static_cast<int64_t>(sample.prio()) : -1;
  const int64_t queue = sample.has_queue() ? static_cast<int64_t>(sample.queue()) : -1;
  key_.clear();
  StrAppend(&key_, entity.scope(), "|", entity.entity(), "|", entity.port(), "|",
                  sample.counter(), "|", prio, "|", queue);
  if (auto it = series_cache_.find(key_); it != series_cache_.end()) return it->second;
  for (sqlite3_stmt* stmt : {insert_series_.get(), find_series_.get()}) {
    Resetter reset{stmt};
    sqlite3_bind_int(stmt, 1, entity.scope());
    BindText(stmt, 2, entity.entity());
    sqlite3_bind_int64(stmt, 3, entity.port());
    BindText(stmt, 4, sample.counter());
    sqlite3_bind_int64(stmt, 5, prio);
    sqlite3_bind_int64(stmt, 6, queue);
    if (stmt == insert_series_.get()) {
      sqlite3_bind_int(stmt, 7, sample.kind());
      if (sqlite3_step(stmt) != SQLITE_DONE) return SqlError(writer_, "insert series");
    } else {
      if (sqlite3_step(stmt) != SQLITE_ROW) return SqlError(writer_, "find series");
      const int64_t id = sqlite3_column_int64(stmt, 0);
      series_cache_.emplace(key_, id);
      return id;
    }
  }
  return absl::InternalError("unreachable");
}

absl::StatusOr<WriteOutcome> Store::WriteOne(const v1::TelemetryBatch& batch, int64_t received_us) {
  WriteOutcome outcome;
  uint64_t n_samples = 0;
  for (const auto& entity : batch.entities()) n_samples += entity.samples_size();
  {
    sqlite3_stmt* stmt = insert_batch_.get();
    Resetter reset{stmt};
    BindText(stmt, 1, batch.agent_id());
    BindText(stmt, 2, batch.agent_boot_id());
    sqlite3_bind_int64(stmt, 3, ToDb(batch.seq()));
    sqlite3_bind_int64(stmt, 4, batch.created_us());
    sqlite3_bind_int64(stmt, 5, received_us);
    sqlite3_bind_int64(stmt, 6, ToDb(n_samples));
    if (sqlite3_step(stmt) != SQLITE_DONE) return SqlError(writer_, "insert batch");
    if (sqlite3_changes(writer_) == 0) {
      // Stored before: its ack was lost (collector restart or broken stream).
      outcome.status = v1::ACK_STATUS_DUPLICATE;
      return outcome;
    }
  }
  for (const auto& entity : batch.entities()) {
    for (const auto& sample : entity.samples()) {
      // Only the vocabulary is stored; anything else is counted and dropped.
      if (FindCounter(entity.scope(), sample.counter()) == nullptr) {
        ++outcome.samples_rejected;
        continue;
      }
      auto series = SeriesId(entity, sample);
      if (!series.ok()) return series.status();
      sqlite3_stmt* stmt = insert_sample_.get();
      Resetter reset{stmt};
      sqlite3_bind_int64(stmt, 1, *series);
      sqlite3_bind_int64(stmt, 2, entity.timestamp_us());
      sqlite3_bind_int64(stmt, 3, ToDb(sample.value()));
      if (sample.has_delta()) sqlite3_bind_int64(stmt, 4, ToDb(sample.delta()));
      else sqlite3_bind_null(stmt, 4);
      sqlite3_bind_int(stmt, 5, sample.reset() ? 1 : 0);
      if (sqlite3_step(stmt) != SQLITE_DONE) return SqlError(writer_, "insert sample");
      ++outcome.samples_written;
    }
  }
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
  for (const v1::TelemetryBatch* batch : batches) {
    auto outcome = WriteOne(*batch, received_us);
    if (!outcome.ok()) {
      Resetter reset{rollback_.get()};
      sqlite3_step(rollback_.get());
      // Ids handed out inside the rolled-back transaction no longer exist.
      series_cache_.clear();
      return outcome.status();
    }
    outcomes.push_back(*outcome);
  }
  Resetter reset{commit_.get()};
  if (sqlite3_step(commit_.get()) != SQLITE_DONE) {
    absl::Status status = SqlError(writer_, "commit");
    Resetter rollback{rollback_.get()};
    sqlite3_step(rollback_.get());
    series_cache_.clear();
    return status;
  }
  return outcomes;
}

absl::StatusOr<uint64_t> Store::Prune(int64_t cutoff_us) {
  uint64_t deleted = 0;
  for (const char* sql : {"DELETE FROM samples WHERE ts_us < ?1",
                          "DELETE FROM anomalies WHERE end_us != 0 AND end_us < ?1",
                          "DELETE FROM batches WHERE received_us < ?1",
                          "DELETE FROM collectives WHERE ts_us < ?1"}) {
    Statement stmt(writer_, sql);
    if (!stmt.ok()) return SqlError(writer_, "prepare prune");
    sqlite3_bind_int64(stmt.get(), 1, cutoff_us);
    if (sqlite3_step(stmt.get()) != SQLITE_DONE) return SqlError(writer_, "prune");
    deleted += sqlite3_changes(writer_);
  }
  return deleted;
}

absl::StatusOr<v1::Job> Store::StartJob(const v1::Job& job) {
  std::lock_guard lock(jobs_mu_);
  Statement find(jobs_db_, "SELECT end_us FROM jobs WHERE id = ?1");
  BindText(find.get(), 1, job.id());
  if (sqlite3_step(find.get()) == SQLITE_ROW && sqlite3_column_int64(find.get(), 0) == 0)
    return absl::AlreadyExistsError(StrCat("job ", job.id(), " is already running"));
  Statement begin(jobs_db_, "BEGIN IMMEDIATE"), commit(jobs_db_, "COMMIT"), rollback(jobs_db_, "ROLLBACK");
  if (sqlite3_step(begin.get()) != SQLITE_DONE) return SqlError(jobs_db_, "begin job");
  Statement del(jobs_db_, "DELETE FROM job_ranks WHERE job = ?1");
  BindText(del.get(), 1, job.id());
  Statement put(jobs_db_, "INSERT OR REPLACE INTO jobs VALUES(?1, ?2, ?3, 0)");
  BindText(put.get(), 1, job.id());
  BindText(put.get(), 2, job.name());
  sqlite3_bind_int64(put.get(), 3, job.start_us());
  bool ok = sqlite3_step(del.get()) == SQLITE_DONE && sqlite3_step(put.get()) == SQLITE_DONE;
  Statement rank(jobs_db_, "INSERT INTO job_ranks VALUES(?1, ?2, ?3, ?4, ?5)");
  for (const auto& r : job.ranks()) {
    if (!ok) break;
    sqlite3_reset(rank.get());
    BindText(rank.get(), 1, job.id());
    sqlite3_bind_int64(rank.get(), 2, r.rank());
    BindText(rank.get(), 3, r.host());
    sqlite3_bind_int64(rank.get(), 4, r.gpu());
    BindText(rank.get(), 5, r.nic());
    ok = sqlite3_step(rank.get()) == SQLITE_DONE;
  }
  if (!ok) {
    absl::Status status = SqlError(jobs_db_, "store job");
    sqlite3_step(rollback.get());
    return status;
  }
  if (sqlite3_step(commit.get()) != SQLITE_DONE) return SqlError(jobs_db_, "commit job");
  return job;
}

absl::StatusOr<v1::Job> Store::EndJob(const std::string& id, int64_t end_us) {
  std::lock_guard lock(jobs_mu_);
  Statement end(jobs_db_, "UPDATE jobs SET end_us = ?2 WHERE id = ?1 AND end_us = 0");
  BindText(end.get(), 1, id);
  sqlite3_bind_int64(end.get(), 2, end_us);
  if (sqlite3_step(end.get()) != SQLITE_DONE) return SqlError(jobs_db_, "end job");
  if (sqlite3_changes(jobs_db_) == 0) return absl::NotFoundError(StrCat("no running job ", id));
  v1::Job job;
  job.set_id(id);
  job.set_end_us(end_us);
  return job;
}

absl::StatusOr<std::vector<v1::Job>> Store::ListJobs(bool include_ended) {
  std::lock_guard lock(reader_mu_);
  Statement jobs(reader_, "SELECT id, name, start_us, end_us FROM jobs WHERE ?1 OR end_us = 0 ORDER BY start_us DESC");
  Statement ranks(reader_, "SELECT rank, host, gpu, nic FROM job_ranks WHERE job = ?1 ORDER BY rank");
  sqlite3_bind_int(jobs.get(), 1, include_ended ? 1 : 0);
  std::vector<v1::Job> out;
  while (sqlite3_step(jobs.get()) == SQLITE_ROW) {
    v1::Job job;
    job.set_id(ColumnText(jobs.get(), 0));
    job.set_name(ColumnText(jobs.get(), 1));
    job.set_start_us(sqlite3_column_int64(jobs.get(), 2));
    job.set_end_us(sqlite3_column_int64(jobs.get(), 3));
    sqlite3_reset(ranks.get());
    BindText(ranks.get(), 1, job.id());
    while (sqlite3_step(ranks.get()) == SQLITE_ROW) {
      auto* r = job.add_ranks();
      r->set_rank(static_cast<uint32_t>(sqlite3_column_int64(ranks.get(), 0)));
      r->set_host(ColumnText(ranks.get(), 1));
      r->set_gpu(static_cast<uint32_t>(sqlite3_column_int64(ranks.get(), 2)));
      r->set_nic(ColumnText(ranks.get(), 3));
    }
    out.push_back(std::move(job));
  }
  return out;
}

absl::StatusOr<std::vector<v1::JobTimelinePoint>> Store::JobTimeline(const std::string& job,
                                                                     int64_t since_us,
                                                                     int64_t bucket_us) {
  std::lock_guard lock(reader_mu_);
  Statement stmt(reader_, R"sql(
SELECT (ts_us / ?3) * ?3 AS bucket, op, count(*), count(DISTINCT rank), avg(busbw_gbs),
       min(busbw_gbs), max(exec_time_us)
FROM collectives WHERE job = ?1 AND ts_us >= ?2
GROUP BY bucket, op ORDER BY bucket, op)sql");
  if (!stmt.ok()) return SqlError(reader_, "job timeline");
  BindText(stmt.get(), 1, job);
  sqlite3_bind_int64(stmt.get(), 2, since_us);
  sqlite3_bind_int64(stmt.get(), 3, bucket_us);
  std::vector<v1::JobTimelinePoint> points;
  while (sqlite3_step(stmt.get()) == SQLITE_ROW) {
    v1::JobTimelinePoint p;
    p.set_start_us(sqlite3_column_int64(stmt.get(), 0));
    p.set_op(ColumnText(stmt.get(), 1));
    p.set_records(static_cast<uint64_t>(sqlite3_column_int64(stmt.get(), 2)));
    p.set_ranks(static_cast<uint32_t>(sqlite3_column_int64(stmt.get(), 3)));
    p.set_mean_busbw_gbs(sqlite3_column_double(stmt.get(), 4));
    p.set_min_busbw_gbs(sqlite3_column_double(stmt.get(), 5));
    p.set_max_exec_time_us(sqlite3_column_double(stmt.get(), 6));
    points.push_back(std::move(p));
  }
  return points;
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

absl::StatusOr<std::vector<v1::CounterRow>> Store::GetCounters(
    const v1::GetCountersRequest& request) {
  std::lock_guard lock(reader_mu_);
  // The host filter is a range on the entity prefix "<host>/" so the
  // series_by_entity index serves it; '0' is the character after '/'.
  Statement series(reader_, R"sql(
SELECT id, scope, entity, port, counter, prio, queue, kind FROM series
WHERE (?1 = '' OR (entity >= ?1 || '/' AND entity < ?1 || '0'))
  AND (?2 = '' OR substr(entity, instr(entity, '/') + 1) = ?2)
  AND (?3 = '' OR counter = ?3)
  AND (?4 = 0 OR scope = ?4)
ORDER BY entity, port, counter, prio, queue)sql");
  Statement latest(reader_,
                   "SELECT ts_us, value FROM samples WHERE series_id = ?1 "
                   "ORDER BY ts_us DESC LIMIT 1");
  Statement window(reader_,
                   "SELECT ts_us, delta FROM samples WHERE series_id = ?1 AND ts_us >= ?2 "
                   "ORDER BY ts_us");
  if (!series.ok() || !latest.ok() || !window.ok()) return SqlError(reader_, "prepare counters");
  BindText(series.get(), 1, request.host());
  BindText(series.get(), 2, request.device());
  BindText(series.get(), 3, request.counter());
  sqlite3_bind_int(series.get(), 4, request.scope());
  std::vector<v1::CounterRow> rows;
  int rc;
  while ((rc = sqlite3_step(series.get())) == SQLITE_ROW) {
    sqlite3_stmt* s = series.get();
    const int64_t id = sqlite3_column_int64(s, 0);
    v1::CounterRow row;
    row.set_scope(static_cast<v1::Scope>(sqlite3_column_int(s, 1)));
    row.set_entity(ColumnText(s, 2));
    row.set_port(static_cast<uint32_t>(sqlite3_column_int64(s, 3)));
    row.set_counter(ColumnText(s, 4));
    if (sqlite3_column_int64(s, 5) >= 0) row.set_prio(sqlite3_column_int64(s, 5));
    if (sqlite3_column_int64(s, 6) >= 0) row.set_queue(sqlite3_column_int64(s, 6));
    row.set_kind(static_cast<v1::ValueKind>(sqlite3_column_int(s, 7)));
    {
      Resetter reset{latest.get()};
      sqlite3_bind_int64(latest.get(), 1, id);
      if (sqlite3_step(latest.get()) != SQLITE_ROW) continue;  // pruned away
      row.set_timestamp_us(sqlite3_column_int64(latest.get(), 0));
      row.set_value(FromDb(sqlite3_column_int64(latest.get(), 1)));
    }
    if (row.kind() == v1::VALUE_KIND_COUNTER) {
      // Rate over the window: the deltas after the window's first sample,
      // divided by the time they span.
      Resetter reset{window.get()};
      sqlite3_bind_int64(window.get(), 1, id);
      sqlite3_bind_int64(window.get(), 2, request.since_us());
      int64_t first_ts = 0, last_ts = 0;
      uint64_t increase = 0;
      int n = 0;
      while (sqlite3_step(window.get()) == SQLITE_ROW) {
        const int64_t ts = sqlite3_column_int64(window.get(), 0);
        if (n == 0) first_ts = ts;
        else if (sqlite3_column_type(window.get(), 1) != SQLITE_NULL)
          increase += FromDb(sqlite3_column_int64(window.get(), 1));
        last_ts = ts;
        ++n;
      }
      if (n >= 2 && last_ts > first_ts) {
        row.set_has_rate(true);
        row.set_rate_per_second(static_cast<double>(increase) * 1e6 /
                                static_cast<double>(last_ts - first_ts));
      }
    }
    rows.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) return SqlError(reader_, "counters");
  return rows;
}

}  // namespace rocefab::collector

namespace rocefab::collector {

absl::Status Store::WriteAnomalies(std::span<const v1::Anomaly> anomalies) {
  if (anomalies.empty()) return absl::OkStatus();
  Statement put(writer_, "INSERT OR REPLACE INTO anomalies VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
  if (!put.ok()) return SqlError(writer_, "prepare anomaly");
  if (auto status = Exec(writer_, "BEGIN IMMEDIATE"); !status.ok()) return status;
  for (const v1::Anomaly& a : anomalies) {
    sqlite3_reset(put.get());
    sqlite3_bind_int64(put.get(), 1, ToDb(a.id()));
    BindText(put.get(), 2, a.kind());
    BindText(put.get(), 3, a.entity());
    sqlite3_bind_int64(put.get(), 4, a.start_us());
    sqlite3_bind_int64(put.get(), 5, a.end_us());
    const std::string blob = a.SerializeAsString();
    sqlite3_bind_blob(put.get(), 6, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(put.get()) != SQLITE_DONE) {
      absl::Status status = SqlError(writer_, "store anomaly");
      Exec(writer_, "ROLLBACK").IgnoreError();
      return status;
    }
  }
  return Exec(writer_, "COMMIT");
}

absl::StatusOr<uint64_t> Store::CloseOpenAnomalies(int64_t at_us) {
  Statement open(writer_, "SELECT proto FROM anomalies WHERE end_us = 0");
  std::vector<v1::Anomaly> closing;
  while (sqlite3_step(open.get()) == SQLITE_ROW) {
    v1::Anomaly a;
    if (!a.ParseFromArray(sqlite3_column_blob(open.get(), 0), sqlite3_column_bytes(open.get(), 0))) continue;
    a.set_end_us(std::max(a.updated_us(), a.start_us()));
    if (a.end_us() == 0) a.set_end_us(at_us);
    closing.push_back(std::move(a));
  }
  open = Statement();
  if (auto status = WriteAnomalies(closing); !status.ok()) return status;
  Statement max(writer_, "SELECT coalesce(max(id), 0) FROM anomalies");
  if (sqlite3_step(max.get()) != SQLITE_ROW) return SqlError(writer_, "max anomaly id");
  return FromDb(sqlite3_column_int64(max.get(), 0));
}

absl::StatusOr<std::vector<v1::Anomaly>> Store::ListAnomalies(int64_t since_us, int64_t until_us,
                                                              bool active_only) {
  std::lock_guard lock(reader_mu_);
  Statement stmt(reader_, R"sql(
SELECT proto FROM anomalies
WHERE (end_us = 0 OR (NOT ?3 AND end_us >= ?1)) AND (?2 = 0 OR start_us <= ?2)
ORDER BY start_us, id)sql");
  if (!stmt.ok()) return SqlError(reader_, "list anomalies");
  sqlite3_bind_int64(stmt.get(), 1, since_us);
  sqlite3_bind_int64(stmt.get(), 2, until_us);
  sqlite3_bind_int(stmt.get(), 3, active_only ? 1 : 0);
  std::vector<v1::Anomaly> out;
  while (sqlite3_step(stmt.get()) == SQLITE_ROW) {
    v1::Anomaly a;
    if (a.ParseFromArray(sqlite3_column_blob(stmt.get(), 0), sqlite3_column_bytes(stmt.get(), 0)))
      out.push_back(std::move(a));
  }
  return out;
}

absl::StatusOr<std::string> Store::RunningJobOnHost(const std::string& host, int64_t at_us) {
  std::lock_guard lock(reader_mu_);
  Statement stmt(reader_, R"sql(
SELECT j.id FROM jobs j JOIN job_ranks r ON r.job = j.id
WHERE r.host = ?1 AND j.start_us <= ?2 AND (j.end_us = 0 OR j.end_us >= ?2)
ORDER BY j.start_us DESC LIMIT 1)sql");
  if (!stmt.ok()) return SqlError(reader_, "job on host");
  BindText(stmt.get(), 1, host);
  sqlite3_bind_int64(stmt.get(), 2, at_us);
  if (sqlite3_step(stmt.get()) == SQLITE_ROW) return ColumnText(stmt.get(), 0);
  return std::string();
}

absl::StatusOr<v1::Job> Store::GetJob(const std::string& id) {
  auto jobs = ListJobs(true);
  if (!jobs.ok()) return jobs.status();
  for (v1::Job& job : *jobs)
    if (job.id() == id) return std::move(job);
  return absl::NotFoundError(StrCat("no job ", id, " in the registry"));
}

absl::StatusOr<uint64_t> Store::RecordPlaybookRun(v1::PlaybookRun run) {
  std::lock_guard lock(jobs_mu_);
  Statement next(jobs_db_, "SELECT coalesce(max(id), 0) + 1 FROM playbook_runs");
  if (sqlite3_step(next.get()) != SQLITE_ROW) return SqlError(jobs_db_, "playbook run id");
  run.set_id(FromDb(sqlite3_column_int64(next.get(), 0)));
  Statement put(jobs_db_, "INSERT INTO playbook_runs VALUES(?1, ?2, ?3)");
  const std::string blob = run.SerializeAsString();
  sqlite3_bind_int64(put.get(), 1, ToDb(run.id()));
  sqlite3_bind_int64(put.get(), 2, run.started_us());
  sqlite3_bind_blob(put.get(), 3, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(put.get()) != SQLITE_DONE) return SqlError(jobs_db_, "record playbook run");
  return run.id();
}

absl::StatusOr<std::vector<v1::PlaybookRun>> Store::ListPlaybookRuns(uint32_t limit) {
  std::lock_guard lock(reader_mu_);
  Statement stmt(reader_, "SELECT proto FROM playbook_runs ORDER BY id DESC LIMIT ?1");
  if (!stmt.ok()) return SqlError(reader_, "list playbook runs");
  sqlite3_bind_int64(stmt.get(), 1, limit ? limit : 20);
  std::vector<v1::PlaybookRun> out;
  while (sqlite3_step(stmt.get()) == SQLITE_ROW) {
    v1::PlaybookRun run;
    if (run.ParseFromArray(sqlite3_column_blob(stmt.get(), 0), sqlite3_column_bytes(stmt.get(), 0)))
      out.push_back(std::move(run));
  }
  return out;
}

}  // namespace rocefab::collector
