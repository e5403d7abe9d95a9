#include "collector/store/anomaly_store.h"

#include <algorithm>

#include "common/sqlite.h"
#include "common/strings.h"

namespace rocefab::collector {

absl::Status AnomalyStore::Write(std::span<const v1::Anomaly> anomalies) {
  if (anomalies.empty()) return absl::OkStatus();
  if (auto s = db_.Writable(); !s.ok()) return s;
  std::lock_guard lock(*db_.writer_mu);
  return WriteLocked(anomalies);
}

absl::Status AnomalyStore::WriteLocked(std::span<const v1::Anomaly> anomalies) {
  if (anomalies.empty()) return absl::OkStatus();
  sqlite3* db = db_.writer;
  sqlite::Stmt put(db, "INSERT OR REPLACE INTO anomalies VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
  if (!put.ok()) return put.status();
  if (auto s = sqlite::Exec(db, "BEGIN IMMEDIATE"); !s.ok()) return s;
  for (const v1::Anomaly& a : anomalies) {
    const std::string blob = a.SerializeAsString();
    put.Bind(1, sqlite::ToDb(a.id())).Bind(2, a.kind()).Bind(3, a.entity()).Bind(4, a.start_us());
    put.Bind(5, a.end_us()).BindBlob(6, blob);
    if (auto s = put.Run(); !s.ok()) {
      sqlite::Exec(db, "ROLLBACK").IgnoreError();
      return absl::Status(s.code(), StrCat("store anomaly: ", s.message()));
    }
  }
  return sqlite::Exec(db, "COMMIT");
}

absl::StatusOr<uint64_t> AnomalyStore::CloseOpen(int64_t at_us) {
  if (auto s = db_.Writable(); !s.ok()) return s;
  std::lock_guard lock(*db_.writer_mu);
  std::vector<v1::Anomaly> closing;
  {
    sqlite::Stmt open(db_.writer, "SELECT proto FROM anomalies WHERE end_us = 0");
    auto open_now = sqlite::ReadMessages<v1::Anomaly>(open);
    if (!open_now.ok()) return open_now.status();
    for (v1::Anomaly& a : *open_now) {
      a.set_end_us(std::max(a.updated_us(), a.start_us()));
      if (a.end_us() == 0) a.set_end_us(at_us);
      closing.push_back(std::move(a));
    }
  }
  if (auto s = WriteLocked(closing); !s.ok()) return s;
  sqlite::Stmt max(db_.writer, "SELECT coalesce(max(id), 0) FROM anomalies");
  auto row = max.Step();
  if (!row.ok()) return row.status();
  return sqlite::FromDb(max.Int(0));
}

absl::StatusOr<std::vector<v1::Anomaly>> AnomalyStore::List(int64_t since_us, int64_t until_us,
                                                            bool active_only) {
  std::lock_guard lock(*db_.reader_mu);
  sqlite::Stmt stmt(db_.reader, R"sql(
SELECT proto FROM anomalies
WHERE (end_us = 0 OR (NOT ?3 AND end_us >= ?1)) AND (?2 = 0 OR start_us <= ?2)
ORDER BY start_us, id)sql");
  if (!stmt.ok()) return stmt.status();
  stmt.Bind(1, since_us).Bind(2, until_us).Bind(3, int64_t{active_only ? 1 : 0});
  return sqlite::ReadMessages<v1::Anomaly>(stmt);
}

absl::StatusOr<uint64_t> AnomalyStore::Prune(int64_t cutoff_us) {
  if (auto s = db_.Writable(); !s.ok()) return s;
  std::lock_guard lock(*db_.writer_mu);
  sqlite::Stmt del(db_.writer, "DELETE FROM anomalies WHERE end_us != 0 AND end_us < ?1");
  if (auto s = del.Bind(1, cutoff_us).Run(); !s.ok()) return s;
  return static_cast<uint64_t>(sqlite3_changes(db_.writer));
}

}  // namespace rocefab::collector
