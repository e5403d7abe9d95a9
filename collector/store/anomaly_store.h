#pragma once
// Anomalies the detectors found, stored by id (a later update of the same
// anomaly replaces it). Written by the observer, read by the query service.
// Any thread.

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "collector/store/records.h"
#include "rocefab/v1/diagnosis.pb.h"

namespace rocefab::collector {

class AnomalyStore final {
 public:
  static constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS anomalies(
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  entity TEXT NOT NULL,
  start_us INTEGER NOT NULL,
  end_us INTEGER NOT NULL,
  proto BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS anomalies_by_end ON anomalies(end_us);
)sql";

  explicit AnomalyStore(RecordConnections db) : db_(db) {}

  // Inserts or updates by id, in one transaction.
  absl::Status Write(std::span<const v1::Anomaly> anomalies);
  // At start: anomalies left open by a previous run are closed at their last
  // update (they reopen if the condition persists). Returns the highest id.
  absl::StatusOr<uint64_t> CloseOpen(int64_t at_us);
  // Anomalies active at some point in [since_us, until_us] (until 0: now),
  // oldest first.
  absl::StatusOr<std::vector<v1::Anomaly>> List(int64_t since_us, int64_t until_us, bool active_only);
  // Deletes anomalies that ended before `cutoff_us`. Returns how many.
  absl::StatusOr<uint64_t> Prune(int64_t cutoff_us);

 private:
  absl::Status WriteLocked(std::span<const v1::Anomaly> anomalies);  // REQUIRES: *db_.writer_mu

  RecordConnections db_;
};

}  // namespace rocefab::collector
