#include "collector/store/job_registry.h"

#include "common/sqlite.h"
#include "common/strings.h"

namespace rocefab::collector {

absl::StatusOr<v1::Job> JobRegistry::Start(const v1::Job& job) {
  if (auto s = db_.Writable(); !s.ok()) return s;
  std::lock_guard lock(*db_.writer_mu);
  sqlite3* db = db_.writer;
  {
    sqlite::Stmt find(db, "SELECT end_us FROM jobs WHERE id = ?1");
    find.Bind(1, job.id());
    auto row = find.Step();
    if (!row.ok()) return row.status();
    if (*row && find.Int(0) == 0) return absl::AlreadyExistsError(StrCat("job ", job.id(), " is already running"));
  }
  if (auto s = sqlite::Exec(db, "BEGIN IMMEDIATE"); !s.ok()) return s;
  auto store = [&]() -> absl::Status {
    sqlite::Stmt del(db, "DELETE FROM job_ranks WHERE job = ?1");
    if (auto s = del.Bind(1, job.id()).Run(); !s.ok()) return s;
    sqlite::Stmt put(db, "INSERT OR REPLACE INTO jobs VALUES(?1, ?2, ?3, 0)");
    if (auto s = put.Bind(1, job.id()).Bind(2, job.name()).Bind(3, job.start_us()).Run(); !s.ok()) return s;
    sqlite::Stmt rank(db, "INSERT INTO job_ranks VALUES(?1, ?2, ?3, ?4, ?5)");
    for (const auto& r : job.ranks()) {
      rank.Bind(1, job.id()).Bind(2, int64_t{r.rank()}).Bind(3, r.host()).Bind(4, int64_t{r.gpu()}).Bind(5, r.nic());
      if (auto s = rank.Run(); !s.ok()) return s;
    }
    return absl::OkStatus();
  };
  if (auto s = store(); !s.ok()) {
    sqlite::Exec(db, "ROLLBACK").IgnoreError();
    return absl::Status(s.code(), StrCat("store job: ", s.message()));
  }
  if (auto s = sqlite::Exec(db, "COMMIT"); !s.ok()) return s;
  return job;
}

absl::StatusOr<v1::Job> JobRegistry::End(const std::string& id, int64_t end_us) {
  if (auto s = db_.Writable(); !s.ok()) return s;
  std::lock_guard lock(*db_.writer_mu);
  sqlite::Stmt end(db_.writer, "UPDATE jobs SET end_us = ?2 WHERE id = ?1 AND end_us = 0");
  if (auto s = end.Bind(1, id).Bind(2, end_us).Run(); !s.ok()) return s;
  if (sqlite3_changes(db_.writer) == 0) return absl::NotFoundError(StrCat("no running job ", id));
  v1::Job job;
  job.set_id(id);
  job.set_end_us(end_us);
  return job;
}

absl::StatusOr<std::vector<v1::Job>> JobRegistry::List(bool include_ended) {
  std::lock_guard lock(*db_.reader_mu);
  sqlite::ReadTransaction txn(db_.reader);
  if (!txn.status().ok()) return txn.status();
  sqlite::Stmt jobs(db_.reader,
                    "SELECT id, name, start_us, end_us FROM jobs WHERE ?1 OR end_us = 0 ORDER BY start_us DESC");
  sqlite::Stmt ranks(db_.reader, "SELECT rank, host, gpu, nic FROM job_ranks WHERE job = ?1 ORDER BY rank");
  if (!jobs.ok()) return jobs.status();
  if (!ranks.ok()) return ranks.status();
  jobs.Bind(1, int64_t{include_ended ? 1 : 0});
  std::vector<v1::Job> out;
  for (;;) {
    auto row = jobs.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    v1::Job job;
    job.set_id(jobs.Text(0));
    job.set_name(jobs.Text(1));
    job.set_start_us(jobs.Int(2));
    job.set_end_us(jobs.Int(3));
    ranks.Bind(1, job.id());
    for (;;) {
      auto rank = ranks.Step();
      if (!rank.ok()) return rank.status();
      if (!*rank) break;
      auto* r = job.add_ranks();
      r->set_rank(static_cast<uint32_t>(ranks.Int(0)));
      r->set_host(ranks.Text(1));
      r->set_gpu(static_cast<uint32_t>(ranks.Int(2)));
      r->set_nic(ranks.Text(3));
    }
    out.push_back(std::move(job));
  }
  return out;
}

absl::StatusOr<v1::Job> JobRegistry::Get(const std::string& id) {
  auto jobs = List(true);
  if (!jobs.ok()) return jobs.status();
  for (v1::Job& job : *jobs)
    if (job.id() == id) return std::move(job);
  return absl::NotFoundError(StrCat("no job ", id, " in the registry"));
}

absl::StatusOr<std::string> JobRegistry::RunningOnHost(const std::string& host, int64_t at_us) {
  std::lock_guard lock(*db_.reader_mu);
  sqlite::Stmt stmt(db_.reader, R"sql(
SELECT j.id FROM jobs j JOIN job_ranks r ON r.job = j.id
WHERE r.host = ?1 AND j.start_us <= ?2 AND (j.end_us = 0 OR j.end_us >= ?2)
ORDER BY j.start_us DESC LIMIT 1)sql");
  if (!stmt.ok()) return stmt.status();
  stmt.Bind(1, host).Bind(2, at_us);
  auto row = stmt.Step();
  if (!row.ok()) return row.status();
  return *row ? stmt.Text(0) : std::string();
}

}  // namespace rocefab::collector
