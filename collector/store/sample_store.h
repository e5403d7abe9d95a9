#pragma once
// Counter samples in compressed column runs (collector/store/block_codec.h),
// inside the collector's SQLite file. Schema and reasons in
// docs/architecture.md ("Collector store").
//
// Write side (the store thread only, inside the caller's transaction):
// Dedup() and Add() per batch, then Flush() writes one part per run that
// this commit touched. After a failed transaction the caller calls Abandon(),
// which forgets the in-memory state so that it is rebuilt from the file.
// Seal() and Prune() run in transactions of their own, off the ack path.
//
// Read side: the static Read* functions take any connection, inside a read
// transaction the caller holds (so a run and its parts are one snapshot).

#include <sqlite3.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "collector/store/block_codec.h"
#include "common/sqlite.h"
#include "rocefab/v1/query.pb.h"
#include "rocefab/v1/telemetry.pb.h"

namespace rocefab::collector {

// What a series is, as the series table holds it.
struct SeriesInfo {
  v1::Scope scope = v1::SCOPE_UNSPECIFIED;
  std::string entity;
  uint32_t port = 0;
  std::string counter;
  int64_t prio = -1;   // -1: no label
  int64_t queue = -1;  // -1: no label
  v1::ValueKind kind = v1::VALUE_KIND_UNSPECIFIED;
};

// One run as read back: its layout and every poll in it.
struct DecodedRun {
  int64_t run_id = 0;
  std::string agent_id;
  blocks::Layout layout;
  std::vector<blocks::Poll> polls;
};

// What a reader that follows the store commit by commit (remote-write)
// keeps between reads, so that each stored part is decompressed and decoded
// once, not once per read of a run it belongs to: per run still being
// followed, its layout, the chain state after the parts decoded so far, and
// the decoded polls of commits not yet asked for. One per follower; not
// thread-safe.
struct CommitCursorCache {
  struct Run {
    std::string agent_id;
    blocks::Layout layout;
    blocks::ChainState state;
    int64_t next_part = 0;
    bool sealed = false;
    std::vector<blocks::Poll> ahead;  // decoded, commits above the last read
  };
  std::unordered_map<int64_t, Run> runs;
  uint64_t parts_decoded = 0;  // for tests and metrics
};

struct SampleStoreOptions {
  // A run is sealed once its parts hold this many bytes, so that a sealed
  // run fills several pages of the file (a blob's last page is half empty on
  // average), or after this many polls, whichever comes first.
  uint64_t seal_bytes = 32 << 10;
  uint32_t seal_polls = 1024;
  int64_t seal_idle_us = 120'000'000;  // ... or this long without one
  int part_level = 1;                  // zstd level of a part
  int sealed_level = 3;                // zstd level of a sealed run
};

class SampleStore final {
 public:
  using Options = SampleStoreOptions;

