// The store module (Ingester) wired to the observe module through their real
// queue: collective records without a job get the registry's job, acked
// batches are in the store, stored batches reach the observer, and detector
// anomalies reach the store.
#include "collector/ingester.h"

#include <gtest/gtest.h>

#include <future>

#include "tests/support/test_support.h"

namespace rocefab::collector {
namespace {

class IngesterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open({.path = dir_ / "collector.db"});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    ingester_ = std::make_unique<Ingester>(Ingester::Options{}, *store_, &stored_, metrics_,
                                           SystemClock::Instance());
    observer_ = std::make_unique<Observer>(stored_, latest_, &detectors_,
                                           [] { return FabricContext{}; }, nullptr, *store_,
                                           metrics_, SystemClock::Instance());
    observer_->Start();
    ingester_->Start();
  }
  void TearDown() override {
    ingester_->Stop();
    observer_->Stop();
  }
  // Submits and waits for the ack (the ingester's callback after commit).
  v1::AckStatus Submit(v1::TelemetryBatch batch) {
    std::promise<v1::AckStatus> acked;
    ingester_->Submit(std::move(batch), [&](bool ok, v1::AckStatus status) {
      acked.set_value(ok ? status : v1::ACK_STATUS_UNSPECIFIED);
    });
    return acked.get_future().get();
  }

  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  LatestValues latest_;
  prometheus::Registry registry_;
  CollectorMetrics metrics_{registry_};
  Detectors detectors_{DetectorSettings{}};
  Queue<StoredBatch> stored_;
  std::unique_ptr<Ingester> ingester_;
  std::unique_ptr<Observer> observer_;
};

TEST_F(IngesterTest, RecordsWithoutAJobTakeTheRegistrysJobOnTheirHost) {
  const int64_t now = SystemClock::Instance().NowUs();
  v1::Job job;
  job.set_id("4711");
  job.set_start_us(now - 60'000'000);
  auto* r = job.add_ranks();
  r->set_host("z1-r01-h1");
  r->set_nic("mlx5_0");
  ASSERT_TRUE(store_->jobs().Start(job).ok());
  v1::TelemetryBatch batch;
  batch.set_agent_id("z1-r01-h1");
  batch.set_agent_boot_id("b");
  batch.set_seq(1);
  auto* rec = batch.add_collectives();  // a dump directory without a job id
  rec->set_rank(0);
  rec->set_op("AllReduce");
  rec->set_seq(7);
  rec->set_busbw_gbs(144);
  rec->set_timestamp_us(now);
  auto* other = batch.add_collectives();  // before the job started: no job
  *other = *rec;
  other->set_timestamp_us(now - 120'000'000);
  ASSERT_EQ(Submit(batch), v1::ACK_STATUS_STORED);
  auto timeline = store_->JobTimeline("4711", 0, 1'000'000);
  ASSERT_TRUE(timeline.ok());
  ASSERT_EQ(timeline->size(), 1u);
  EXPECT_EQ((*timeline)[0].records(), 1u);
  EXPECT_EQ(store_->JobTimeline("", 0, 1'000'000)->size(), 1u) << "the early record keeps no job";
}

TEST_F(IngesterTest, DetectorAnomaliesAreStored) {
  const int64_t now = SystemClock::Instance().NowUs();
  for (int i = 0; i < 3; ++i) {
    v1::TelemetryBatch batch;
    batch.set_agent_id("z1-r01-h1");
    batch.set_agent_boot_id("b");
    batch.set_seq(static_cast<uint64_t>(i + 1));
    auto* e = batch.add_entities();
    e->set_scope(v1::SCOPE_NIC);
    e->set_entity("z1-r01-h1/mlx5_0");
    e->set_timestamp_us(now - (2 - i) * 1'000'000);
    auto* s = e->add_samples();
    s->set_counter("pfc_tx_pause_us");
    s->set_prio(3);
    s->set_kind(v1::VALUE_KIND_COUNTER);
    s->set_value(static_cast<uint64_t>(i) * 900'000);
    if (i > 0) s->set_delta(900'000);
    ASSERT_EQ(Submit(batch), v1::ACK_STATUS_STORED);
  }
  // Every acked sample is in the store at once.
  auto stored = store_->ReadSamples("z1-r01-h1/mlx5_0", "pfc_tx_pause_us", 0, INT64_MAX);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 3u);
  EXPECT_EQ((*stored)[2].value, 1'800'000u);
  // Evaluation follows on the observer's thread.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        auto open = store_->anomalies().List(0, 0, true);
        return open.ok() && open->size() == 1 && (*open)[0].kind() == "pfc_storm";
      },
      std::chrono::seconds(5)));
  EXPECT_GT(latest_.size(), 0u) << "the observer kept the latest values";
}

TEST_F(IngesterTest, StoppingClosesTheObserversQueueAfterTheLastBatch) {
  v1::TelemetryBatch batch;
  batch.set_agent_id("z1-r01-h1");
  batch.set_agent_boot_id("b");
  batch.set_seq(1);
  auto* e = batch.add_entities();
  e->set_scope(v1::SCOPE_NIC);
  e->set_entity("z1-r01-h1/mlx5_0");
  e->set_timestamp_us(SystemClock::Instance().NowUs());
  auto* s = e->add_samples();
  s->set_counter("rx_bytes");
  s->set_kind(v1::VALUE_KIND_COUNTER);
  s->set_value(5);
  ASSERT_EQ(Submit(batch), v1::ACK_STATUS_STORED);
  ingester_->Stop();
  observer_->Stop();  // returns only because the queue was closed and drained
  EXPECT_EQ(stored_.size(), 0u);
  EXPECT_EQ(latest_.size(), 1u);
}

}  // namespace
}  // namespace rocefab::collector
