#pragma once
// The connections the collector's small record stores share: the job
// registry, the anomaly store and the playbook audit log. They live in the
// collector's one SQLite file beside the telemetry (collector/store.h), are
// written from query and observer threads (rare, short writes) and read
// from any thread, so each connection is used under its own mutex.

#include <sqlite3.h>

#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace rocefab::collector {

struct RecordConnections {
  sqlite3* writer = nullptr;  // null in a read-only store
  std::mutex* writer_mu = nullptr;
  sqlite3* reader = nullptr;
  std::mutex* reader_mu = nullptr;

  absl::Status Writable() const {
    return writer != nullptr ? absl::OkStatus()
                             : absl::FailedPreconditionError("the store was opened read-only");
  }
};

}  // namespace rocefab::collector
