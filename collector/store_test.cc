#include "collector/store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "tests/support/test_support.h"

namespace rocefab::collector {
namespace {

v1::TelemetryBatch Batch(uint64_t seq, int64_t ts_us, uint64_t rx_bytes,
                         std::optional<uint64_t> delta, const std::string& boot = "boot-1") {
  v1::TelemetryBatch batch;
  batch.set_agent_id("z1-r01-h1");
  batch.set_agent_boot_id(boot);
  batch.set_host_boot_id("kernel-boot");
  batch.set_agent_kind(v1::AGENT_KIND_HOST);
  batch.set_seq(seq);
  batch.set_created_us(ts_us);
  batch.mutable_health()->set_skipped_values(2);
  batch.mutable_delivery()->set_stream_failures(seq);  // cumulative on the agent
  auto* entity = batch.add_entities();
  entity->set_scope(v1::SCOPE_NIC);
  entity->set_entity("z1-r01-h1/mlx5_0");
  entity->set_port(1);
  entity->set_timestamp_us(ts_us);
  auto* rx = entity->add_samples();
  rx->set_counter("rx_bytes");
  rx->set_kind(v1::VALUE_KIND_COUNTER);
  rx->set_value(rx_bytes);
  if (delta) rx->set_delta(*delta);
  auto* pfc = entity->add_samples();
  pfc->set_counter("pfc_rx_pause_frames");
  pfc->set_prio(3);
  pfc->set_kind(v1::VALUE_KIND_COUNTER);
  pfc->set_value(seq * 10);
  if (delta) pfc->set_delta(10);
  return batch;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open({.path = dir_ / "collector.db"});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  std::vector<WriteOutcome> Write(std::vector<v1::TelemetryBatch> batches, int64_t now = 5) {
    std::vector<const v1::TelemetryBatch*> ptrs;
    for (const auto& b : batches) ptrs.push_back(&b);
    auto outcomes = store_->WriteBatches(ptrs, now);
    EXPECT_TRUE(outcomes.ok()) << outcomes.status();
    return outcomes.ok() ? *outcomes : std::vector<WriteOutcome>{};
  }
  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreTest, StoresAndDeduplicatesByAgentBootSeq) {
  auto first = Write({Batch(1, 1'000'000, 4000, std::nullopt)});
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].status, v1::ACK_STATUS_STORED);
  EXPECT_EQ(first[0].samples_written, 2u);
  // The same batch again (its ack was lost) and a new one in one transaction.
  auto second = Write({Batch(1, 1'000'000, 4000, std::nullopt), Batch(2, 2'000'000, 8000, 4000)});
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].status, v1::ACK_STATUS_DUPLICATE);
  EXPECT_EQ(second[0].samples_written, 0u);
  EXPECT_EQ(second[1].status, v1::ACK_STATUS_STORED);
  // Same seq under a new agent boot id is a different batch.
  auto third = Write({Batch(1, 3'000'000, 100, std::nullopt, "boot-2")});
  EXPECT_EQ(third[0].status, v1::ACK_STATUS_STORED);

  auto agents = store_->ListAgents();
  ASSERT_TRUE(agents.ok());
  ASSERT_EQ(agents->size(), 1u);
  const v1::AgentInfo& agent = (*agents)[0];
  EXPECT_EQ(agent.agent_id(), "z1-r01-h1");
  EXPECT_EQ(agent.batches(), 3u);  // duplicates are not counted
  EXPECT_EQ(agent.samples(), 6u);
  EXPECT_EQ(agent.agent_boot_id(), "boot-2");
  EXPECT_EQ(agent.last_seq(), 1u);  // restarted with the new boot
  EXPECT_EQ(agent.health().skipped_values(), 6u);
  // Delivery stats are the agent's own totals: the latest, not a sum.
  EXPECT_EQ(agent.delivery().stream_failures(), 1u);
}

