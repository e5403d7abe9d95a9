#include "common/sqlite.h"

#include "common/strings.h"

namespace rocefab::sqlite {

absl::Status Error(sqlite3* db, std::string_view what) {
  const int code = db ? sqlite3_errcode(db) : SQLITE_NOMEM;
  const std::string message = StrCat("sqlite: ", what, ": ", db ? sqlite3_errmsg(db) : "out of memory");
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) return absl::UnavailableError(message);
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) return absl::DataLossError(message);
  return absl::InternalError(message);
}

absl::Status Exec(sqlite3* db, std::string_view sql) {
  char* error = nullptr;
  const std::string text(sql);
  if (sqlite3_exec(db, text.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return absl::InternalError(StrCat("sqlite: ", message));
  }
  return absl::OkStatus();
}

absl::StatusOr<Db> Db::Open(const std::string& path, const OpenOptions& options) {
  int flags = options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (!options.read_only && options.create) flags |= SQLITE_OPEN_CREATE;
  flags |= options.full_mutex ? SQLITE_OPEN_FULLMUTEX : SQLITE_OPEN_NOMUTEX;
  Db db;
  if (sqlite3_open_v2(path.c_str(), &db.db_, flags, nullptr) != SQLITE_OK)
    return absl::UnavailableError(StrCat("cannot open database ", path, ": ",
                                         db.db_ ? sqlite3_errmsg(db.db_) : "out of memory"));
  sqlite3_busy_timeout(db.db_, options.busy_timeout_ms);
  if (!options.read_only) {
    if (options.wal) {
      if (auto s = Exec(db.db_, "PRAGMA journal_mode=WAL"); !s.ok())
        return absl::Status(s.code(), StrCat(path, ": ", s.message()));
    }
    if (auto s = Exec(db.db_, options.synchronous_full ? "PRAGMA synchronous=FULL"
                                                       : "PRAGMA synchronous=NORMAL");
        !s.ok())
      return s;
    if (auto s = Exec(db.db_, "PRAGMA temp_store=MEMORY"); !s.ok()) return s;
  }
  return db;
}

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close_v2(db_);
    db_ = other.db_;
    other.db_ = nullptr;
  }
  return *this;
}

Stmt::Stmt(sqlite3* db, std::string_view sql, bool persistent) : db_(db) {
  const unsigned flags = persistent ? SQLITE_PREPARE_PERSISTENT : 0;
  if (sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), flags, &stmt_, nullptr) !=
      SQLITE_OK) {
    status_ = Error(db, StrCat("prepare: ", sql.substr(0, 80)));
    stmt_ = nullptr;
  }
}

Stmt::~Stmt() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Stmt::Stmt(Stmt&& other) noexcept
    : db_(other.db_), stmt_(other.stmt_), status_(std::move(other.status_)),
      needs_reset_(other.needs_reset_) {
  other.stmt_ = nullptr;
}

Stmt& Stmt::operator=(Stmt&& other) noexcept {
  if (this != &other) {
    if (stmt_) sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = other.stmt_;
    status_ = std::move(other.status_);
    needs_reset_ = other.needs_reset_;
    other.stmt_ = nullptr;
  }
  return *this;
}

void Stmt::Reset() {
  if (!stmt_) return;
  sqlite3_reset(stmt_);
  needs_reset_ = false;
}

Stmt& Stmt::Bind(int index, int64_t value) {
  if (needs_reset_ || sqlite3_stmt_busy(stmt_)) Reset();
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Stmt& Stmt::Bind(int index, std::string_view text) {
  if (needs_reset_ || sqlite3_stmt_busy(stmt_)) Reset();
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::BindDouble(int index, double value) {
  if (needs_reset_ || sqlite3_stmt_busy(stmt_)) Reset();
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}

Stmt& Stmt::BindBlob(int index, std::string_view bytes) {
  if (needs_reset_ || sqlite3_stmt_busy(stmt_)) Reset();
  sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::BindNull(int index) {
  if (needs_reset_ || sqlite3_stmt_busy(stmt_)) Reset();
  sqlite3_bind_null(stmt_, index);
  return *this;
}

absl::StatusOr<bool> Stmt::Step() {
  if (!stmt_) return status_.ok() ? absl::InternalError("sqlite: statement not prepared") : status_;
  if (needs_reset_) Reset();
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  needs_reset_ = true;
  if (rc == SQLITE_DONE) return false;
  absl::Status error = Error(db_, "step");
  sqlite3_reset(stmt_);
  return error;
}

absl::Status Stmt::Run() {
  auto row = Step();
  if (!row.ok()) return row.status();
  needs_reset_ = true;
  return absl::OkStatus();
}

std::string Stmt::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  return text ? std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, column))
              : std::string();
}

std::string_view Stmt::Blob(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  return data ? std::string_view(static_cast<const char*>(data), sqlite3_column_bytes(stmt_, column))
              : std::string_view();
}

ReadTransaction::ReadTransaction(sqlite3* db) : db_(db) { status_ = Exec(db_, "BEGIN"); }

ReadTransaction::~ReadTransaction() {
  if (status_.ok()) Exec(db_, "COMMIT").IgnoreError();
}

}  // namespace rocefab::sqlite