  static constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS series(
  id INTEGER PRIMARY KEY,
  scope INTEGER NOT NULL,
  entity TEXT NOT NULL,
  port INTEGER NOT NULL,
  counter TEXT NOT NULL,
  prio INTEGER NOT NULL,
  queue INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  UNIQUE(scope, entity, port, counter, prio, queue)
);
CREATE INDEX IF NOT EXISTS series_by_entity ON series(entity);
CREATE TABLE IF NOT EXISTS entity_agents(
  entity TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  PRIMARY KEY(entity, agent_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS agent_boots(
  agent_id TEXT NOT NULL,
  agent_boot_id TEXT NOT NULL,
  watermark INTEGER NOT NULL,
  above BLOB NOT NULL,
  last_seen_us INTEGER NOT NULL,
  PRIMARY KEY(agent_id, agent_boot_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs(
  id INTEGER PRIMARY KEY,
  agent_id TEXT NOT NULL,
  layout BLOB NOT NULL,
  t_min INTEGER NOT NULL,
  t_max INTEGER NOT NULL,
  first_commit INTEGER NOT NULL,
  last_commit INTEGER NOT NULL,
  polls INTEGER NOT NULL,
  samples INTEGER NOT NULL,
  sealed INTEGER NOT NULL,
  bytes INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_agent ON runs(agent_id, t_max);
CREATE INDEX IF NOT EXISTS runs_by_commit ON runs(last_commit);
CREATE INDEX IF NOT EXISTS runs_by_time ON runs(t_max);
CREATE INDEX IF NOT EXISTS runs_open ON runs(id) WHERE sealed = 0;
CREATE TABLE IF NOT EXISTS parts(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL,
  part INTEGER NOT NULL,
  data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS parts_by_run ON parts(run_id, part);
)sql";

  explicit SampleStore(sqlite3* writer, Options options = {});
  ~SampleStore();
  SampleStore(const SampleStore&) = delete;
  SampleStore& operator=(const SampleStore&) = delete;

  // Prepares statements and reads the last commit id. Call once.
  absl::Status Init();

  // The id the next commit's polls carry. Commit ids only grow.
  uint64_t NextCommit() const { return last_commit_.load() + 1; }
  // Any thread.
  uint64_t last_commit() const { return last_commit_.load(); }

  // True when (agent, boot, seq) was stored before (or earlier in this
  // commit); otherwise records it as stored by this commit.
  absl::StatusOr<bool> Dedup(const v1::TelemetryBatch& batch, int64_t received_us);
  // Adds the batch's vocabulary samples to this commit. Sets `written` and
  // `rejected` (names outside the vocabulary).
  absl::Status Add(const v1::TelemetryBatch& batch, uint64_t commit, uint64_t* written,
                   uint64_t* rejected);
  // Writes this commit's parts, runs and dedup state. Inside the transaction.
  absl::Status Flush(uint64_t commit);
  // The transaction rolled back: forget what was not committed.
  void Abandon();

  // Seals full or idle runs (and every unsealed run a previous process left)
  // in one transaction each; at most `max_runs`. Returns how many.
  absl::StatusOr<int> Seal(int64_t now_us, int max_runs);
  // Deletes runs whose newest sample is older than `cutoff_us` and whose
  // commits are all at or below `keep_after_commit`. Returns samples deleted.
  absl::StatusOr<uint64_t> Prune(int64_t cutoff_us, uint64_t keep_after_commit);

  // --- reads -------------------------------------------------------------
  // Runs of `agent` with samples in [from_us, to_us], oldest first.
  static absl::StatusOr<std::vector<DecodedRun>> ReadRuns(sqlite3* db, const std::string& agent,
                                                          int64_t from_us, int64_t to_us);
  // The newest run of `agent` that ends before `before_us` and holds one of
  // `series`, if any (at most `max_runs` runs are looked at).
  static absl::StatusOr<std::optional<DecodedRun>> ReadNewestHolding(
      sqlite3* db, const std::string& agent, int64_t before_us, const std::set<int64_t>& series,
      int max_runs);
  // Runs with polls of commits in (after, upto], ordered by first commit.
  // With `cache`, reads follow on from the previous read through it (the
  // next read's `after` must be this one's `upto`, or the cache is reset).
  static absl::StatusOr<std::vector<DecodedRun>> ReadCommits(sqlite3* db, uint64_t after, uint64_t upto,
                                                             CommitCursorCache* cache = nullptr);
  static absl::StatusOr<SeriesInfo> ReadSeries(sqlite3* db, int64_t id);
  // A series row's (scope, entity, port, counter, prio, queue, kind) from
  // column `first` on.
  static SeriesInfo SeriesFromRow(const sqlite::Stmt& row, int first);
  // The agent_boots.above column: stored seqs above the watermark.
  static std::string EncodeAbove(const std::set<uint64_t>& above);
  static std::set<uint64_t> DecodeAbove(std::string_view bytes);

  // Size of runs and parts (compressed payload bytes) and samples held.
  struct Footprint {
    uint64_t runs = 0, sealed_runs = 0, samples = 0, payload_bytes = 0;
  };
  static absl::StatusOr<Footprint> Measure(sqlite3* db);

 private:
  // An agent's batch shape, so that a batch like the last one skips the
  // per-sample name lookups.
  struct ShapeEntry {
    int scope;
    uint32_t port;
    std::string counter;
    int64_t prio, queue;
    int64_t series;  // 0: outside the vocabulary
    bool gauge;
  };
  struct Shape {
    std::vector<std::string> entity_names;
    std::vector<uint32_t> entity_counts;  // samples per entity, stored or not
    std::vector<ShapeEntry> entries;
    blocks::Layout layout;
    uint64_t layout_hash = 0;
  };
  struct Run {
    int64_t run_id = 0;  // 0 until its row is written
    std::string agent_id;
    blocks::Layout layout;
    uint64_t layout_hash = 0;
    blocks::ChainState state;
    uint32_t polls = 0, parts = 0;
    uint64_t samples = 0, bytes = 0;
    int64_t t_min = 0, t_max = 0;
    bool has_time = false;
    uint64_t first_commit = 0, last_commit = 0;
    int64_t last_add_us = 0;  // received time of the last poll
    std::vector<blocks::Poll> pending;
  };
  struct Boot {
    uint64_t watermark = 0;
    std::set<uint64_t> above;
    int64_t last_seen_us = 0;
  };

  absl::StatusOr<int64_t> SeriesId(const v1::EntitySamples& entity, const v1::Sample& sample,
                                   const std::string& agent_id);
  // Builds `shape` from the batch (slow path: name lookups).
  absl::Status BuildShape(const v1::TelemetryBatch& batch, Shape* shape);
  bool SameShape(const v1::TelemetryBatch& batch, const Shape& shape) const;
  Run* FindRun(const std::string& agent, const Shape& shape);
  absl::Status WriteRun(Run& run);
  absl::Status SealRun(int64_t run_id);
  bool Full(const Run& run) const {
    return run.polls >= options_.seal_polls || run.bytes >= options_.seal_bytes;
  }

  sqlite3* db_;
  Options options_;
  std::atomic<uint64_t> last_commit_{0};
  sqlite::Stmt insert_series_, find_series_, insert_entity_agent_, insert_run_, update_run_,
      insert_part_, get_boot_, put_boot_, put_commit_;
  std::unordered_map<std::string, int64_t> series_cache_;
  std::string key_;
  // By agent: its last two batch shapes, most recent first (an agent with
  // the PFC fast path alternates between a fast and a full one).
  std::unordered_map<std::string, std::array<Shape, 2>> shapes_;
  std::unordered_map<std::string, std::vector<std::unique_ptr<Run>>> runs_;  // by agent
  std::vector<Run*> touched_;
  std::map<std::pair<std::string, std::string>, Boot> boots_;
  std::vector<std::map<std::pair<std::string, std::string>, Boot>::iterator> dirty_boots_;
  std::vector<int64_t> to_seal_;
  int64_t last_orphan_scan_us_ = 0;
  int64_t now_us_ = 0;  // received time of the batch being added
};

}  // namespace rocefab::collector
