#pragma once
// An agent's disk spool: batches the collector has not acked (the shipper
// decides which: those that waited, and all at a stop) are files,
// <dir>/<agent boot id>/<seq>.pb, so that a restarted agent sends
// what its previous incarnation could not (the collector deduplicates by
// agent, boot and seq). Bounded in bytes: past the bound the oldest batches
// (earliest boot, lowest seq) are evicted and counted.
//
// Files are written to a temporary name and renamed, so a crash leaves a
// whole batch or none; they are not fsynced (an agent restart keeps the
// page cache; a power loss of the host loses its own telemetry anyway).
// Not thread-safe: the shipper calls it under its lock.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "rocefab/v1/telemetry.pb.h"

namespace rocefab {

class BatchSpool final {
 public:
  using Queue = std::map<uint64_t, v1::TelemetryBatch>;  // by seq

  static absl::StatusOr<std::unique_ptr<BatchSpool>> Open(const std::string& dir, uint64_t max_bytes);

  // Batches spooled by other incarnations than `current_boot`, by boot id.
  // Unreadable files are removed and counted in corrupt().
  std::map<std::string, Queue> Load(const std::string& current_boot);
  // Spools `batch` (its boot id and seq set). Returns the (boot, seq) of
  // every batch evicted to stay within the bound, oldest first.
  std::vector<std::pair<std::string, uint64_t>> Put(const v1::TelemetryBatch& batch);
  void Remove(const std::string& boot, uint64_t seq);

  uint64_t bytes() const { return bytes_; }
  size_t files() const { return sizes_.size(); }
  uint64_t evicted() const { return evicted_; }
  uint64_t corrupt() const { return corrupt_; }
  uint64_t write_errors() const { return write_errors_; }

 private:
  BatchSpool(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  std::string PathOf(const std::string& boot, uint64_t seq) const;

  std::string dir_;
  uint64_t max_bytes_;
  std::string current_boot_;  // its directory stays while it runs
  // (order of boot, seq) -> bytes; boots are ordered by when we first saw
  // them: loaded ones by their oldest file, the current one last.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> sizes_;
  std::map<std::string, uint64_t> boot_order_;
  std::map<uint64_t, std::string> boot_of_order_;
  uint64_t next_order_ = 0;
  uint64_t bytes_ = 0, evicted_ = 0, corrupt_ = 0, write_errors_ = 0;
};

}  // namespace rocefab
