#include "agents/host/ethtool_stats.h"

#include <gtest/gtest.h>

#include "tests/support/fake_ethtool_driver.h"
#include "tests/support/test_support.h"

namespace rocefab::hostd {
namespace {

TEST(ParseEthtoolText, RealOutputShape) {
  uint64_t bad = 0;
  EthtoolStats stats = ParseEthtoolText(
      "NIC statistics:\n"
      "     rx_packets: 10\n"
      "     tx_prio3_pause: 7\n"
      "     tx_pause_storm_warning_events : 4\n"
      "     broken line\n"
      "     rx_bytes: twelve\n"
      "     : 5\n"
      "     last_no_newline: 9",
      &bad);
  ASSERT_EQ(stats.size(), 4u);
  EXPECT_EQ(stats[0], (std::pair<std::string, uint64_t>{"rx_packets", 10}));
  EXPECT_EQ(stats[1], (std::pair<std::string, uint64_t>{"tx_prio3_pause", 7}));
  // The trailing space of one kernel's name is trimmed.
  EXPECT_EQ(stats[2].first, "tx_pause_storm_warning_events");
  EXPECT_EQ(stats[3], (std::pair<std::string, uint64_t>{"last_no_newline", 9}));
  EXPECT_EQ(bad, 3u);
}

TEST(ParseEthtoolText, CrLfAndEmpty) {
  uint64_t bad = 0;
  EXPECT_TRUE(ParseEthtoolText("", &bad).empty());
  EthtoolStats stats = ParseEthtoolText("NIC statistics:\r\n  a: 1\r\n", &bad);
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].second, 1u);
  EXPECT_EQ(bad, 0u);
}

TEST(MapEthtoolStats, PfcPerPriorityAndPhyCounters) {
  NicReading nic;
  MapEthtoolStats({{"rx_prio3_pause", 42},
                   {"tx_prio3_pause", 17},
                   {"rx_prio3_pause_duration", 210},
                   {"tx_prio0_pause_duration", 5},
                   {"tx_pause_storm_warning_events ", 4},
                   {"tx_pause_storm_error_events", 1},
                   {"rx_discards_phy", 3},
                   {"rx_buffer_passed_thres_phy", 11},
                   {"link_down_events_phy", 2},
                   {"rx_prio3_pause_transition", 99},  // not in the vocabulary
                   {"rx_prio8_pause", 1}},              // no such priority
                  &nic);
  EXPECT_EQ(nic.per_prio.at("pfc_rx_pause_frames").at(3), 42u);
  EXPECT_EQ(nic.per_prio.at("pfc_tx_pause_frames").at(3), 17u);
  EXPECT_EQ(nic.per_prio.at("pfc_rx_pause_us").at(3), 210u);
  EXPECT_EQ(nic.per_prio.at("pfc_tx_pause_us").at(0), 5u);
  EXPECT_EQ(nic.per_prio.at("pfc_rx_pause_frames").size(), 1u);
  EXPECT_EQ(nic.counters.at("pause_storm_warnings"), 4u);
  EXPECT_EQ(nic.counters.at("pause_storm_errors"), 1u);
  EXPECT_EQ(nic.counters.at("rx_discards_phy"), 3u);
  EXPECT_EQ(nic.counters.at("rx_buffer_passed_thres"), 11u);
  EXPECT_EQ(nic.counters.at("link_down_events"), 2u);
  EXPECT_EQ(nic.counters.size(), 5u);
}

TEST(TextEthtoolSource, ReadsFixtureAndReportsMissing) {
  TextEthtoolSource source(std::string(ROCEFAB_FIXTURES) + "/hosts/z1-r01-h1/ethtool");
  auto stats = source.Read("eth2");
  ASSERT_TRUE(stats.ok()) << stats.status();
  NicReading nic;
  MapEthtoolStats(*stats, &nic);
  EXPECT_EQ(nic.per_prio.at("pfc_rx_pause_frames").at(3), 42u);
  EXPECT_EQ(nic.per_prio.at("pfc_rx_pause_frames").size(), 8u);
  EXPECT_TRUE(absl::IsNotFound(source.Read("eth99").status()));
}

TEST(IoctlEthtoolSource, UnknownDeviceIsNotFound) {
  IoctlEthtoolSource source;
  EXPECT_TRUE(absl::IsNotFound(source.Read("rfnodev0").status()));
  EXPECT_FALSE(source.Read("").ok());
  EXPECT_FALSE(source.Read("a-name-far-too-long-for-ifnamsiz").ok());
}

TEST(IoctlEthtoolSource, LoopbackHasNoStatistics) {
  IoctlEthtoolSource source;
  auto stats = source.Read("lo");
  // lo implements no statistics set: an empty answer or "not supported".
  if (stats.ok()) EXPECT_TRUE(stats->empty());
}


std::string Dump(const NicReading& nic) {
  std::string out;
  for (const auto& [name, value] : nic.counters) out += std::string(name) + "=" + std::to_string(value) + " ";
  for (const auto& [name, by_prio] : nic.per_prio)
    for (const auto& [prio, value] : by_prio)
      out += std::string(name) + "[" + std::to_string(prio) + "]=" + std::to_string(value) + " ";
  return out;
}