TEST_F(StoreTest, UnknownCountersAreRejectedAndCounted) {
  v1::TelemetryBatch batch = Batch(1, 1, 1, std::nullopt);
  auto* bogus = batch.mutable_entities(0)->add_samples();
  bogus->set_counter("rx_bogons");
  bogus->set_value(1);
  auto outcomes = Write({batch});
  EXPECT_EQ(outcomes[0].samples_written, 2u);
  EXPECT_EQ(outcomes[0].samples_rejected, 1u);
}

TEST_F(StoreTest, CountersQueryReturnsLatestAndRate) {
  Write({Batch(1, 10'000'000, 4000, std::nullopt), Batch(2, 11'000'000, 8000, 4000),
         Batch(3, 12'000'000, 16000, 8000)});
  v1::GetCountersRequest request;
  request.set_host("z1-r01-h1");
  request.set_since_us(0);
  auto rows = store_->GetCounters(request);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  const v1::CounterRow& pfc = (*rows)[0];
  EXPECT_EQ(pfc.counter(), "pfc_rx_pause_frames");
  EXPECT_TRUE(pfc.has_prio());
  EXPECT_EQ(pfc.prio(), 3u);
  const v1::CounterRow& rx = (*rows)[1];
  EXPECT_EQ(rx.counter(), "rx_bytes");
  EXPECT_FALSE(rx.has_prio());
  EXPECT_EQ(rx.value(), 16000u);
  EXPECT_EQ(rx.timestamp_us(), 12'000'000);
  ASSERT_TRUE(rx.has_rate());
  EXPECT_DOUBLE_EQ(rx.rate_per_second(), 6000.0);  // (4000 + 8000) bytes over 2 s

  // Filters: device, counter, and a host that is only a prefix.
  request.set_device("mlx5_0");
  request.set_counter("rx_bytes");
  EXPECT_EQ(store_->GetCounters(request)->size(), 1u);
  request.set_host("z1-r01-h");
  EXPECT_EQ(store_->GetCounters(request)->size(), 0u);
  // A window holding one sample has no rate.
  v1::GetCountersRequest narrow;
  narrow.set_since_us(12'000'000);
  auto narrow_rows = store_->GetCounters(narrow);
  EXPECT_FALSE((*narrow_rows)[1].has_rate());
}

TEST_F(StoreTest, RetentionPrunesOldSamples) {
  // Retention drops whole sealed runs: one poll a run here.
  store_.reset();
  StoreOptions options{dir_ / "collector.db"};
  options.samples.seal_polls = 1;
  store_ = std::move(*Store::Open(options));
  Write({Batch(1, 1'000'000, 1, std::nullopt)}, /*now=*/1'000'000);
  Write({Batch(2, 9'000'000, 2, 1)}, /*now=*/9'000'000);
  ASSERT_TRUE(store_->SealRuns(9'000'000, 10).ok());
  auto pruned = store_->Prune(5'000'000);
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(*pruned, 2u);  // the 2 samples of batch 1
  v1::GetCountersRequest request;
  auto rows = store_->GetCounters(request);
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].value(), 2u);
}

TEST_F(StoreTest, SurvivesReopen) {
  Write({Batch(1, 1, 1, std::nullopt)});
  store_.reset();
  auto reopened = Store::Open({.path = dir_ / "collector.db"});
  ASSERT_TRUE(reopened.ok());
  store_ = std::move(*reopened);
  auto again = Write({Batch(1, 1, 1, std::nullopt)});
  EXPECT_EQ(again[0].status, v1::ACK_STATUS_DUPLICATE);
}

