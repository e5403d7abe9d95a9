// The compact sample store through Store, on a real SQLite file: what goes
// in comes out, across parts, sealing, a reopen, a changed series set, dedup
// with gaps, retention that spares unexported commits, a version 1 file
// converted in place, and the bytes a sample costs.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <random>

#include "collector/store.h"
#include "tests/support/test_support.h"

namespace rocefab::collector {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000'000;

// One host poll: `nics` NICs with `counters` counters each; four of them
// grow by about 10^6 per poll, the rest stay flat, as on a quiet fabric.
v1::TelemetryBatch HostPoll(const std::string& host, uint64_t seq, int poll, int nics, int counters,
                            std::mt19937_64& rng, std::vector<uint64_t>& values) {
  static const char* kNames[] = {"rx_bytes",         "tx_bytes",         "rx_packets",
                                 "tx_packets",       "rx_errors",        "rx_discards",
                                 "tx_discards",      "tx_wait",          "symbol_errors",
                                 "link_downed",      "ecn_marked_packets", "cnp_sent",
                                 "cnp_handled",      "cnp_ignored",      "out_of_sequence",
                                 "packet_seq_errors", "local_ack_timeouts", "retransmits",
                                 "retransmit_timeouts", "rx_icrc_errors"};
  v1::TelemetryBatch batch;
  batch.set_agent_id(host);
  batch.set_agent_boot_id("boot");
  batch.set_agent_kind(v1::AGENT_KIND_HOST);
  batch.set_seq(seq);
  batch.set_created_us(kT0 + poll * 1'000'000);
  values.resize(static_cast<size_t>(nics * counters), 1'000'000'000);
  for (int n = 0; n < nics; ++n) {
    auto* e = batch.add_entities();
    e->set_scope(v1::SCOPE_NIC);
    e->set_entity(host + "/mlx5_" + std::to_string(n));
    e->set_port(1);
    e->set_timestamp_us(kT0 + poll * 1'000'000 + static_cast<int64_t>(rng() % 3000));
    for (int c = 0; c < counters; ++c) {
      uint64_t& v = values[static_cast<size_t>(n * counters + c)];
      const uint64_t step = c < 4 ? 1'000'000 + rng() % 100'000 : 0;
      v += step;
      auto* s = e->add_samples();
      s->set_counter(kNames[c % 20]);
      s->set_kind(v1::VALUE_KIND_COUNTER);
      s->set_value(v);
      if (poll > 0) s->set_delta(step);
    }
  }
  return batch;
}

class SampleStoreTest : public ::testing::Test {
 protected:
  void Open(StoreOptions options = {}) {
    store_.reset();
    options.path = dir_ / "collector.db";
    auto store = Store::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  std::vector<WriteOutcome> Write(const std::vector<v1::TelemetryBatch>& batches, int64_t now) {
    std::vector<const v1::TelemetryBatch*> ptrs;
    for (const auto& b : batches) ptrs.push_back(&b);
    auto outcomes = store_->WriteBatches(ptrs, now);
    EXPECT_TRUE(outcomes.ok()) << outcomes.status();
    return outcomes.ok() ? *outcomes : std::vector<WriteOutcome>{};
  }
  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(SampleStoreTest, EverySampleReadsBackAcrossPartsSealingAndReopen) {
  StoreOptions options;
  options.samples.seal_polls = 16;
  Open(options);
  std::mt19937_64 rng(11);
  std::vector<uint64_t> a, b;
  std::vector<v1::TelemetryBatch> sent;
  for (int poll = 0; poll < 50; ++poll) {
    std::vector<v1::TelemetryBatch> group = {HostPoll("z1-r01-h1", poll + 1, poll, 2, 6, rng, a),
                                             HostPoll("z1-r01-h2", poll + 1, poll, 2, 6, rng, b)};
    for (const WriteOutcome& o : Write(group, kT0 + poll * 1'000'000)) {
      EXPECT_EQ(o.status, v1::ACK_STATUS_STORED);
      EXPECT_EQ(o.samples_written, 12u);
    }
    sent.insert(sent.end(), group.begin(), group.end());
    if (poll == 20) {
      ASSERT_TRUE(store_->SealRuns(kT0 + poll * 1'000'000, 100).ok());
    }
  }
  auto check = [&] {
    for (const auto& batch : sent) {
      for (const auto& e : batch.entities()) {
        for (const auto& s : e.samples()) {
          auto rows = store_->ReadSamples(e.entity(), s.counter(), e.timestamp_us(), e.timestamp_us());
          ASSERT_TRUE(rows.ok()) << rows.status();
          ASSERT_EQ(rows->size(), 1u) << e.entity() << " " << s.counter() << " " << e.timestamp_us();
          EXPECT_EQ((*rows)[0].value, s.value());
          EXPECT_EQ((*rows)[0].has_delta, s.has_delta());
          if (s.has_delta()) {
            EXPECT_EQ((*rows)[0].delta, s.delta());
          }
        }
      }
    }
  };
  check();
  auto footprint = store_->MeasureSamples();
  ASSERT_TRUE(footprint.ok());
  EXPECT_EQ(footprint->samples, 50u * 24u);
  EXPECT_GE(footprint->sealed_runs, 2u);
  // A reopened store seals what the last process left open, and reads the same.
  Open(options);
  ASSERT_TRUE(store_->SealRuns(kT0 + 100'000'000, 100).ok());
  footprint = store_->MeasureSamples();
  EXPECT_EQ(footprint->runs, footprint->sealed_runs);
  check();
  // And keeps counting commits upward.
  const uint64_t before = store_->last_commit();
  Write({HostPoll("z1-r01-h1", 51, 50, 2, 6, rng, a)}, kT0 + 50'000'000);
  EXPECT_EQ(store_->last_commit(), before + 1);
}

TEST_F(SampleStoreTest, AChangedSeriesSetStartsANewRunAndBothRead) {
  Open();
  std::mt19937_64 rng(3);
  std::vector<uint64_t> v;
  Write({HostPoll("h", 1, 0, 1, 4, rng, v)}, kT0);
  std::vector<uint64_t> w;
  Write({HostPoll("h", 2, 1, 2, 4, rng, w)}, kT0 + 1'000'000);  // a NIC appeared
  Write({HostPoll("h", 3, 2, 1, 4, rng, v)}, kT0 + 2'000'000);  // and went away
  auto rows = store_->ReadSamples("h/mlx5_0", "rx_bytes", 0, INT64_MAX);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_LT((*rows)[0].ts_us, (*rows)[1].ts_us);
  EXPECT_EQ(store_->ReadSamples("h/mlx5_1", "", 0, INT64_MAX)->size(), 4u);
}

// An agent with the PFC fast path alternates between a full batch and a
// fast one of a few series: both layouts stay open, and every sample of
// both reads back in time order.
TEST_F(SampleStoreTest, FastAndFullBatchesOfOneAgentAlternate) {
  Open();
  std::mt19937_64 rng(5);
  std::vector<uint64_t> full, fast;
  uint64_t seq = 0;
  for (int poll = 0; poll < 6; ++poll) {
    Write({HostPoll("h", ++seq, 2 * poll, 2, 8, rng, full)}, kT0 + 2 * poll * 1'000'000);
    Write({HostPoll("h", ++seq, 2 * poll + 1, 1, 2, rng, fast)}, kT0 + (2 * poll + 1) * 1'000'000);
  }
  auto rows = store_->ReadSamples("h/mlx5_0", "rx_bytes", 0, INT64_MAX);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 12u) << "six full and six fast samples";
  for (size_t i = 1; i < rows->size(); ++i) EXPECT_LT((*rows)[i - 1].ts_us, (*rows)[i].ts_us);
  EXPECT_EQ(store_->ReadSamples("h/mlx5_1", "", 0, INT64_MAX)->size(), 6u * 8u) << "only the full batches have it";
}

TEST_F(SampleStoreTest, DedupHoldsAcrossGapsAndReopen) {
  Open();
  std::mt19937_64 rng(5);
  std::vector<uint64_t> v;
  auto batch = [&](uint64_t seq) { return HostPoll("h", seq, static_cast<int>(seq), 1, 2, rng, v); };
  // 3 arrives before 2: 2 must still be stored when it comes.
  EXPECT_EQ(Write({batch(1), batch(3)}, kT0)[1].status, v1::ACK_STATUS_STORED);
  EXPECT_EQ(Write({batch(3)}, kT0)[0].status, v1::ACK_STATUS_DUPLICATE);
  Open();
  EXPECT_EQ(Write({batch(2)}, kT0)[0].status, v1::ACK_STATUS_STORED);
  const auto again = Write({batch(1), batch(2), batch(3), batch(3)}, kT0);
  for (const auto& o : again) EXPECT_EQ(o.status, v1::ACK_STATUS_DUPLICATE);
  EXPECT_EQ(Write({batch(4)}, kT0)[0].status, v1::ACK_STATUS_STORED);
  // Within one commit, the second copy is the duplicate.
  const auto twice = Write({batch(5), batch(5)}, kT0);
  EXPECT_EQ(twice[0].status, v1::ACK_STATUS_STORED);
  EXPECT_EQ(twice[1].status, v1::ACK_STATUS_DUPLICATE);
}

TEST_F(SampleStoreTest, RetentionDropsWholeRunsButSparesUnexportedCommits) {
  StoreOptions options;
  options.samples.seal_polls = 10;
  Open(options);
  std::mt19937_64 rng(9);
  std::vector<uint64_t> v;
  for (int poll = 0; poll < 40; ++poll)
    Write({HostPoll("h", poll + 1, poll, 1, 3, rng, v)}, kT0 + poll * 1'000'000);
  ASSERT_TRUE(store_->SealRuns(kT0 + 40'000'000, 100).ok());
  // Commits after 5 are not exported yet: nothing past them goes.
  auto kept = store_->Prune(kT0 + 35'000'000, 5);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, 0u);
  auto pruned = store_->Prune(kT0 + 35'000'000, UINT64_MAX);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 30u * 3u) << "three whole runs of ten polls";
  auto rows = store_->ReadSamples("h/mlx5_0", "rx_bytes", 0, INT64_MAX);
  ASSERT_EQ(rows->size(), 10u);
  EXPECT_EQ((*rows)[0].ts_us / 1'000'000, (kT0 + 30'000'000) / 1'000'000);
}

TEST_F(SampleStoreTest, CommitsReadBackInOrderForExport) {
  Open();
  std::mt19937_64 rng(2);
  std::vector<uint64_t> a, b;
  for (int poll = 0; poll < 5; ++poll)
    Write({HostPoll("a", poll + 1, poll, 1, 2, rng, a), HostPoll("b", poll + 1, poll, 1, 2, rng, b)},
          kT0 + poll * 1'000'000);
  const uint64_t last = store_->last_commit();
  auto rows = store_->ReadCommits(last - 2, last);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->size(), 2u * 2u * 2u) << "two commits of two agents with two series";
  for (const SampleRow& r : *rows) EXPECT_GT(r.commit, last - 2);
  EXPECT_TRUE(store_->ReadCommits(last, last + 10)->empty());
}

