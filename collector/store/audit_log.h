#pragma once
// The playbook audit log: every playbook run, dry or real, manual or
// automatic, with its steps and outcome. Append-only, but for a run under
// way, which its recorder replaces until it ends. Any thread.

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "collector/store/records.h"
#include "rocefab/v1/playbook.pb.h"

namespace rocefab::collector {

class AuditLog final {
 public:
  static constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS playbook_runs(
  id INTEGER PRIMARY KEY,
  started_us INTEGER NOT NULL,
  proto BLOB NOT NULL
);
)sql";

  explicit AuditLog(RecordConnections db) : db_(db) {}

  // Stores the run under the next id and returns it.
  absl::StatusOr<uint64_t> Record(v1::PlaybookRun run);
  // Replaces the run stored under run.id(): a run under way, recorded when
  // it made its first change, as it goes on and when it ends. Only a run
  // still "running", and only by the same `who`: NotFound when no run has
  // that id, FailedPrecondition when it has ended, PermissionDenied when it
  // is another's. What has ended is never changed.
  absl::Status Update(const v1::PlaybookRun& run);
  // Runs left "running" by a process that stopped before they ended, among
  // those whose `who` starts with `who_prefix`, become "interrupted" at
  // `now_us`; their changes stay listed. Returns how many.
  absl::StatusOr<int> CloseInterrupted(std::string_view who_prefix, int64_t now_us);
  // Newest first; `limit` 0 means 20.
  absl::StatusOr<std::vector<v1::PlaybookRun>> List(uint32_t limit);

 private:
  RecordConnections db_;
};

}  // namespace rocefab::collector