TEST_F(StoreTest, JobTimelineBucketsCollectiveRecords) {
  v1::TelemetryBatch batch = Batch(1, 1, 1, std::nullopt);
  for (int i = 0; i < 4; ++i) {
    auto* r = batch.add_collectives();
    r->set_job("4711");
    r->set_rank(i % 2);
    r->set_op("AllReduce");
    r->set_seq(i);
    // The second 10 s bucket is slower, and rank 1 slowest in it.
    r->set_busbw_gbs(i < 2 ? 300 : 100 - 10 * (i % 2));
    r->set_exec_time_us(1000 * (i + 1));
    r->set_timestamp_us(i < 2 ? 1'000'000 : 11'000'000);
  }
  Write({batch});
  auto points = store_->JobTimeline("4711", 0, 10'000'000);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 2u);
  EXPECT_EQ((*points)[0].start_us(), 0);
  EXPECT_EQ((*points)[0].ranks(), 2u);
  EXPECT_DOUBLE_EQ((*points)[0].mean_busbw_gbs(), 300);
  EXPECT_DOUBLE_EQ((*points)[1].min_busbw_gbs(), 90);
  ASSERT_TRUE((*points)[1].has_slowest_rank());
  EXPECT_EQ((*points)[1].slowest_rank(), 1u);
  EXPECT_DOUBLE_EQ((*points)[1].max_exec_time_us(), 4000);
  EXPECT_TRUE(store_->JobTimeline("other", 0, 10'000'000)->empty());
}

TEST(StoreOpen, ClearErrors) {
  auto missing_dir = Store::Open({.path = "/nonexistent/dir/collector.db"});
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_NE(std::string(missing_dir.status().message()).find("/nonexistent/dir/collector.db"),
            std::string::npos);
  testing::TempDir dir;
  testing::WriteFile(dir / "not-a-db", "this is not an SQLite file, it is a text file\n");
  EXPECT_FALSE(Store::Open({.path = dir / "not-a-db"}).ok());
}

TEST_F(StoreTest, AnomaliesAreUpdatedByIdListedByTimeAndClosedAtRestart) {
  v1::Anomaly a;
  a.set_id(1);
  a.set_kind("pfc_storm");
  a.set_entity("z1-r01-h1/mlx5_0");
  a.set_start_us(1000);
  a.set_updated_us(1500);
  v1::Anomaly b = a;
  b.set_id(2);
  b.set_kind("link_flap");
  b.set_start_us(5000);
  b.set_end_us(6000);
  ASSERT_TRUE(store_->anomalies().Write(std::vector<v1::Anomaly>{a, b}).ok());
  a.set_updated_us(2500);
  a.add_evidence()->set_counter("pfc_tx_pause_us");
  ASSERT_TRUE(store_->anomalies().Write(std::vector<v1::Anomaly>{a}).ok());
  auto active = store_->anomalies().List(0, 0, true);
  ASSERT_TRUE(active.ok());
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].evidence_size(), 1) << "the update replaced the row";
  // Active some time in [7000, now]: only the open one; in [4000, 5500]: both.
  EXPECT_EQ(store_->anomalies().List(7000, 0, false)->size(), 1u);
  EXPECT_EQ(store_->anomalies().List(4000, 5500, false)->size(), 2u);
  EXPECT_EQ(store_->anomalies().List(0, 900, false)->size(), 0u) << "nothing had started by 900";
  // A restart closes what was open at its last update and returns the max id.
  auto max_id = store_->anomalies().CloseOpen(9000);
  ASSERT_TRUE(max_id.ok());
  EXPECT_EQ(*max_id, 2u);
  auto all = store_->anomalies().List(0, 0, false);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].end_us(), 2500);
}

TEST_F(StoreTest, RegistryNamesTheJobOnAHostAtATime) {
  v1::Job job;
  job.set_id("4711");
  job.set_start_us(1000);
  auto* r = job.add_ranks();
  r->set_host("z1-r01-h1");
  r->set_nic("mlx5_0");
  ASSERT_TRUE(store_->jobs().Start(job).ok());
  EXPECT_EQ(*store_->jobs().RunningOnHost("z1-r01-h1", 2000), "4711");
  EXPECT_EQ(*store_->jobs().RunningOnHost("z1-r01-h1", 500), "") << "before it started";
  EXPECT_EQ(*store_->jobs().RunningOnHost("z1-r02-h1", 2000), "");
  ASSERT_TRUE(store_->jobs().End("4711", 3000).ok());
  EXPECT_EQ(*store_->jobs().RunningOnHost("z1-r01-h1", 4000), "") << "after it ended";
  EXPECT_EQ(*store_->jobs().RunningOnHost("z1-r01-h1", 2500), "4711") << "history still answers";
}

