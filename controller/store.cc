#include "controller/store.h"

#include "common/strings.h"

namespace rocefab::controller {
namespace {

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS desired(
  generation INTEGER NOT NULL,
  switch TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  config BLOB NOT NULL,
  PRIMARY KEY(generation, switch)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS drains(
  port TEXT PRIMARY KEY,
  reason TEXT NOT NULL,
  who TEXT NOT NULL,
  ts_us INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS audit(
  id INTEGER PRIMARY KEY,
  ts_us INTEGER NOT NULL,
  who TEXT NOT NULL,
  action TEXT NOT NULL,
  target TEXT NOT NULL,
  why TEXT NOT NULL,
  detail TEXT NOT NULL,
  generation INTEGER NOT NULL
);
)sql";

struct Stmt {
  sqlite3_stmt* s = nullptr;
  Stmt(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &s, nullptr); }
  ~Stmt() { sqlite3_finalize(s); }
};

std::string Text(sqlite3_stmt* s, int col) {
  const unsigned char* t = sqlite3_column_text(s, col);
  return t ? reinterpret_cast<const char*>(t) : "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  std::unique_ptr<Store> store(new Store());
  if (sqlite3_open_v2(path.c_str(), &store->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
    return absl::UnavailableError(StrCat("cannot open ", path, ": ",
                                         store->db_ ? sqlite3_errmsg(store->db_) : "out of memory"));
  sqlite3_busy_timeout(store->db_, 5000);
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", kSchema})
    if (auto status = store->Exec(sql); !status.ok())
      return absl::Status(status.code(), StrCat(path, ": ", status.message()));
  return store;
}

Store::~Store() {
  if (db_) sqlite3_close(db_);
}

absl::Status Store::Exec(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return absl::InternalError(StrCat("sqlite: ", message));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Store::LatestGeneration() {
  Stmt stmt(db_, "SELECT coalesce(max(generation), 0) FROM desired");
  if (sqlite3_step(stmt.s) != SQLITE_ROW) return absl::InternalError(sqlite3_errmsg(db_));
  return static_cast<uint64_t>(sqlite3_column_int64(stmt.s, 0));
}

absl::StatusOr<std::map<std::string, v1::SwitchConfig>> Store::Desired(uint64_t generation) {
  Stmt stmt(db_, "SELECT switch, config FROM desired WHERE generation = ?1");
  sqlite3_bind_int64(stmt.s, 1, static_cast<int64_t>(generation));
  std::map<std::string, v1::SwitchConfig> out;
  while (sqlite3_step(stmt.s) == SQLITE_ROW) {
    v1::SwitchConfig config;
    if (!config.ParseFromArray(sqlite3_column_blob(stmt.s, 1), sqlite3_column_bytes(stmt.s, 1)))
      return absl::DataLossError(StrCat("desired config of ", Text(stmt.s, 0), " is corrupt"));
    out[Text(stmt.s, 0)] = std::move(config);
  }
  return out;
}

absl::Status Store::SaveDesired(uint64_t generation,
                                const std::map<std::string, v1::SwitchConfig>& configs) {
  if (auto s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  Stmt stmt(db_, "INSERT OR REPLACE INTO desired VALUES(?1, ?2, ?3, ?4)");
  for (const auto& [name, config] : configs) {
    const std::string bytes = config.SerializeAsString();
    sqlite3_reset(stmt.s);
    sqlite3_bind_int64(stmt.s, 1, static_cast<int64_t>(generation));
    sqlite3_bind_text(stmt.s, 2, name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt.s, 3, config.content_hash().c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_blob(stmt.s, 4, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(stmt.s) != SQLITE_DONE) {
      const std::string error = sqlite3_errmsg(db_);
      (void)Exec("ROLLBACK");
      return absl::InternalError(StrCat("sqlite: ", error));
    }
  }
  return Exec("COMMIT");
}

absl::StatusOr<std::set<std::string>> Store::Drained() {
  Stmt stmt(db_, "SELECT port FROM drains ORDER BY port");
  std::set<std::string> out;
  while (sqlite3_step(stmt.s) == SQLITE_ROW) out.insert(Text(stmt.s, 0));
  return out;
}

absl::Status Store::SetDrained(const std::string& port, bool drained, const std::string& reason,
                               const std::string& who, int64_t now_us) {
  Stmt stmt(db_, drained ? "INSERT OR REPLACE INTO drains VALUES(?1, ?2, ?3, ?4)"
                         : "DELETE FROM drains WHERE port = ?1");
  sqlite3_bind_text(stmt.s, 1, port.c_str(), -1, SQLITE_TRANSIENT);
  if (drained) {
    sqlite3_bind_text(stmt.s, 2, reason.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt.s, 3, who.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt.s, 4, now_us);
  }
  if (sqlite3_step(stmt.s) != SQLITE_DONE) return absl::InternalError(sqlite3_errmsg(db_));
  return absl::OkStatus();
}

absl::Status Store::Audit(const v1::AuditEntry& e) {
  Stmt stmt(db_, "INSERT INTO audit(ts_us, who, action, target, why, detail, generation) "
                 "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  sqlite3_bind_int64(stmt.s, 1, e.timestamp_us());
  sqlite3_bind_text(stmt.s, 2, e.who().c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt.s, 3, e.action().c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt.s, 4, e.target().c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt.s, 5, e.why().c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt.s, 6, e.detail().c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(stmt.s, 7, static_cast<int64_t>(e.generation()));
  if (sqlite3_step(stmt.s) != SQLITE_DONE) return absl::InternalError(sqlite3_errmsg(db_));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::AuditEntry>> Store::History(uint32_t limit) {
  Stmt stmt(db_, "SELECT ts_us, who, action, target, why, detail, generation FROM audit "
                 "ORDER BY id DESC LIMIT ?1");
  sqlite3_bind_int64(stmt.s, 1, limit == 0 ? 50 : limit);
  std::vector<v1::AuditEntry> out;
  while (sqlite3_step(stmt.s) == SQLITE_ROW) {
    v1::AuditEntry e;
    e.set_timestamp_us(sqlite3_column_int64(stmt.s, 0));
    e.set_who(Text(stmt.s, 1));
    e.set_action(Text(stmt.s, 2));
    e.set_target(Text(stmt.s, 3));
    e.set_why(Text(stmt.s, 4));
    e.set_detail(Text(stmt.s, 5));
    e.set_generation(static_cast<uint64_t>(sqlite3_column_int64(stmt.s, 6)));
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace rocefab::controller
