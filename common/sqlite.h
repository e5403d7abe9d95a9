#pragma once
// A thin layer over the SQLite C API, shared by the collector and the
// controller: a connection opened with the house pragmas, RAII prepared
// statements with typed binds, and errors as absl::Status.
//
// A Stmt belongs to one connection and is used by one thread at a time;
// Db::Open's connection follows SQLite's own threading mode.

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rocefab::sqlite {

// "sqlite: <what>: <sqlite's message>".
absl::Status Error(sqlite3* db, std::string_view what);
// Runs one or more statements without results.
absl::Status Exec(sqlite3* db, std::string_view sql);

struct OpenOptions {
  bool read_only = false;
  bool create = true;
  bool full_mutex = false;     // SQLITE_OPEN_FULLMUTEX instead of NOMUTEX
  bool wal = true;             // journal_mode=WAL (writers only)
  bool synchronous_full = true;  // synchronous=FULL, else NORMAL (writers only)
  int busy_timeout_ms = 5000;
};

// An owned connection.
class Db final {
 public:
  Db() = default;
  static absl::StatusOr<Db> Open(const std::string& path, const OpenOptions& options);
  ~Db();
  Db(Db&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Db& operator=(Db&& other) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  sqlite3* get() const { return db_; }
  explicit operator bool() const { return db_ != nullptr; }

 private:
  sqlite3* db_ = nullptr;
};

// One prepared statement. Bind indexes are 1-based, as in SQL (?1, ?2).
// A bind after a finished or half-read Step() starts a new round; bindings
// stay until they are bound again.
class Stmt final {
 public:
  Stmt() = default;
  // An invalid statement (ok() false) when the SQL does not compile; the
  // error is in status().
  Stmt(sqlite3* db, std::string_view sql, bool persistent = false);
  ~Stmt();
  Stmt(Stmt&& other) noexcept;
  Stmt& operator=(Stmt&& other) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool ok() const { return stmt_ != nullptr; }
  const absl::Status& status() const { return status_; }
  sqlite3_stmt* get() const { return stmt_; }

  Stmt& Bind(int index, int64_t value);
  Stmt& Bind(int index, std::string_view text);
  Stmt& BindDouble(int index, double value);
  Stmt& BindBlob(int index, std::string_view bytes);
  Stmt& BindNull(int index);

  // SQLITE_ROW: true; SQLITE_DONE: false; anything else: an error.
  absl::StatusOr<bool> Step();
  // Steps a statement that returns no rows.
  absl::Status Run();
  void Reset();

  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  double Double(int column) const { return sqlite3_column_double(stmt_, column); }
  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::string Text(int column) const;
  std::string_view Blob(int column) const;

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  absl::Status status_;
  bool needs_reset_ = false;
};

// BEGIN (deferred) on construction, COMMIT on destruction: one consistent
// snapshot for several reads on a WAL connection.
class ReadTransaction final {
 public:
  explicit ReadTransaction(sqlite3* db);
  ~ReadTransaction();
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  sqlite3* db_;
  absl::Status status_;
};

// Every row's protobuf message, a BLOB in `column`, in row order. A row
// whose blob does not parse is left out: one damaged row does not cost
// the rest.
template <typename Message>
absl::StatusOr<std::vector<Message>> ReadMessages(Stmt& stmt, int column = 0) {
  if (!stmt.ok()) return stmt.status();
  std::vector<Message> out;
  for (;;) {
    auto row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    Message m;
    const std::string_view blob = stmt.Blob(column);
    if (m.ParseFromArray(blob.data(), static_cast<int>(blob.size()))) out.push_back(std::move(m));
  }
}

// SQLite integers are signed 64-bit; counters are unsigned. Store the bits.
inline int64_t ToDb(uint64_t value) { return static_cast<int64_t>(value); }
inline uint64_t FromDb(int64_t value) { return static_cast<uint64_t>(value); }

}  // namespace rocefab::sqlite