NicReading ReadInto(IoctlEthtoolSource& source, int64_t now_us) {
  source.BeginPoll(now_us);
  NicReading nic;
  auto status = source.ReadInto("eth2", &nic);
  EXPECT_TRUE(status.ok()) << status;
  return nic;
}

TEST(IoctlEthtoolSource, ReadIntoMapsWhatReadAndMapGive) {
  testing::FakeEthtoolDriver driver;
  testing::Mlx5LikeStatistics(&driver, 4);
  IoctlEthtoolSource source(std::ref(driver));
  auto stats = source.Read("eth2");
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->size(), driver.names.size());
  NicReading mapped;
  MapEthtoolStats(*stats, &mapped);
  const NicReading read_into = ReadInto(source, 1'000'000);
  EXPECT_EQ(Dump(read_into), Dump(mapped));
  EXPECT_EQ(read_into.per_prio.at("pfc_rx_pause_frames").at(3), 42u);
  EXPECT_EQ(read_into.per_prio.at("pfc_rx_pause_frames").size(), 8u);
  EXPECT_EQ(read_into.counters.at("pause_storm_warnings"), 4u);
}

TEST(IoctlEthtoolSource, NamesAreReadOnceWhileTheSetKeepsItsSize) {
  testing::FakeEthtoolDriver driver;
  testing::Mlx5LikeStatistics(&driver, 4);
  IoctlEthtoolSource source(std::ref(driver));
  int64_t now = 1'000'000;
  for (int poll = 0; poll < 5; ++poll, now += 100'000) {
    driver.Value("rx_prio3_pause") = 42 + poll;
    EXPECT_EQ(ReadInto(source, now).per_prio.at("pfc_rx_pause_frames").at(3), 42u + poll);
  }
  EXPECT_EQ(source.name_reads(), 1u);
  EXPECT_EQ(driver.name_calls, 1);

  // More channels: the PFC statistics move further down the set.
  driver = testing::FakeEthtoolDriver{};
  testing::Mlx5LikeStatistics(&driver, 16);
  driver.Value("rx_prio3_pause") = 99;
  EXPECT_EQ(ReadInto(source, now).per_prio.at("pfc_rx_pause_frames").at(3), 99u);
  EXPECT_EQ(source.name_reads(), 2u);

  // Renamed in place, the size unchanged: read again within 30 s.
  std::swap(driver.names[0], driver.names[1]);
  now += 29'000'000;
  EXPECT_EQ(ReadInto(source, now).per_prio.at("pfc_rx_pause_frames").at(3), 99u);
  EXPECT_EQ(source.name_reads(), 2u);
  now += 1'000'000;
  ReadInto(source, now);
  EXPECT_EQ(source.name_reads(), 3u);
}

TEST(IoctlEthtoolSource, ASetThatChangesBetweenCountAndValuesIsReadAgain) {
  testing::FakeEthtoolDriver driver;
  testing::Mlx5LikeStatistics(&driver, 8);
  IoctlEthtoolSource source(std::ref(driver));
  ReadInto(source, 1'000'000);
  // Channels go from 8 to 2 between GSSET_INFO and GSTATS: the values no
  // longer sit where the names said.
  driver.before_next_stats = [](testing::FakeEthtoolDriver& d) {
    d = testing::FakeEthtoolDriver{};
    testing::Mlx5LikeStatistics(&d, 2);
    d.Value("rx_prio3_pause") = 7;
  };
  const NicReading nic = ReadInto(source, 1'100'000);
  EXPECT_EQ(nic.per_prio.at("pfc_rx_pause_frames").at(3), 7u);
  EXPECT_EQ(nic.counters.at("rx_discards_phy"), 3u);
}

TEST(IoctlEthtoolSource, AVanishedDeviceIsNotFoundAndComesBack) {
  testing::FakeEthtoolDriver driver;
  testing::Mlx5LikeStatistics(&driver, 2);
  IoctlEthtoolSource source(std::ref(driver));
  ReadInto(source, 1'000'000);
  driver.present = false;
  NicReading nic;
  source.BeginPoll(1'100'000);
  EXPECT_TRUE(absl::IsNotFound(source.ReadInto("eth2", &nic)));
  EXPECT_TRUE(nic.counters.empty());
  driver.present = true;
  EXPECT_EQ(ReadInto(source, 1'200'000).counters.at("link_down_events"), 2u);
  EXPECT_EQ(source.name_reads(), 2u) << "a device that came back is read afresh";
}

TEST(TextEthtoolSource, ReadIntoMapsWhatReadAndMapGive) {
  TextEthtoolSource source(std::string(ROCEFAB_FIXTURES) + "/hosts/z1-r01-h1/ethtool");
  auto stats = source.Read("eth2");
  ASSERT_TRUE(stats.ok()) << stats.status();
  NicReading mapped, read_into;
  MapEthtoolStats(*stats, &mapped);
  ASSERT_TRUE(source.ReadInto("eth2", &read_into).ok());
  EXPECT_FALSE(read_into.per_prio.empty());
  EXPECT_EQ(Dump(read_into), Dump(mapped));
  EXPECT_TRUE(absl::IsNotFound(source.ReadInto("eth99", &read_into)));
}

}  // namespace
}  // namespace rocefab::hostd