TEST_F(StoreTest, RegistryRefusesASecondStartAndAnEndOfNoRunningJob) {
  v1::Job job;
  job.set_id("4711");
  job.set_start_us(1000);
  job.add_ranks()->set_host("z1-r01-h1");
  ASSERT_TRUE(store_->jobs().Start(job).ok());
  EXPECT_EQ(store_->jobs().Start(job).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->jobs().End("4712", 2000).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store_->jobs().End("4711", 2000).ok());
  // Started again after it ended: one job, the new ranks.
  job.set_start_us(5000);
  job.mutable_ranks(0)->set_host("z1-r02-h1");
  ASSERT_TRUE(store_->jobs().Start(job).ok());
  auto got = store_->jobs().Get("4711");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->start_us(), 5000);
  ASSERT_EQ(got->ranks_size(), 1);
  EXPECT_EQ(got->ranks(0).host(), "z1-r02-h1");
  EXPECT_EQ(store_->jobs().Get("9999").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, AuditLogNumbersRunsAndListsNewestFirst) {
  for (int i = 0; i < 3; ++i) {
    v1::PlaybookRun run;
    run.set_started_us(1000 + i);
    auto id = store_->audit().Record(run);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(*id, static_cast<uint64_t>(i + 1));
  }
  auto runs = store_->audit().List(2);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].id(), 3u);
  EXPECT_EQ((*runs)[1].started_us(), 1001);
}

TEST_F(StoreTest, AuditLogReplacesARunUnderWayAndClosesThoseAStoppedProcessLeft) {
  v1::PlaybookRun run;
  run.set_who("rocefab-collectord (automatic, alert link_flap|z1-rtsw07/Ethernet72|4737)");
  run.set_result("running");
  run.add_changes("drained link z1-rtsw07/Ethernet72");
  auto id = store_->audit().Record(run);
  ASSERT_TRUE(id.ok()) << id.status();
  run.set_id(*id);
  run.add_changes("silence 1 on z1-rtsw07/Ethernet72");
  ASSERT_TRUE(store_->audit().Update(run).ok());
  v1::PlaybookRun manual;  // a person's run, under way in their terminal
  manual.set_who("alice@ops1");
  manual.set_result("running");
  ASSERT_TRUE(store_->audit().Record(manual).ok());
  v1::PlaybookRun done = run;  // an earlier automatic run that ended
  done.set_result("succeeded");
  ASSERT_TRUE(store_->audit().Record(done).ok());

  auto closed = store_->audit().CloseInterrupted("rocefab-collectord", 9000);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(*closed, 1);
  auto runs = store_->audit().List(0);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 3u) << "replaced in place, not added";
  const v1::PlaybookRun& first = (*runs)[2];
  EXPECT_EQ(first.result(), "interrupted");
  EXPECT_EQ(first.ended_us(), 9000);
  EXPECT_EQ(first.changes_size(), 2) << "what it changed stays listed";
  EXPECT_EQ((*runs)[1].result(), "running") << "another's run is not ours to close";
  EXPECT_EQ((*runs)[0].result(), "succeeded");
  EXPECT_EQ(store_->audit().CloseInterrupted("rocefab-collectord", 9001).value_or(-1), 0) << "once";

  v1::PlaybookRun unknown;
  unknown.set_id(99);
  EXPECT_EQ(store_->audit().Update(unknown).code(), absl::StatusCode::kNotFound);
  // What has ended stays as it ended; a run under way is its recorder's.
  v1::PlaybookRun rewrite = (*runs)[0];
  rewrite.set_result("failed");
  EXPECT_EQ(store_->audit().Update(rewrite).code(), absl::StatusCode::kFailedPrecondition);
  v1::PlaybookRun taken = (*runs)[1];
  taken.set_who("rocefab-collectord (automatic, alert x)");
  taken.set_result("succeeded");
  EXPECT_EQ(store_->audit().Update(taken).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store_->audit().List(0)->at(1).result(), "running");
}