TEST_F(SampleStoreTest, AVersionOneFileIsConvertedOrRefused) {
  const std::string path = dir_ / "collector.db";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES('schema_version', '1');
CREATE TABLE batches(agent_id TEXT, agent_boot_id TEXT, seq INTEGER, created_us INTEGER,
                     received_us INTEGER, n_samples INTEGER);
CREATE TABLE series(id INTEGER PRIMARY KEY, scope INTEGER NOT NULL, entity TEXT NOT NULL,
  port INTEGER NOT NULL, counter TEXT NOT NULL, prio INTEGER NOT NULL, queue INTEGER NOT NULL,
  kind INTEGER NOT NULL, UNIQUE(scope, entity, port, counter, prio, queue));
CREATE TABLE samples(series_id INTEGER NOT NULL, ts_us INTEGER NOT NULL, value INTEGER NOT NULL,
  delta INTEGER, reset INTEGER NOT NULL);
INSERT INTO series VALUES(1, 1, 'z1-r01-h1/mlx5_0', 1, 'rx_bytes', -1, -1, 1);
INSERT INTO series VALUES(2, 1, 'z1-r01-h1/mlx5_0', 1, 'pfc_tx_pause_us', 3, -1, 1);
INSERT INTO samples VALUES(1, 1000000, 100, NULL, 0);
INSERT INTO samples VALUES(2, 1000000, 7, NULL, 0);
INSERT INTO samples VALUES(1, 2000000, 300, 200, 0);
INSERT INTO samples VALUES(2, 2000000, 9, 2, 0);
)sql", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  StoreOptions refuse;
  refuse.path = path;
  refuse.migrate = false;
  auto refused = Store::Open(refuse);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("version 1"), std::string::npos);
  Open();
  auto rows = store_->ReadSamples("z1-r01-h1/mlx5_0", "", 0, INT64_MAX);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);
  auto pause = store_->ReadSamples("z1-r01-h1/mlx5_0", "pfc_tx_pause_us", 0, INT64_MAX);
  ASSERT_EQ(pause->size(), 2u);
  EXPECT_EQ((*pause)[1].value, 9u);
  EXPECT_EQ((*pause)[1].series.prio, 3);
  EXPECT_TRUE((*pause)[1].has_delta);
  EXPECT_FALSE((*pause)[0].has_delta);
}

TEST_F(SampleStoreTest, ASteadyHostCostsFarLessThanARowPerSample) {
  Open();
  std::mt19937_64 rng(1);
  std::vector<uint64_t> v;
  for (int poll = 0; poll < 256; ++poll)
    Write({HostPoll("z1-r01-h1", poll + 1, poll, 8, 20, rng, v)}, kT0 + poll * 1'000'000);
  ASSERT_TRUE(store_->SealRuns(kT0 + 1'000'000'000, 100).ok());
  auto footprint = store_->MeasureSamples();
  ASSERT_TRUE(footprint.ok());
  const double per_sample =
      static_cast<double>(footprint->payload_bytes) / static_cast<double>(footprint->samples);
  // Four of twenty counters carry ~17 bits of noise each poll.
  EXPECT_LT(per_sample, 2.0) << footprint->payload_bytes << " bytes for " << footprint->samples;
}

}  // namespace
}  // namespace rocefab::collector
