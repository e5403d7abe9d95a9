// The agents' disk spool on a real directory: what an earlier incarnation
// left is found again, acked batches go, the byte bound evicts the oldest,
// and torn or foreign files are removed and counted, never replayed.
#include "common/batch_spool.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/clock.h"
#include "common/telemetry_shipper.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

v1::TelemetryBatch Batch(const std::string& boot, uint64_t seq, size_t payload = 10) {
  v1::TelemetryBatch b;
  b.set_agent_id("z1-r01-h1");
  b.set_agent_boot_id(boot);
  b.set_seq(seq);
  b.set_host_boot_id(std::string(payload, 'x'));
  return b;
}

TEST(BatchSpool, AnEarlierRunsBatchesAreFoundAndAckedOnesAreGone) {
  testing::TempDir dir;
  {
    auto spool = BatchSpool::Open(dir / "spool", 1 << 20);
    ASSERT_TRUE(spool.ok()) << spool.status();
    for (uint64_t seq = 1; seq <= 5; ++seq) EXPECT_TRUE((*spool)->Put(Batch("boot-a", seq)).empty());
    (*spool)->Remove("boot-a", 2);
    EXPECT_EQ((*spool)->files(), 4u);
  }
  auto spool = BatchSpool::Open(dir / "spool", 1 << 20);
  ASSERT_TRUE(spool.ok());
  auto earlier = (*spool)->Load("boot-b");
  ASSERT_EQ(earlier.size(), 1u);
  const auto& queue = earlier["boot-a"];
  ASSERT_EQ(queue.size(), 4u);
  EXPECT_EQ(queue.begin()->first, 1u);
  EXPECT_FALSE(queue.count(2));
  EXPECT_EQ(queue.at(5).agent_boot_id(), "boot-a");
  // Delivered one by one, the earlier run's directory goes with its last file.
  for (uint64_t seq : {1, 3, 4, 5}) (*spool)->Remove("boot-a", seq);
  EXPECT_FALSE(std::filesystem::exists(dir / "spool/boot-a"));
  EXPECT_EQ((*spool)->bytes(), 0u);
}

TEST(BatchSpool, TheByteBoundEvictsTheOldestFirst) {
  testing::TempDir dir;
  auto spool = BatchSpool::Open(dir / "spool", 1000);
  ASSERT_TRUE(spool.ok());
  std::vector<std::pair<std::string, uint64_t>> evicted;
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    auto out = (*spool)->Put(Batch("b", seq, 200));
    evicted.insert(evicted.end(), out.begin(), out.end());
  }
  EXPECT_LE((*spool)->bytes(), 1000u);
  ASSERT_FALSE(evicted.empty());
  EXPECT_EQ(evicted.front(), std::make_pair(std::string("b"), uint64_t{1}));
  EXPECT_EQ((*spool)->evicted(), evicted.size());
  EXPECT_FALSE(std::filesystem::exists(dir / "spool/b/1.pb"));
  EXPECT_TRUE(std::filesystem::exists(dir / "spool/b/10.pb"));
}

TEST(BatchSpool, TornAndForeignFilesAreRemovedAndCounted) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "spool/boot-a");
  testing::WriteFile(dir / "spool/boot-a/1.pb", "\xff\xff\xff garbage");
  testing::WriteFile(dir / "spool/boot-a/2.pb.tmp", "half a batch");
  testing::WriteFile(dir / "spool/boot-a/3.pb", Batch("other-boot", 3).SerializeAsString());
  testing::WriteFile(dir / "spool/boot-a/4.pb", Batch("boot-a", 4).SerializeAsString());
  std::filesystem::create_directories(dir / "spool/not a boot");
  auto spool = BatchSpool::Open(dir / "spool", 1 << 20);
  ASSERT_TRUE(spool.ok());
  auto earlier = (*spool)->Load("boot-b");
  ASSERT_EQ(earlier["boot-a"].size(), 1u);
  EXPECT_TRUE(earlier["boot-a"].count(4));
  EXPECT_EQ((*spool)->corrupt(), 3u);
  EXPECT_FALSE(std::filesystem::exists(dir / "spool/boot-a/1.pb"));
}

TEST(BatchSpool, AnUnusableDirectoryIsAClearError) {
  testing::TempDir dir;
  testing::WriteFile(dir / "file", "x");
  auto spool = BatchSpool::Open(dir / "file", 1 << 20);
  ASSERT_FALSE(spool.ok());
  EXPECT_NE(spool.status().message().find("spool directory"), std::string::npos);
}

TEST(TelemetryShipper, ARestartedAgentHasItsPredecessorsUnackedBatches) {
  testing::TempDir dir;
  TelemetryShipper::Options options;
  options.target = "127.0.0.1:1";  // nothing listens on port 1
  options.agent_id = "z1-r01-h1";
  options.spool_dir = dir / "spool";
  options.spool_after_us = 0;  // every unacked batch to disk at once
  options.initial_backoff_us = 1000;
  options.max_backoff_us = 2000;
  std::string first_boot;
  {
    TelemetryShipper shipper(options, SystemClock::Instance());
    ASSERT_TRUE(shipper.Start().ok());
    first_boot = shipper.agent_boot_id();
    for (int i = 0; i < 7; ++i) shipper.Enqueue(v1::TelemetryBatch{});
    EXPECT_EQ(shipper.stats().spool_bytes > 0, true);
    shipper.Stop();
  }
  TelemetryShipper restarted(options, SystemClock::Instance());
  ASSERT_TRUE(restarted.Start().ok());
  EXPECT_NE(restarted.agent_boot_id(), first_boot);
  restarted.Enqueue(v1::TelemetryBatch{});
  const auto stats = restarted.stats();
  EXPECT_EQ(stats.replay_pending, 7u);
  EXPECT_EQ(stats.pending, 1u);
  restarted.Stop();
}

TEST(TelemetryShipper, BatchesGoToDiskOnlyOnceTheyWaitOrTheAgentStops) {
  testing::TempDir dir;
  TelemetryShipper::Options options;
  options.target = "127.0.0.1:1";  // nothing listens on port 1
  options.agent_id = "z1-r01-h1";
  options.spool_dir = dir / "spool";
  options.spool_after_us = 3600LL * 1'000'000;  // an hour: nothing waits that long here
  options.initial_backoff_us = 1000;
  options.max_backoff_us = 2000;
  {
    TelemetryShipper shipper(options, SystemClock::Instance());
    ASSERT_TRUE(shipper.Start().ok());
    for (int i = 0; i < 3; ++i) shipper.Enqueue(v1::TelemetryBatch{});
    EXPECT_EQ(shipper.stats().spool_bytes, 0u) << "a young unacked batch stays in memory";
    shipper.Stop();
    EXPECT_GT(shipper.stats().spool_bytes, 0u) << "stopping writes the unacked batches";
  }
  TelemetryShipper restarted(options, SystemClock::Instance());
  ASSERT_TRUE(restarted.Start().ok());
  EXPECT_EQ(restarted.stats().replay_pending, 3u);
  restarted.Stop();
}

}  // namespace
}  // namespace rocefab