TEST(StoreOpen, AReadOnlyStoreReadsTheRecordsAndRefusesWrites) {
  testing::TempDir dir;
  {
    auto store = Store::Open({.path = dir / "db"});
    ASSERT_TRUE(store.ok()) << store.status();
    v1::Job job;
    job.set_id("7");
    ASSERT_TRUE((*store)->jobs().Start(job).ok());
  }
  auto store = Store::Open({.path = dir / "db", .read_only = true});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->jobs().List(true)->size(), 1u);
  v1::Job job;
  job.set_id("8");
  EXPECT_EQ((*store)->jobs().Start(job).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE((*store)->audit().Record(v1::PlaybookRun()).ok());
  EXPECT_FALSE((*store)->anomalies().Write(std::vector<v1::Anomaly>{v1::Anomaly()}).ok());
}

// History older than the local store: a fake TSDB holds rx_bytes of the
// minute before the local samples, and a series the local store never saw.
class FakeHistory final : public HistorySource {
 public:
  absl::StatusOr<std::vector<SampleRow>> Read(const std::string& device, int64_t from_us, int64_t to_us) override {
    ++reads;
    last_device = device;
    last_to = to_us;
    if (fail) return absl::UnavailableError("connection refused");
    std::vector<SampleRow> out;
    for (const SampleRow& r : rows)
      if (r.ts_us >= from_us && r.ts_us < to_us) out.push_back(r);
    return out;
  }
  absl::StatusOr<std::vector<v1::JobTimelinePoint>> ReadTimeline(const std::string& job, int64_t from_us,
                                                                 int64_t to_us, int64_t bucket_us) override {
    ++reads;
    last_to = to_us;
    if (fail) return absl::UnavailableError("connection refused");
    std::vector<v1::JobTimelinePoint> out;
    for (const auto& p : points)
      if (job == "4711" && p.start_us() >= from_us - from_us % bucket_us && p.start_us() < to_us) out.push_back(p);
    return out;
  }
  std::vector<SampleRow> rows;
  std::vector<v1::JobTimelinePoint> points;
  bool fail = false;
  int reads = 0;
  std::string last_device;
  int64_t last_to = 0;
};

SampleRow Older(const std::string& counter, int64_t ts_us, uint64_t value, int64_t prio = -1) {
  SampleRow r;
  r.series = SeriesInfo{v1::SCOPE_NIC, "z1-r01-h1/mlx5_0", 1, counter, prio, -1, v1::VALUE_KIND_COUNTER};
  r.ts_us = ts_us;
  r.value = value;
  return r;
}

