#include "collector/store/audit_log.h"

#include "common/sqlite.h"
#include "common/strings.h"

namespace rocefab::collector {

absl::StatusOr<uint64_t> AuditLog::Record(v1::PlaybookRun run) {
  if (auto s = db_.Writable(); !s.ok()) return s;
  std::lock_guard lock(*db_.writer_mu);
  sqlite::Stmt next(db_.writer, "SELECT coalesce(max(id), 0) + 1 FROM playbook_runs");
  auto row = next.Step();
  if (!row.ok()) return row.status();
  run.set_id(sqlite::FromDb(next.Int(0)));
  const std::string blob = run.SerializeAsString();
  sqlite::Stmt put(db_.writer, "INSERT INTO playbook_runs VALUES(?1, ?2, ?3)");
  if (auto s = put.Bind(1, sqlite::ToDb(run.id())).Bind(2, run.started_us()).BindBlob(3, blob).Run(); !s.ok())
    return s;
  return run.id();
}

absl::Status AuditLog::Update(const v1::PlaybookRun& run) {
  if (auto s = db_.Writable(); !s.ok()) return s;
  std::lock_guard lock(*db_.writer_mu);
  sqlite::Stmt get(db_.writer, "SELECT proto FROM playbook_runs WHERE id = ?1");
  get.Bind(1, sqlite::ToDb(run.id()));
  auto row = get.Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::NotFoundError(StrCat("no playbook run ", run.id()));
  v1::PlaybookRun stored;
  const std::string_view old = get.Blob(0);
  if (!stored.ParseFromArray(old.data(), static_cast<int>(old.size())))
    return absl::DataLossError(StrCat("playbook run ", run.id(), " is unreadable"));
  // The log stays append-only for what has ended, and a run is continued
  // only by whoever recorded it.
  if (stored.result() != "running")
    return absl::FailedPreconditionError(StrCat("playbook run ", run.id(), " has ended (", stored.result(), ")"));
  if (stored.who() != run.who())
    return absl::PermissionDeniedError(StrCat("playbook run ", run.id(), " is ", stored.who(), "'s"));
  const std::string blob = run.SerializeAsString();
  sqlite::Stmt put(db_.writer, "UPDATE playbook_runs SET proto = ?2 WHERE id = ?1");
  return put.Bind(1, sqlite::ToDb(run.id())).BindBlob(2, blob).Run();
}

absl::StatusOr<int> AuditLog::CloseInterrupted(std::string_view who_prefix, int64_t now_us) {
  if (auto s = db_.Writable(); !s.ok()) return s;
  std::vector<v1::PlaybookRun> open;
  {
    std::lock_guard lock(*db_.writer_mu);
    sqlite::Stmt stmt(db_.writer, "SELECT proto FROM playbook_runs ORDER BY id");
    auto runs = sqlite::ReadMessages<v1::PlaybookRun>(stmt);
    if (!runs.ok()) return runs.status();
    for (v1::PlaybookRun& run : *runs)
      if (run.result() == "running" && run.who().starts_with(who_prefix)) open.push_back(std::move(run));
  }
  for (v1::PlaybookRun& run : open) {
    run.set_result("interrupted");
    run.set_ended_us(now_us);
    run.add_log("interrupted: the process running it stopped before it ended; the changes above stay in effect");
    if (auto s = Update(run); !s.ok()) return s;
  }
  return static_cast<int>(open.size());
}

absl::StatusOr<std::vector<v1::PlaybookRun>> AuditLog::List(uint32_t limit) {
  std::lock_guard lock(*db_.reader_mu);
  sqlite::Stmt stmt(db_.reader, "SELECT proto FROM playbook_runs ORDER BY id DESC LIMIT ?1");
  if (!stmt.ok()) return stmt.status();
  stmt.Bind(1, int64_t{limit ? limit : 20});
  return sqlite::ReadMessages<v1::PlaybookRun>(stmt);
}

}  // namespace rocefab::collector
