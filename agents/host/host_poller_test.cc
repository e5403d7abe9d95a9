#include "agents/host/host_poller.h"

#include <gtest/gtest.h>

#include "common/strings.h"
#include "tests/mocks/fake_clock.h"
#include "tests/support/test_support.h"

namespace rocefab::hostd {
namespace {

const std::string kHostA = std::string(ROCEFAB_FIXTURES) + "/hosts/z1-r01-h1";

// A link source that remembers nothing and answers from a table.
class FakeLinks final : public LinkStateSource {
 public:
  absl::StatusOr<LinkState> Read(const std::string& netdev) override {
    if (netdev == "eth2") return LinkState{false, 6, true};
    return absl::NotFoundError(netdev);
  }
};

TEST(HostPoller, CombinesSysfsEthtoolAndNetlink) {
  FsRoot sysfs(kHostA + "/sys");
  TextEthtoolSource ethtool(kHostA + "/ethtool");
  FakeLinks links;
  testing::FakeClock clock;
  HostPoller poller("z1-r01-h1", {&sysfs, &ethtool, &links}, clock);
  HostSnapshot snapshot = poller.Poll();
  ASSERT_EQ(snapshot.nics.size(), 2u);
  EXPECT_EQ(snapshot.timestamp_us, clock.NowUs());
  const NicReading& nic0 = snapshot.nics[0];
  EXPECT_EQ(nic0.per_prio.at("pfc_rx_pause_frames").at(3), 42u);
  // Netlink carrier overrides sysfs phys_state.
  EXPECT_EQ(nic0.link_up, false);
  EXPECT_EQ(nic0.counters.at("carrier_changes"), 6u);
  // eth3 is unknown to the fake netlink: sysfs state stands.
  EXPECT_EQ(snapshot.nics[1].link_up, true);
}

// One statistic of an `ethtool -S` text file: read, and replaced (by
// rename, as the lab writes them).
uint64_t EthtoolStat(const std::string& file, const std::string& name) {
  const std::string stats = testing::ReadFile(file);
  const size_t at = stats.find(name + ": ");
  EXPECT_NE(at, std::string::npos) << name;
  return at == std::string::npos ? 0 : std::stoull(stats.substr(at + name.size() + 2));
}
void SetEthtoolStat(const std::string& file, const std::string& name, uint64_t value) {
  std::string stats = testing::ReadFile(file);
  const size_t at = stats.find(name + ": ");
  ASSERT_NE(at, std::string::npos) << name;
  stats.replace(at, stats.find('\n', at) - at, StrCat(name, ": ", value));
  ASSERT_TRUE(WriteFileAtomic(file, stats).ok());
}

// What a source could not give is counted under that source, and the
// snapshot's health is their sum.
TEST(HostPoller, CountsProblemsBySource) {
  testing::TempDir empty;
  FsRoot sysfs(kHostA + "/sys");
  TextEthtoolSource ethtool(empty.path());  // no statistics for any netdev
  testing::FakeClock clock;
  HostPoller poller("z1-r01-h1", {&sysfs, &ethtool, nullptr}, clock);
  HostSnapshot snapshot = poller.Poll();
  ASSERT_EQ(snapshot.nics.size(), 2u);
  EXPECT_EQ(snapshot.by_source.at("ethtool").source_errors, 2u) << "one failed read per port";
  EXPECT_EQ(snapshot.by_source.at("netlink").source_errors, 0u);
  uint64_t skipped = 0, parse = 0, failed = 0;
  for (const auto& [source, h] : snapshot.by_source) {
    skipped += h.skipped_values;
    parse += h.parse_errors;
    failed += h.source_errors;
  }
  EXPECT_EQ(snapshot.health.skipped_values, skipped);
  EXPECT_EQ(snapshot.health.parse_errors, parse);
  EXPECT_EQ(snapshot.health.source_errors, failed);
}

// The lab and fixtures replace files by rename; the real sysfs changes them
// in place. The poller keeps its files open between polls and sees both.
TEST(HostPoller, SeesFilesChangedInPlaceAndFilesReplacedByRename) {
  testing::TempDir dir;
  testing::CopyTree(kHostA, dir.path());
  FsRoot sysfs(dir / "sys");
  TextEthtoolSource ethtool(dir / "ethtool");
  testing::FakeClock clock;
  HostPoller poller("z1-r01-h1", {&sysfs, &ethtool, nullptr}, clock);
  HostSnapshot first = poller.Poll();
  ASSERT_EQ(first.nics.size(), 2u);
  EXPECT_EQ(first.nics[0].counters.at("cnp_sent"), 555u);
  EXPECT_EQ(first.nics[0].per_prio.at("pfc_rx_pause_frames").at(3), 42u);
  const std::string port = dir / "sys/class/infiniband/mlx5_0/ports/1";
  for (uint64_t round = 1; round <= 3; ++round) {
    testing::WriteFile(port + "/hw_counters/np_cnp_sent", StrCat(555 + round, "\n"));
    ASSERT_TRUE(WriteFileAtomic(port + "/counters/port_xmit_data", StrCat(1000 * round, "\n")).ok());
    SetEthtoolStat(dir / "ethtool/eth2/statistics", "rx_prio3_pause", 42 + round);
    clock.Advance(1'000'000);
    HostSnapshot next = poller.Poll();
    ASSERT_EQ(next.nics.size(), 2u);
    EXPECT_EQ(next.nics[0].counters.at("cnp_sent"), 555 + round);
    EXPECT_EQ(next.nics[0].counters.at("tx_bytes"), 4000 * round) << "port_xmit_data counts 4-byte words";
    EXPECT_EQ(next.nics[0].per_prio.at("pfc_rx_pause_frames").at(3), 42 + round);
  }
}

// The fast path reads only the pause counters of the ports the full poll
// found, and a batch carries a port only when one of them moved; the deltas
// chain with the full poll's.
TEST(HostPoller, TheFastPathSendsOnlyThePauseCountersOfPortsWhereOneMoved) {
  testing::TempDir dir;
  testing::CopyTree(kHostA, dir.path());
  FsRoot sysfs(dir / "sys");
  TextEthtoolSource ethtool(dir / "ethtool");
  testing::FakeClock clock;
  HostPoller poller("z1-r01-h1", {&sysfs, &ethtool, nullptr}, clock);
  EXPECT_TRUE(poller.PollPfc().nics.empty()) << "no ports known before the first full poll";
  BatchBuilder builder;
  v1::TelemetryBatch full = builder.NewBatch(clock.NowUs());
  AppendSnapshot(poller.Poll(), &builder, &full);
  ASSERT_EQ(full.entities_size(), 2);

  clock.Advance(100'000);
  v1::TelemetryBatch quiet = builder.NewBatch(clock.NowUs());
  HostSnapshot unmoved = poller.PollPfc();
  ASSERT_EQ(unmoved.nics.size(), 2u);
  for (const NicReading& nic : unmoved.nics) {
    EXPECT_TRUE(nic.counters.count("tx_bytes") == 0 && nic.counters.count("cnp_sent") == 0);
    EXPECT_EQ(nic.per_prio.at("pfc_tx_pause_us").count(3), 1u);
  }
  AppendSnapshot(unmoved, &builder, &quiet, /*fast=*/true);
  EXPECT_EQ(quiet.entities_size(), 0) << "nothing moved: nothing to send";

  const std::string eth2 = dir / "ethtool/eth2/statistics";
  SetEthtoolStat(eth2, "tx_prio3_pause_duration", EthtoolStat(eth2, "tx_prio3_pause_duration") + 99'000);
  clock.Advance(100'000);
  v1::TelemetryBatch moved = builder.NewBatch(clock.NowUs());
  AppendSnapshot(poller.PollPfc(), &builder, &moved, /*fast=*/true);
  ASSERT_EQ(moved.entities_size(), 1) << "only the port whose pause counter moved";
  const v1::EntitySamples& nic = moved.entities(0);
  EXPECT_TRUE(nic.fast());
  EXPECT_EQ(nic.entity(), "z1-r01-h1/mlx5_0");
  bool seen = false;
  for (const v1::Sample& sample : nic.samples()) {
    EXPECT_TRUE(IsFastPathCounter(sample.counter())) << sample.counter();
    if (sample.counter() == "pfc_tx_pause_us" && sample.prio() == 3) {
      seen = true;
      EXPECT_EQ(sample.delta(), 99'000u) << "the increase since the full poll";
    }
  }
  EXPECT_TRUE(seen);
  EXPECT_EQ(moved.health().source_errors(), 0u) << "the full poll reports the sources' health";
}

TEST(SnapshotToJson, HasTheDocumentedShape) {
  FsRoot sysfs(kHostA + "/sys");
  TextEthtoolSource ethtool(kHostA + "/ethtool");
  testing::FakeClock clock;
  HostPoller poller("z1-r01-h1", {&sysfs, &ethtool, nullptr}, clock);
  nlohmann::json json = SnapshotToJson(poller.Poll());
  EXPECT_EQ(json["host"], "z1-r01-h1");
  ASSERT_EQ(json["nics"].size(), 2u);
  EXPECT_EQ(json["nics"][0]["device"], "mlx5_0");
  EXPECT_EQ(json["nics"][0]["port"], 1);
  EXPECT_EQ(json["nics"][0]["netdev"], "eth2");
  EXPECT_EQ(json["nics"][0]["counters"]["rx_bytes"], 1'000'000'000);
  EXPECT_EQ(json["nics"][0]["counters"]["pfc_rx_pause_frames"]["3"], 42);
  EXPECT_EQ(json["health"]["skipped_values"], 2);
  EXPECT_FALSE(json["nics"][1]["counters"].contains("symbol_errors"));
}

TEST(AppendSnapshot, WrapOfAQCounterBetweenPollsIsADelta) {
  testing::TempDir dir;
  testing::CopyTree(kHostA + "/sys", dir / "sys");
  FsRoot sysfs(dir / "sys");
  testing::FakeClock clock;
  HostPoller poller("h", {&sysfs, nullptr, nullptr}, clock);
  BatchBuilder builder;
  v1::TelemetryBatch first = builder.NewBatch(clock.NowUs());
  AppendSnapshot(poller.Poll(), &builder, &first);
  EXPECT_EQ(first.health().skipped_values(), 2u);
  testing::WriteFile(dir / "sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_sequence",
                     "5\n");
  testing::WriteFile(dir / "sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data",
                     "250001000\n");
  clock.Advance(1'000'000);
  v1::TelemetryBatch second = builder.NewBatch(clock.NowUs());
  AppendSnapshot(poller.Poll(), &builder, &second);
  ASSERT_GE(second.entities_size(), 1);
  const v1::EntitySamples& nic0 = second.entities(0);
  EXPECT_EQ(nic0.entity(), "h/mlx5_0");
  bool saw_ooo = false, saw_rx = false;
  for (const auto& sample : nic0.samples()) {
    if (sample.counter() == "out_of_sequence") {
      saw_ooo = true;
      EXPECT_EQ(sample.delta(), 11u);
      EXPECT_FALSE(sample.reset());
    }
    if (sample.counter() == "rx_bytes") {
      saw_rx = true;
      EXPECT_EQ(sample.delta(), 4000u);
    }
  }
  EXPECT_TRUE(saw_ooo);
  EXPECT_TRUE(saw_rx);
}

TEST(ReadHostBootId, FromProc) {
  FsRoot proc(kHostA + "/proc");
  EXPECT_EQ(ReadHostBootId(proc), "5b0c7a3e-2d8f-4f1e-9a51-0d3c6f1a2b44");
  testing::TempDir empty;
  EXPECT_EQ(ReadHostBootId(FsRoot(empty.path())), "");
}

}  // namespace
}  // namespace rocefab::hostd