TEST_F(StoreTest, CounterRatesSpanHistoryOlderThanTheLocalStore) {
  // Local: rx_bytes 10000 at 100 s, then +1000 each second (the agent's delta).
  for (uint64_t i = 0; i < 5; ++i)
    Write({Batch(i + 1, static_cast<int64_t>(100 + i) * 1'000'000, 10000 + 1000 * i,
                 i == 0 ? std::optional<uint64_t>(1000) : std::optional<uint64_t>(1000))});
  FakeHistory history;
  // The TSDB: 40..99 s, rx_bytes at 2000 B/s from 0 with a reset at 70 s
  // (the NIC was reset and counted from 0 again), and a counter the local
  // store never saw.
  for (int64_t t = 40; t < 100; ++t) {
    const uint64_t v = t < 70 ? static_cast<uint64_t>(t - 40) * 2000 : static_cast<uint64_t>(t - 70) * 2000;
    history.rows.push_back(Older("rx_bytes", t * 1'000'000, v));
    history.rows.push_back(Older("tx_bytes", t * 1'000'000, static_cast<uint64_t>(t) * 7));
  }
  v1::GetCountersRequest request;
  request.set_host("z1-r01-h1");
  request.set_since_us(40'000'000);
  std::vector<std::string> notes;
  auto rows = store_->GetCounters(request, &history, &notes);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(history.reads, 1);
  EXPECT_EQ(history.last_device, "z1-r01-h1");
  EXPECT_EQ(history.last_to, 100'000'000) << "history is read only up to the oldest local sample";
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("120 samples"), std::string::npos) << notes[0];
  std::map<std::string, v1::CounterRow> by_counter;
  for (const auto& r : *rows) by_counter[r.counter()] = r;
  ASSERT_TRUE(by_counter.count("rx_bytes") && by_counter.count("tx_bytes") && by_counter.count("pfc_rx_pause_frames"));
  const v1::CounterRow& rx = by_counter["rx_bytes"];
  EXPECT_EQ(rx.value(), 14000u) << "the newest value is local";
  EXPECT_EQ(rx.timestamp_us(), 104'000'000);
  // Increase over 40..104 s: 29 s x 2000 before the reset, 0 at it, 29 s x
  // 2000 after, 1000 from the last TSDB sample to the first local one, and
  // 4 x 1000 locally: 121,000 B over 64 s.
  ASSERT_TRUE(rx.has_rate());
  EXPECT_NEAR(rx.rate_per_second(), 121000.0 / 64, 1e-6);
  const v1::CounterRow& tx = by_counter["tx_bytes"];
  EXPECT_EQ(tx.value(), 99u * 7);
  EXPECT_NEAR(tx.rate_per_second(), 7.0, 1e-9) << "a series only the TSDB holds";
  // Orders as without history: by entity, port, counter.
  std::vector<std::string> order;
  for (const auto& r : *rows) order.push_back(r.counter());
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end())) << ::testing::PrintToString(order);

  // A window the local store covers does not ask the TSDB.
  request.set_since_us(101'000'000);
  ASSERT_TRUE(store_->GetCounters(request, &history, &notes).ok());
  EXPECT_EQ(history.reads, 1);

  // The TSDB down: the local rows, and a note that says so.
  history.fail = true;
  notes.clear();
  request.set_since_us(40'000'000);
  rows = store_->GetCounters(request, &history, &notes);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->size(), 2u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("history unavailable (connection refused)"), std::string::npos) << notes[0];
}

// A job's timeline older than the local store comes from the TSDB, which
// also holds the bucket the local store holds only in part.
TEST_F(StoreTest, JobTimelineTakesOlderBucketsFromHistory) {
  v1::TelemetryBatch batch = Batch(1, 1, 1, std::nullopt);
  for (int i = 0; i < 4; ++i) {
    auto* r = batch.add_collectives();
    r->set_job("4711");
    r->set_rank(i);
    r->set_op("AllReduce");
    r->set_busbw_gbs(100);
    r->set_exec_time_us(1000);
    r->set_timestamp_us(i < 2 ? 25'000'000 : 31'000'000);  // local from 25 s
  }
  Write({batch});
  FakeHistory history;
  for (int64_t start : {0, 10'000'000, 20'000'000, 30'000'000}) {
    v1::JobTimelinePoint p;
    p.set_start_us(start);
    p.set_op("AllReduce");
    p.set_records(8);
    p.set_ranks(4);
    p.set_mean_busbw_gbs(300);
    history.points.push_back(p);
  }
  std::vector<std::string> notes;
  auto points = store_->JobTimeline("4711", 0, 10'000'000, &history, &notes);
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_EQ(history.last_to, 20'000'001) << "up to the bucket the oldest local record falls in";
  ASSERT_EQ(points->size(), 4u);
  EXPECT_EQ((*points)[0].start_us(), 0);
  EXPECT_DOUBLE_EQ((*points)[2].mean_busbw_gbs(), 300) << "the TSDB's whole bucket, not the local part of it";
  EXPECT_EQ((*points)[3].start_us(), 30'000'000);
  EXPECT_DOUBLE_EQ((*points)[3].mean_busbw_gbs(), 100) << "newer buckets stay local";
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("3 timeline points"), std::string::npos) << notes[0];
  // Inside the local window: no history read.
  const int reads = history.reads;
  ASSERT_TRUE(store_->JobTimeline("4711", 26'000'000, 10'000'000, &history, &notes).ok());
  EXPECT_EQ(history.reads, reads);
  // History down: the local buckets and a note.
  history.fail = true;
  notes.clear();
  points = store_->JobTimeline("4711", 0, 10'000'000, &history, &notes);
  ASSERT_TRUE(points.ok());
  EXPECT_EQ(points->size(), 2u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("history unavailable"), std::string::npos);
}

