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
CREATE TABLE IF NOT EXISTS running_policy(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  generation INTEGER NOT NULL,
  policy BLOB NOT NULL
);
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

using sqlite::Stmt;

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  std::unique_ptr<Store> store(new Store());
  auto db = sqlite::Db::Open(path, {});
  if (!db.ok()) return db.status();
  store->db_holder_ = std::move(*db);
  store->db_ = store->db_holder_.get();
  if (auto status = sqlite::Exec(store->db_, kSchema); !status.ok())
    return absl::Status(status.code(), StrCat(path, ": ", status.message()));
  return store;
}

Store::~Store() = default;

absl::Status Store::Exec(const std::string& sql) { return sqlite::Exec(db_, sql); }

absl::StatusOr<uint64_t> Store::LatestGeneration() {
  Stmt stmt(db_, "SELECT coalesce(max(generation), 0) FROM desired");
  auto row = stmt.Step();
  if (!row.ok()) return row.status();
  return *row ? static_cast<uint64_t>(stmt.Int(0)) : 0;
}

absl::StatusOr<std::map<std::string, v1::SwitchConfig>> Store::Desired(uint64_t generation) {
  Stmt stmt(db_, "SELECT switch, config FROM desired WHERE generation = ?1");
  stmt.Bind(1, static_cast<int64_t>(generation));
  std::map<std::string, v1::SwitchConfig> out;
  for (;;) {
    auto row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    v1::SwitchConfig config;
    const std::string_view blob = stmt.Blob(1);
    if (!config.ParseFromArray(blob.data(), static_cast<int>(blob.size())))
      return absl::DataLossError(StrCat("desired config of ", stmt.Text(0), " is corrupt"));
    out[stmt.Text(0)] = std::move(config);
  }
  return out;
}

absl::Status Store::SaveDesired(uint64_t generation,
                                const std::map<std::string, v1::SwitchConfig>& configs) {
  if (auto s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  Stmt stmt(db_, "INSERT OR REPLACE INTO desired VALUES(?1, ?2, ?3, ?4)");
  for (const auto& [name, config] : configs) {
    stmt.Bind(1, static_cast<int64_t>(generation))
        .Bind(2, name)
        .Bind(3, config.content_hash())
        .BindBlob(4, config.SerializeAsString());
    if (auto s = stmt.Run(); !s.ok()) {
      (void)Exec("ROLLBACK");
      return s;
    }
  }
  return Exec("COMMIT");
}

absl::StatusOr<std::optional<v1::Policy>> Store::RunningPolicy() {
  Stmt stmt(db_, "SELECT policy FROM running_policy WHERE id = 1");
  auto row = stmt.Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<v1::Policy>();
  v1::Policy policy;
  const std::string_view blob = stmt.Blob(0);
  if (!policy.ParseFromArray(blob.data(), static_cast<int>(blob.size())))
    return absl::DataLossError("the running policy is corrupt");
  return std::optional<v1::Policy>(std::move(policy));
}

absl::Status Store::SetRunningPolicy(uint64_t generation, const v1::Policy& policy) {
  Stmt stmt(db_, "INSERT OR REPLACE INTO running_policy VALUES(1, ?1, ?2)");
  stmt.Bind(1, static_cast<int64_t>(generation)).BindBlob(2, policy.SerializeAsString());
  return stmt.Run();
}

absl::StatusOr<std::set<std::string>> Store::Drained() {
  Stmt stmt(db_, "SELECT port FROM drains ORDER BY port");
  std::set<std::string> out;
  for (;;) {
    auto row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    out.insert(stmt.Text(0));
  }
  return out;
}

absl::Status Store::SetDrained(const std::string& port, bool drained, const std::string& reason,
                               const std::string& who, int64_t now_us) {
  Stmt stmt(db_, drained ? "INSERT OR REPLACE INTO drains VALUES(?1, ?2, ?3, ?4)"
                         : "DELETE FROM drains WHERE port = ?1");
  stmt.Bind(1, port);
  if (drained) stmt.Bind(2, reason).Bind(3, who).Bind(4, now_us);
  return stmt.Run();
}

absl::Status Store::Audit(const v1::AuditEntry& e) {
  Stmt stmt(db_, "INSERT INTO audit(ts_us, who, action, target, why, detail, generation) "
                 "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  stmt.Bind(1, e.timestamp_us())
      .Bind(2, e.who())
      .Bind(3, e.action())
      .Bind(4, e.target())
      .Bind(5, e.why())
      .Bind(6, e.detail())
      .Bind(7, static_cast<int64_t>(e.generation()));
  return stmt.Run();
}

absl::StatusOr<std::vector<v1::AuditEntry>> Store::History(uint32_t limit) {
  Stmt stmt(db_, "SELECT ts_us, who, action, target, why, detail, generation FROM audit "
                 "ORDER BY id DESC LIMIT ?1");
  stmt.Bind(1, int64_t{limit == 0 ? 50 : limit});
  std::vector<v1::AuditEntry> out;
  for (;;) {
    auto row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    v1::AuditEntry e;
    e.set_timestamp_us(stmt.Int(0));
    e.set_who(stmt.Text(1));
    e.set_action(stmt.Text(2));
    e.set_target(stmt.Text(3));
    e.set_why(stmt.Text(4));
    e.set_detail(stmt.Text(5));
    e.set_generation(static_cast<uint64_t>(stmt.Int(6)));
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace rocefab::controller
