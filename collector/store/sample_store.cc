#include "collector/store/sample_store.h"

#include <algorithm>
#include <limits>

#include "common/counters.h"
#include "common/log.h"
#include "common/strings.h"

namespace rocefab::collector {
namespace {

constexpr char kSampleStoreLog[] = "store";
using sqlite::FromDb;
using sqlite::ToDb;

// Decodes one run's parts, read in order on `db`.
absl::Status DecodeRun(sqlite3* db, DecodedRun* run) {
  sqlite::Stmt parts(db, "SELECT data FROM parts WHERE run_id = ?1 ORDER BY part");
  parts.Bind(1, run->run_id);
  blocks::ChainState state(run->layout);
  for (;;) {
    auto row = parts.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    auto raw = blocks::Decompress(parts.Blob(0));
    if (!raw.ok()) return raw.status();
    if (auto s = blocks::DecodeColumns(run->layout, *raw, state, &run->polls); !s.ok())
      return absl::DataLossError(StrCat("run ", run->run_id, ": ", s.message()));
  }
  return absl::OkStatus();
}

// Reads the runs a query selects: (id, agent_id, layout), decoding each.
absl::StatusOr<std::vector<DecodedRun>> ReadSelected(sqlite3* db, sqlite::Stmt& runs) {
  std::vector<DecodedRun> out;
  for (;;) {
    auto row = runs.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    DecodedRun run;
    run.run_id = runs.Int(0);
    run.agent_id = runs.Text(1);
    auto raw = blocks::Decompress(runs.Blob(2));
    if (!raw.ok()) return raw.status();
    auto layout = blocks::Layout::Decode(*raw);
    if (!layout.ok()) return layout.status();
    run.layout = std::move(*layout);
    out.push_back(std::move(run));
  }
  for (DecodedRun& run : out) {
    if (auto s = DecodeRun(db, &run); !s.ok()) {
      // One damaged run must not hide every other: skip it, loudly.
      LOG_ERROR(kSampleStoreLog, "skipping unreadable sample run ", run.run_id, ": ", s.message());
      run.polls.clear();
    }
  }
  return out;
}

}  // namespace

std::string SampleStore::EncodeAbove(const std::set<uint64_t>& above) {
  std::string out;
  uint64_t prev = 0;
  for (uint64_t seq : above) {
    blocks::PutVarint(seq - prev, &out);
    prev = seq;
  }
  return out;
}

std::set<uint64_t> SampleStore::DecodeAbove(std::string_view in) {
  std::set<uint64_t> above;
  uint64_t prev = 0, step = 0;
  while (!in.empty() && blocks::GetVarint(in, &step)) above.insert(prev += step);
  return above;
}

SampleStore::SampleStore(sqlite3* writer, Options options) : db_(writer), options_(options) {}

SampleStore::~SampleStore() = default;

absl::Status SampleStore::Init() {
  insert_series_ = sqlite::Stmt(db_,
                                "INSERT OR IGNORE INTO series(scope, entity, port, counter, prio, "
                                "queue, kind) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                                true);
  find_series_ = sqlite::Stmt(db_,
                              "SELECT id FROM series WHERE scope=?1 AND entity=?2 AND port=?3 AND "
                              "counter=?4 AND prio=?5 AND queue=?6",
                              true);
  insert_entity_agent_ =
      sqlite::Stmt(db_, "INSERT OR IGNORE INTO entity_agents VALUES(?1, ?2)", true);
  insert_run_ = sqlite::Stmt(db_,
                             "INSERT INTO runs(agent_id, layout, t_min, t_max, first_commit, "
                             "last_commit, polls, samples, sealed, bytes) "
                             "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9)",
                             true);
  update_run_ = sqlite::Stmt(db_,
                             "UPDATE runs SET t_min = ?2, t_max = ?3, last_commit = ?4, polls = ?5, "
                             "samples = ?6, bytes = ?7 WHERE id = ?1",
                             true);
  insert_part_ = sqlite::Stmt(db_, "INSERT INTO parts(run_id, part, data) VALUES(?1, ?2, ?3)", true);
  get_boot_ = sqlite::Stmt(db_,
                           "SELECT watermark, above FROM agent_boots WHERE agent_id = ?1 AND "
                           "agent_boot_id = ?2",
                           true);
  put_boot_ = sqlite::Stmt(db_, "INSERT OR REPLACE INTO agent_boots VALUES(?1, ?2, ?3, ?4, ?5)", true);
  put_commit_ = sqlite::Stmt(db_, "INSERT OR REPLACE INTO meta VALUES('last_commit', ?1)", true);
  for (const sqlite::Stmt* s : {&insert_series_, &find_series_, &insert_entity_agent_, &insert_run_,
                                &update_run_, &insert_part_, &get_boot_, &put_boot_, &put_commit_})
    if (!s->ok()) return s->status();
  sqlite::Stmt last(db_,
                    "SELECT max(coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE "
                    "key='last_commit'), 0), coalesce((SELECT max(last_commit) FROM runs), 0))");
  auto row = last.Step();
  if (!row.ok()) return row.status();
  last_commit_ = *row ? FromDb(last.Int(0)) : 0;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SampleStore::SeriesId(const v1::EntitySamples& entity,
                                              const v1::Sample& sample, const std::string& agent_id) {
  const int64_t prio = sample.has_prio() ? static_cast<int64_t>(sample.prio()) : -1;
  const int64_t queue = sample.has_queue() ? static_cast<int64_t>(sample.queue()) : -1;
  key_.clear();
  StrAppend(&key_, entity.scope(), "|", entity.entity(), "|", entity.port(), "|", sample.counter(),
            "|", prio, "|", queue);
  if (auto it = series_cache_.find(key_); it != series_cache_.end()) return it->second;
  insert_series_.Bind(1, int64_t{entity.scope()})
      .Bind(2, entity.entity())
      .Bind(3, int64_t{entity.port()})
      .Bind(4, sample.counter())
      .Bind(5, prio)
      .Bind(6, queue)
      .Bind(7, int64_t{sample.kind()});
  if (auto s = insert_series_.Run(); !s.ok()) return s;
  find_series_.Bind(1, int64_t{entity.scope()})
      .Bind(2, entity.entity())
      .Bind(3, int64_t{entity.port()})
      .Bind(4, sample.counter())
      .Bind(5, prio)
      .Bind(6, queue);
  auto row = find_series_.Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::InternalError("sqlite: a series just inserted is missing");
  const int64_t id = find_series_.Int(0);
  find_series_.Reset();
  insert_entity_agent_.Bind(1, entity.entity()).Bind(2, agent_id);
  if (auto s = insert_entity_agent_.Run(); !s.ok()) return s;
  series_cache_.emplace(key_, id);
  return id;
}

absl::StatusOr<bool> SampleStore::Dedup(const v1::TelemetryBatch& batch, int64_t received_us) {
  const auto key = std::make_pair(batch.agent_id(), batch.agent_boot_id());
  auto it = boots_.find(key);
  if (it == boots_.end()) {
    Boot boot;
    get_boot_.Bind(1, batch.agent_id()).Bind(2, batch.agent_boot_id());
    auto row = get_boot_.Step();
    if (!row.ok()) return row.status();
    if (*row) {
      boot.watermark = FromDb(get_boot_.Int(0));
      boot.above = DecodeAbove(get_boot_.Blob(1));
    }
    get_boot_.Reset();
    it = boots_.emplace(key, std::move(boot)).first;
  }
  Boot& boot = it->second;
  const uint64_t seq = batch.seq();
  if (seq <= boot.watermark || boot.above.count(seq)) return true;
  if (seq == boot.watermark + 1) {
    ++boot.watermark;
    while (!boot.above.empty() && *boot.above.begin() == boot.watermark + 1) {
      boot.above.erase(boot.above.begin());
      ++boot.watermark;
    }
  } else {
    boot.above.insert(seq);
  }
  dirty_boots_.push_back(it);  // written by Flush
  boot.last_seen_us = received_us;
  now_us_ = received_us;
  return false;
}

bool SampleStore::SameShape(const v1::TelemetryBatch& batch, const Shape& shape) const {
  if (batch.entities_size() != static_cast<int>(shape.entity_names.size())) return false;
  size_t i = 0;
  for (int e = 0; e < batch.entities_size(); ++e) {
    const v1::EntitySamples& es = batch.entities(e);
    if (es.entity() != shape.entity_names[e] ||
        es.samples_size() != static_cast<int>(shape.entity_counts[e]))
      return false;
    for (const v1::Sample& sample : es.samples()) {
      const ShapeEntry& entry = shape.entries[i++];
      if (entry.scope != es.scope() || entry.port != es.port() || entry.counter != sample.counter() ||
          entry.prio != (sample.has_prio() ? static_cast<int64_t>(sample.prio()) : -1) ||
          entry.queue != (sample.has_queue() ? static_cast<int64_t>(sample.queue()) : -1) ||
          (entry.series != 0 && entry.gauge != (sample.kind() == v1::VALUE_KIND_GAUGE)))
        return false;
    }
  }
  return true;
}

absl::Status SampleStore::BuildShape(const v1::TelemetryBatch& batch, Shape* shape) {
  *shape = Shape();
  shape->entity_names.reserve(batch.entities_size());
  for (const v1::EntitySamples& es : batch.entities()) shape->entity_names.push_back(es.entity());
  for (int e = 0; e < batch.entities_size(); ++e) {
    const v1::EntitySamples& es = batch.entities(e);
    shape->entity_counts.push_back(static_cast<uint32_t>(es.samples_size()));
    uint32_t stored = 0;
    for (const v1::Sample& sample : es.samples()) {
      ShapeEntry entry{es.scope(), es.port(), sample.counter(),
                       sample.has_prio() ? static_cast<int64_t>(sample.prio()) : -1,
                       sample.has_queue() ? static_cast<int64_t>(sample.queue()) : -1, 0,
                       sample.kind() == v1::VALUE_KIND_GAUGE};
      // Only the vocabulary is stored; anything else is counted and dropped.
      if (FindCounter(es.scope(), sample.counter()) != nullptr) {
        auto id = SeriesId(es, sample, batch.agent_id());
        if (!id.ok()) return id.status();
        entry.series = *id;
        shape->layout.series.push_back(*id);
        shape->layout.gauge.push_back(entry.gauge ? 1 : 0);
        ++stored;
      }
      shape->entries.push_back(std::move(entry));
    }
    if (stored > 0) shape->layout.entity_sizes.push_back(stored);
  }
  shape->layout_hash = shape->layout.Hash();
  return absl::OkStatus();
}

SampleStore::Run* SampleStore::FindRun(const std::string& agent, const Shape& shape) {
  auto& runs = runs_[agent];
  for (auto it = runs.begin(); it != runs.end(); ++it) {
    Run* run = it->get();
    if (run->layout_hash != shape.layout_hash || !(run->layout == shape.layout)) continue;
    // A full run is sealed (off the ack path) and the poll starts a new one.
    if (Full(*run) && run->pending.empty()) {
      to_seal_.push_back(run->run_id);
      runs.erase(it);
      break;
    }
    return run;
  }
  // A new layout. An agent alternates between a few (a fast PFC poll and a
  // full one); more than that means the set changed, so the old runs end.
  if (runs.size() >= 4 && runs.front()->pending.empty()) {
    if (runs.front()->run_id != 0) to_seal_.push_back(runs.front()->run_id);
    runs.erase(runs.begin());
  }
  auto run = std::make_unique<Run>();
  run->agent_id = agent;
  run->layout = shape.layout;
  run->layout_hash = shape.layout_hash;
  run->state = blocks::ChainState(run->layout);
  runs.push_back(std::move(run));
  return runs.back().get();
}

absl::Status SampleStore::Add(const v1::TelemetryBatch& batch, uint64_t commit, uint64_t* written,
                              uint64_t* rejected) {
  *written = *rejected = 0;
  std::array<Shape, 2>& shapes = shapes_[batch.agent_id()];
  if (shapes[0].entries.empty() || !SameShape(batch, shapes[0])) {
    std::swap(shapes[0], shapes[1]);
    if (shapes[0].entries.empty() || !SameShape(batch, shapes[0])) {
      if (auto s = BuildShape(batch, &shapes[0]); !s.ok()) {
        shapes_.erase(batch.agent_id());
        return s;
      }
    }
  }
  Shape& shape = shapes[0];
  const size_t n_series = shape.layout.series.size();
  *rejected = shape.entries.size() - n_series;
  if (n_series == 0) return absl::OkStatus();
  Run* run = FindRun(batch.agent_id(), shape);
  blocks::Poll& poll = run->pending.emplace_back();
  poll.commit = commit;
  poll.ts_us.reserve(shape.layout.entities());
  poll.value.resize(n_series);
  poll.delta.resize(n_series);
  poll.flags.resize(n_series);
  size_t i = 0, s = 0;
  for (const v1::EntitySamples& es : batch.entities()) {
    bool any = false;
    for (const v1::Sample& sample : es.samples()) {
      if (shape.entries[i++].series == 0) continue;
      any = true;
      poll.value[s] = sample.value();
      poll.delta[s] = sample.delta();
      poll.flags[s] = static_cast<uint8_t>((sample.has_delta() ? blocks::kHasDelta : 0) |
                                           (sample.reset() ? blocks::kReset : 0));
      ++s;
    }
    if (any) {
      poll.ts_us.push_back(es.timestamp_us());
      if (!run->has_time) {
        run->t_min = run->t_max = es.timestamp_us();
        run->has_time = true;
      }
      run->t_min = std::min(run->t_min, es.timestamp_us());
      run->t_max = std::max(run->t_max, es.timestamp_us());
    }
  }
  run->last_add_us = now_us_;
  if (run->pending.size() == 1) touched_.push_back(run);
  *written = n_series;
  return absl::OkStatus();
}

absl::Status SampleStore::WriteRun(Run& run) {
  std::string raw;
  blocks::EncodeColumns(run.layout, run.pending, run.state, &raw);
  const std::string part = blocks::Compress(raw, options_.part_level);
  if (part.empty()) return absl::InternalError("zstd failed to compress a sample part");
  const uint64_t polls_before = run.polls;
  run.polls += static_cast<uint32_t>(run.pending.size());
  run.samples += run.pending.size() * run.layout.series.size();
  run.bytes += part.size();
  if (polls_before == 0) run.first_commit = run.pending.front().commit;
  run.last_commit = run.pending.back().commit;
  if (run.run_id == 0) {
    const std::string layout = blocks::Compress(run.layout.Encode(), options_.sealed_level);
    insert_run_.Bind(1, run.agent_id)
        .BindBlob(2, layout)
        .Bind(3, run.t_min)
        .Bind(4, run.t_max)
        .Bind(5, ToDb(run.first_commit))
        .Bind(6, ToDb(run.last_commit))
        .Bind(7, int64_t{run.polls})
        .Bind(8, ToDb(run.samples))
        .Bind(9, ToDb(run.bytes));
    if (auto s = insert_run_.Run(); !s.ok()) return s;
    run.run_id = sqlite3_last_insert_rowid(db_);
  } else {
    update_run_.Bind(1, run.run_id)
        .Bind(2, run.t_min)
        .Bind(3, run.t_max)
        .Bind(4, ToDb(run.last_commit))
        .Bind(5, int64_t{run.polls})
        .Bind(6, ToDb(run.samples))
        .Bind(7, ToDb(run.bytes));
    if (auto s = update_run_.Run(); !s.ok()) return s;
  }
  insert_part_.Bind(1, run.run_id).Bind(2, int64_t{run.parts}).BindBlob(3, part);
  if (auto s = insert_part_.Run(); !s.ok()) return s;
  ++run.parts;
  run.pending.clear();
  return absl::OkStatus();
}

absl::Status SampleStore::Flush(uint64_t commit) {
  for (Run* run : touched_)
    if (auto s = WriteRun(*run); !s.ok()) return s;
  touched_.clear();
  // Only the boots this commit stored batches of (map iterators stay valid).
  std::sort(dirty_boots_.begin(), dirty_boots_.end(),
            [](const auto& a, const auto& b) { return a->first < b->first; });
  dirty_boots_.erase(std::unique(dirty_boots_.begin(), dirty_boots_.end()), dirty_boots_.end());
  for (const auto& it : dirty_boots_) {
    const auto& [key, boot] = *it;
    put_boot_.Bind(1, key.first)
        .Bind(2, key.second)
        .Bind(3, ToDb(boot.watermark))
        .BindBlob(4, EncodeAbove(boot.above))
        .Bind(5, boot.last_seen_us);
    if (auto s = put_boot_.Run(); !s.ok()) return s;
  }
  dirty_boots_.clear();
  put_commit_.Bind(1, ToDb(commit));
  if (auto s = put_commit_.Run(); !s.ok()) return s;
  last_commit_ = commit;
  return absl::OkStatus();
}

void SampleStore::Abandon() {
  // Runs whose rows exist keep what was committed; they are sealed as
  // orphans. New polls start new runs.
  for (auto& [agent, runs] : runs_)
    for (auto& run : runs)
      if (run->run_id != 0) to_seal_.push_back(run->run_id);
  runs_.clear();
  touched_.clear();
  shapes_.clear();
  series_cache_.clear();
  dirty_boots_.clear();
  boots_.clear();
}

absl::Status SampleStore::SealRun(int64_t run_id) {
  sqlite::Stmt get(db_, "SELECT layout FROM runs WHERE id = ?1 AND sealed = 0");
  get.Bind(1, run_id);
  auto row = get.Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::OkStatus();  // sealed or pruned already
  DecodedRun run;
  run.run_id = run_id;
  auto raw = blocks::Decompress(get.Blob(0));
  if (!raw.ok()) return raw.status();
  auto layout = blocks::Layout::Decode(*raw);
  if (!layout.ok()) return layout.status();
  run.layout = std::move(*layout);
  get.Reset();
  if (auto s = DecodeRun(db_, &run); !s.ok()) return s;
  std::string merged_raw;
  blocks::ChainState state(run.layout);
  blocks::EncodeColumns(run.layout, run.polls, state, &merged_raw);
  const std::string merged = blocks::Compress(merged_raw, options_.sealed_level);
  if (merged.empty()) return absl::InternalError("zstd failed to compress a sealed run");
  if (auto s = sqlite::Exec(db_, "BEGIN IMMEDIATE"); !s.ok()) return s;
  sqlite::Stmt del(db_, "DELETE FROM parts WHERE run_id = ?1");
  sqlite::Stmt put(db_, "INSERT INTO parts(run_id, part, data) VALUES(?1, 0, ?2)");
  sqlite::Stmt mark(db_, "UPDATE runs SET sealed = 1, bytes = ?2 WHERE id = ?1");
  del.Bind(1, run_id);
  put.Bind(1, run_id).BindBlob(2, merged);
  mark.Bind(1, run_id).Bind(2, static_cast<int64_t>(merged.size()));
  absl::Status status = del.Run();
  if (status.ok()) status = put.Run();
  if (status.ok()) status = mark.Run();
  if (!status.ok()) {
    sqlite::Exec(db_, "ROLLBACK").IgnoreError();
    return status;
  }
  return sqlite::Exec(db_, "COMMIT");
}

absl::StatusOr<int> SampleStore::Seal(int64_t now_us, int max_runs) {
  // Full or idle live runs leave memory; the next poll starts a new run.
  for (auto& [agent, runs] : runs_) {
    for (auto it = runs.begin(); it != runs.end();) {
      Run& run = **it;
      if (run.pending.empty() && run.run_id != 0 &&
          (Full(run) || now_us - run.last_add_us > options_.seal_idle_us)) {
        to_seal_.push_back(run.run_id);
        it = runs.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Unsealed runs that no live run owns: left by a previous process or by
  // a failed transaction. Looked for now and then.
  if (last_orphan_scan_us_ == 0 || now_us - last_orphan_scan_us_ > 10'000'000) {
    last_orphan_scan_us_ = now_us;
    std::set<int64_t> live;
    for (auto& [agent, runs] : runs_)
      for (auto& run : runs) live.insert(run->run_id);
    sqlite::Stmt open(db_, "SELECT id FROM runs WHERE sealed = 0 ORDER BY id");
    for (;;) {
      auto row = open.Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      if (!live.count(open.Int(0)) &&
          std::find(to_seal_.begin(), to_seal_.end(), open.Int(0)) == to_seal_.end())
        to_seal_.push_back(open.Int(0));
    }
  }
  int sealed = 0;
  while (!to_seal_.empty() && sealed < max_runs) {
    const int64_t id = to_seal_.front();
    if (auto s = SealRun(id); !s.ok()) {
      LOG_WARN(kSampleStoreLog, "sealing sample run ", id, ": ", s.message(), " (left as parts)");
    }
    to_seal_.erase(to_seal_.begin());
    ++sealed;
  }
  return sealed;
}

absl::StatusOr<uint64_t> SampleStore::Prune(int64_t cutoff_us, uint64_t keep_after_commit) {
  keep_after_commit = std::min<uint64_t>(keep_after_commit, INT64_MAX);
  sqlite::Stmt count(db_,
                     "SELECT coalesce(sum(samples), 0) FROM runs WHERE t_max < ?1 AND sealed = 1 "
                     "AND last_commit <= ?2");
  count.Bind(1, cutoff_us).Bind(2, ToDb(keep_after_commit));
  auto row = count.Step();
  if (!row.ok()) return row.status();
  const uint64_t samples = FromDb(count.Int(0));
  count.Reset();
  if (samples == 0) return uint64_t{0};
  if (auto s = sqlite::Exec(db_, "BEGIN IMMEDIATE"); !s.ok()) return s;
  sqlite::Stmt parts(db_,
                     "DELETE FROM parts WHERE run_id IN (SELECT id FROM runs WHERE t_max < ?1 AND "
                     "sealed = 1 AND last_commit <= ?2)");
  sqlite::Stmt runs(db_, "DELETE FROM runs WHERE t_max < ?1 AND sealed = 1 AND last_commit <= ?2");
  sqlite::Stmt boots(db_, "DELETE FROM agent_boots WHERE last_seen_us < ?1");
  parts.Bind(1, cutoff_us).Bind(2, ToDb(keep_after_commit));
  runs.Bind(1, cutoff_us).Bind(2, ToDb(keep_after_commit));
  boots.Bind(1, cutoff_us);
  absl::Status status = parts.Run();
  if (status.ok()) status = runs.Run();
  if (status.ok()) status = boots.Run();
  if (!status.ok()) {
    sqlite::Exec(db_, "ROLLBACK").IgnoreError();
    return status;
  }
  if (auto s = sqlite::Exec(db_, "COMMIT"); !s.ok()) return s;
  // Forget boots the file no longer has, so they are not written back.
  for (auto it = boots_.begin(); it != boots_.end();)
    it = it->second.last_seen_us < cutoff_us ? boots_.erase(it) : std::next(it);
  return samples;
}

absl::StatusOr<std::vector<DecodedRun>> SampleStore::ReadRuns(sqlite3* db, const std::string& agent,
                                                              int64_t from_us, int64_t to_us) {
  sqlite::Stmt runs(db,
                    "SELECT id, agent_id, layout FROM runs WHERE agent_id = ?1 AND t_max >= ?2 AND "
                    "t_min <= ?3 ORDER BY t_min, id");
  runs.Bind(1, agent).Bind(2, from_us).Bind(3, to_us);
  return ReadSelected(db, runs);
}

absl::StatusOr<std::optional<DecodedRun>> SampleStore::ReadNewestHolding(
    sqlite3* db, const std::string& agent, int64_t before_us, const std::set<int64_t>& series,
    int max_runs) {
  sqlite::Stmt runs(db,
                    "SELECT id, agent_id, layout FROM runs WHERE agent_id = ?1 AND t_max < ?2 "
                    "ORDER BY t_max DESC LIMIT ?3");
  runs.Bind(1, agent).Bind(2, before_us).Bind(3, int64_t{max_runs});
  std::vector<int64_t> candidates;
  std::vector<blocks::Layout> layouts;
  for (;;) {
    auto row = runs.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    auto raw = blocks::Decompress(runs.Blob(2));
    if (!raw.ok()) continue;
    auto layout = blocks::Layout::Decode(*raw);
    if (!layout.ok()) continue;
    for (int64_t id : layout->series) {
      if (series.count(id)) {
        DecodedRun run;
        run.run_id = runs.Int(0);
        run.agent_id = runs.Text(1);
        run.layout = std::move(*layout);
        runs.Reset();
        if (auto s = DecodeRun(db, &run); !s.ok()) return s;
        return std::optional<DecodedRun>(std::move(run));
      }
    }
  }
  return std::optional<DecodedRun>();
}

absl::StatusOr<std::vector<DecodedRun>> SampleStore::ReadCommits(sqlite3* db, uint64_t after, uint64_t upto,
                                                                 CommitCursorCache* cache) {
  CommitCursorCache once;  // a reader that does not follow on
  if (cache == nullptr) cache = &once;
  sqlite::Stmt runs(db,
                    "SELECT id, agent_id, layout, sealed FROM runs WHERE last_commit > ?1 AND "
                    "first_commit <= ?2 ORDER BY first_commit, id");
  runs.Bind(1, ToDb(after)).Bind(2, ToDb(upto));
  sqlite::Stmt parts(db, "SELECT part, data FROM parts WHERE run_id = ?1 AND part >= ?2 ORDER BY part");
  std::vector<DecodedRun> out;
  std::unordered_map<int64_t, CommitCursorCache::Run> kept;
  for (;;) {
    auto row = runs.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    const int64_t id = runs.Int(0);
    const bool sealed = runs.Int(3) != 0;
    auto found = cache->runs.find(id);
    CommitCursorCache::Run entry;
    if (found != cache->runs.end() && found->second.sealed == sealed) {
      entry = std::move(found->second);
    } else {
      // New to this follower, or sealed since (its parts became one): from
      // the start, which repeats polls already read; the commit filter drops
      // them.
      auto raw = blocks::Decompress(runs.Blob(2));
      if (!raw.ok()) return raw.status();
      auto layout = blocks::Layout::Decode(*raw);
      if (!layout.ok()) return layout.status();
      entry.agent_id = runs.Text(1);
      entry.layout = std::move(*layout);
      entry.state = blocks::ChainState(entry.layout);
      entry.sealed = sealed;
    }
    parts.Bind(1, id).Bind(2, entry.next_part);
    absl::Status damaged;
    for (;;) {
      auto part = parts.Step();
      if (!part.ok()) return part.status();
      if (!*part) break;
      auto raw = blocks::Decompress(parts.Blob(1));
      if (raw.ok()) damaged = blocks::DecodeColumns(entry.layout, *raw, entry.state, &entry.ahead);
      else damaged = raw.status();
      if (!damaged.ok()) break;
      entry.next_part = parts.Int(0) + 1;
      ++cache->parts_decoded;
    }
    if (!damaged.ok()) {
      // One damaged run must not hide every other: skip it, loudly.
      LOG_ERROR(kSampleStoreLog, "skipping unreadable sample run ", id, ": ", damaged.message());
      continue;
    }
    DecodedRun run;
    run.run_id = id;
    run.agent_id = entry.agent_id;
    run.layout = entry.layout;
    std::vector<blocks::Poll> later;
    for (blocks::Poll& p : entry.ahead) {
      if (p.commit <= after) continue;
      if (p.commit <= upto) run.polls.push_back(std::move(p));
      else later.push_back(std::move(p));
    }
    entry.ahead = std::move(later);
    out.push_back(std::move(run));
    kept.emplace(id, std::move(entry));
  }
  // Runs the read did not select have nothing left to follow.
  cache->runs = std::move(kept);
  return out;
}

absl::StatusOr<SeriesInfo> SampleStore::ReadSeries(sqlite3* db, int64_t id) {
  sqlite::Stmt get(db,
                   "SELECT scope, entity, port, counter, prio, queue, kind FROM series WHERE id = ?1");
  get.Bind(1, id);
  auto row = get.Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::NotFoundError(StrCat("no series ", id));
  return SeriesFromRow(get, 0);
}

SeriesInfo SampleStore::SeriesFromRow(const sqlite::Stmt& row, int first) {
  SeriesInfo info;
  info.scope = static_cast<v1::Scope>(row.Int(first));
  info.entity = row.Text(first + 1);
  info.port = static_cast<uint32_t>(row.Int(first + 2));
  info.counter = row.Text(first + 3);
  info.prio = row.Int(first + 4);
  info.queue = row.Int(first + 5);
  info.kind = static_cast<v1::ValueKind>(row.Int(first + 6));
  return info;
}

absl::StatusOr<SampleStore::Footprint> SampleStore::Measure(sqlite3* db) {
  sqlite::Stmt get(db,
                   "SELECT count(*), coalesce(sum(sealed), 0), coalesce(sum(samples), 0), "
                   "coalesce(sum(bytes), 0) FROM runs");
  auto row = get.Step();
  if (!row.ok()) return row.status();
  Footprint f;
  f.runs = FromDb(get.Int(0));
  f.sealed_runs = FromDb(get.Int(1));
  f.samples = FromDb(get.Int(2));
  f.payload_bytes = FromDb(get.Int(3));
  return f;
}

}  // namespace rocefab::collector