TEST_F(StoreTest, CollectiveRecordsReadBackByCommitAndWaitForRemoteWriteBeforePruning) {
  v1::TelemetryBatch batch = Batch(1, 1'000'000, 1, std::nullopt);
  auto* r = batch.add_collectives();
  r->set_job("4711");
  r->set_op("AllGather");
  r->set_rank(3);
  r->set_timestamp_us(1'000'000);
  Write({batch});
  const uint64_t commit = store_->last_commit();
  ASSERT_GT(commit, 0u);
  auto rows = store_->ReadCollectiveCommits(commit - 1, commit);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].record.op(), "AllGather");
  EXPECT_EQ((*rows)[0].record.rank(), 3u);
  EXPECT_EQ((*rows)[0].commit, commit);
  EXPECT_TRUE(store_->ReadCollectiveCommits(commit, commit + 5)->empty());
  // Older than retention but not yet sent: kept; once sent: pruned.
  ASSERT_TRUE(store_->Prune(5'000'000, commit - 1).ok());
  EXPECT_EQ(store_->JobTimeline("4711", 0, 10'000'000)->size(), 1u);
  ASSERT_TRUE(store_->Prune(5'000'000, commit).ok());
  EXPECT_TRUE(store_->JobTimeline("4711", 0, 10'000'000)->empty());
}

// A version 2 file: collective records without commit ids. They get 0 and
// stay readable; new records carry their commit.
TEST(StoreOpen, AVersionTwoFileGainsCollectiveCommitIds) {
  testing::TempDir dir;
  v1::TelemetryBatch batch = Batch(1, 1'000'000, 1, std::nullopt);
  auto* r = batch.add_collectives();
  r->set_job("4711");
  r->set_op("AllReduce");
  r->set_timestamp_us(1'000'000);
  {
    auto store = Store::Open({.path = dir / "db"});
    ASSERT_TRUE(store.ok()) << store.status();
    const v1::TelemetryBatch* batches[] = {&batch};
    ASSERT_TRUE((*store)->WriteBatches(batches, 5).ok());
  }
  std::string out, err;
  ASSERT_EQ(testing::RunCommand({"/usr/bin/sqlite3", dir / "db",
                                 "DROP INDEX collectives_by_commit; ALTER TABLE collectives DROP COLUMN commit_id; "
                                 "UPDATE meta SET value='2' WHERE key='schema_version'"},
                                &out, &err),
            0)
      << err;
  auto store = Store::Open({.path = dir / "db"});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->JobTimeline("4711", 0, 10'000'000)->size(), 1u);
  EXPECT_TRUE((*store)->ReadCollectiveCommits(0, UINT64_MAX)->empty()) << "old records have commit 0";
  batch.set_seq(2);
  const v1::TelemetryBatch* batches[] = {&batch};
  ASSERT_TRUE((*store)->WriteBatches(batches, 5).ok());
  EXPECT_EQ((*store)->ReadCollectiveCommits(0, UINT64_MAX)->size(), 1u);
}

TEST(StoreOpen, RefusesANewerSchema) {
  testing::TempDir dir;
  {
    auto store = Store::Open({.path = dir / "db"});
    ASSERT_TRUE(store.ok());
  }
  std::string out, err;
  ASSERT_EQ(testing::RunCommand({"/usr/bin/sqlite3", dir / "db",
                                 "UPDATE meta SET value='99' WHERE key='schema_version'"},
                                &out, &err),
            0)
      << err;
  auto store = Store::Open({.path = dir / "db"});
  ASSERT_FALSE(store.ok());
  EXPECT_NE(std::string(store.status().message()).find("schema version 99"), std::string::npos);
}

}  // namespace
}  // namespace rocefab::collector
