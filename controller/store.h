#pragma once
// The controller's durable state in SQLite: desired configs by generation,
// the running policy, drained ports, and the audit log (who, what, when,
// why). One connection; callers serialise access (the Controller holds a
// mutex, never across network calls).

#include <sqlite3.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/sqlite.h"
#include "rocefab/v1/control.pb.h"

namespace rocefab::controller {

class Store final {
 public:
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // The newest desired generation (0 when none) and its configs.
  absl::StatusOr<uint64_t> LatestGeneration();
  absl::StatusOr<std::map<std::string, v1::SwitchConfig>> Desired(uint64_t generation);
  absl::Status SaveDesired(uint64_t generation, const std::map<std::string, v1::SwitchConfig>& configs);

  // The policy of the last rollout that completed everywhere: what the
  // fabric runs. Empty before the first one.
  absl::StatusOr<std::optional<v1::Policy>> RunningPolicy();
  absl::Status SetRunningPolicy(uint64_t generation, const v1::Policy& policy);

  absl::StatusOr<std::set<std::string>> Drained();
  absl::Status SetDrained(const std::string& port, bool drained, const std::string& reason,
                          const std::string& who, int64_t now_us);

  absl::Status Audit(const v1::AuditEntry& entry);
  absl::StatusOr<std::vector<v1::AuditEntry>> History(uint32_t limit);

 private:
  Store() = default;
  absl::Status Exec(const std::string& sql);
  sqlite::Db db_holder_;
  sqlite3* db_ = nullptr;
};

}  // namespace rocefab::controller
