#pragma once
// The job registry: which training jobs run, since when, and which rank runs
// on which host, GPU and NIC. Filled by the Slurm prolog and epilog
// (`rocefab job start|end`), read by diagnosis and the fabric context.
// Any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collector/store/records.h"
#include "rocefab/v1/jobs.pb.h"

namespace rocefab::collector {

class JobRegistry final {
 public:
  static constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  start_us INTEGER NOT NULL,
  end_us INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS job_ranks(
  job TEXT NOT NULL,
  rank INTEGER NOT NULL,
  host TEXT NOT NULL,
  gpu INTEGER NOT NULL,
  nic TEXT NOT NULL,
  PRIMARY KEY(job, rank)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS job_ranks_by_host ON job_ranks(host);
)sql";

  explicit JobRegistry(RecordConnections db) : db_(db) {}

  // Registers a job (again, after it ended: its ranks are replaced).
  // ALREADY_EXISTS while a job of that id runs.
  absl::StatusOr<v1::Job> Start(const v1::Job& job);
  // NOT_FOUND unless the job runs.
  absl::StatusOr<v1::Job> End(const std::string& id, int64_t end_us);
  // Newest first.
  absl::StatusOr<std::vector<v1::Job>> List(bool include_ended);
  absl::StatusOr<v1::Job> Get(const std::string& id);
  // The registered job running on `host` at `at_us`, or "".
  absl::StatusOr<std::string> RunningOnHost(const std::string& host, int64_t at_us);

 private:
  RecordConnections db_;
};

}  // namespace rocefab::collector
