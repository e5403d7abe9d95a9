#include "agents/host/rdma_sysfs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "tests/support/test_support.h"

namespace rocefab::hostd {
namespace {

const std::string kSysfsHost = std::string(ROCEFAB_FIXTURES) + "/hosts/z1-r01-h1";
const std::string kHostB = std::string(ROCEFAB_FIXTURES) + "/hosts/z1-r01-h2";

TEST(ParseSysfsCounter, Values) {
  uint64_t v = 0;
  EXPECT_EQ(ParseSysfsCounter("12345\n", &v), ValueParse::kOk);
  EXPECT_EQ(v, 12345u);
  EXPECT_EQ(ParseSysfsCounter("18446744073709551615", &v), ValueParse::kOk);
  EXPECT_EQ(v, 18446744073709551615ULL);
  EXPECT_EQ(ParseSysfsCounter("N/A (no PMA)\n", &v), ValueParse::kNotAvailable);
  for (const char* bad : {"", "\n", "-5", "12abc", "0x10", "1 2", "18446744073709551616", "garbage!"})
    EXPECT_EQ(ParseSysfsCounter(bad, &v), ValueParse::kGarbage) << bad;
}

TEST(ParseRate, KernelFormats) {
  uint64_t bps = 0;
  ASSERT_TRUE(ParseRate("400 Gb/sec (4X NDR)\n", &bps));
  EXPECT_EQ(bps, 50'000'000'000u);
  ASSERT_TRUE(ParseRate("2.5 Gb/sec (1X SDR)", &bps));
  EXPECT_EQ(bps, 312'500'000u);
  ASSERT_TRUE(ParseRate("100 Gb/sec (4X EDR)", &bps));
  EXPECT_EQ(bps, 12'500'000'000u);
  for (const char* bad : {"", "fast", "400 Mb/sec", "x Gb/sec", "-1 Gb/sec (1X)"})
    EXPECT_FALSE(ParseRate(bad, &bps)) << bad;
}

TEST(ParseStateNumber, KernelFormats) {
  int n = 0;
  ASSERT_TRUE(ParseStateNumber("4: ACTIVE\n", &n));
  EXPECT_EQ(n, 4);
  ASSERT_TRUE(ParseStateNumber("5: LinkUp", &n));
  EXPECT_EQ(n, 5);
  for (const char* bad : {"", "ACTIVE", ": x", "x: ACTIVE"}) EXPECT_FALSE(ParseStateNumber(bad, &n));
}

TEST(RdmaSysfsReader, ReadsMlx5FixtureHost) {
  FsRoot sysfs(kSysfsHost + "/sys");
  ReadHealth health;
  auto nics = RdmaSysfsReader(sysfs).ReadAll(&health);
  ASSERT_EQ(nics.size(), 2u);
  const NicReading& nic0 = nics[0];
  EXPECT_EQ(nic0.device, "mlx5_0");
  EXPECT_EQ(nic0.port, 1u);
  EXPECT_EQ(nic0.netdev, "eth2");
  // port_rcv_data counts 4-octet words.
  EXPECT_EQ(nic0.counters.at("rx_bytes"), 1'000'000'000u);
  EXPECT_EQ(nic0.counters.at("tx_bytes"), 500'000'000u);
  EXPECT_EQ(nic0.counters.at("out_of_sequence"), 4294967290u);
  EXPECT_EQ(nic0.counters.at("ecn_marked_packets"), 777u);
  EXPECT_EQ(nic0.counters.at("cnp_sent"), 555u);
  EXPECT_EQ(nic0.counters.at("cnp_handled"), 444u);
  EXPECT_EQ(nic0.counters.at("link_downed"), 1u);
  EXPECT_EQ(nic0.rate_bytes_per_second, 50'000'000'000u);
  EXPECT_EQ(nic0.link_up, true);

  const NicReading& nic1 = nics[1];
  EXPECT_EQ(nic1.netdev, "eth3");
  // N/A, garbage and a missing file are left out, never reported as 0.
  EXPECT_EQ(nic1.counters.count("symbol_errors"), 0u);
  EXPECT_EQ(nic1.counters.count("rx_errors"), 0u);
  EXPECT_EQ(nic1.counters.count("link_error_recovery"), 0u);
  EXPECT_EQ(health.skipped_values, 2u);  // N/A + missing
  EXPECT_EQ(health.parse_errors, 1u);    // garbage
  EXPECT_EQ(health.source_errors, 0u);
}

TEST(RdmaSysfsReader, FallsBackToCountersExtAndHandlesNoNetdev) {
  FsRoot sysfs(kHostB + "/sys");
  ReadHealth health;
  auto nics = RdmaSysfsReader(sysfs).ReadAll(&health);
  ASSERT_EQ(nics.size(), 1u);
  EXPECT_EQ(nics[0].netdev, "");
  EXPECT_EQ(nics[0].counters.at("rx_bytes"), 4 * 5'000'000'000ULL);
  EXPECT_EQ(nics[0].counters.at("tx_bytes"), 4 * 6'000'000'000ULL);
  // The PMA counter was N/A: the fallback filled it, but the N/A counts.
  EXPECT_EQ(health.skipped_values, 2u);
}

TEST(RdmaSysfsReader, NoInfinibandClassIsNoNics) {
  testing::TempDir dir;
  FsRoot sysfs(dir.path());
  ReadHealth health;
  EXPECT_TRUE(RdmaSysfsReader(sysfs).ReadAll(&health).empty());
  EXPECT_EQ(health.source_errors, 0u);
}

TEST(RdmaSysfsReader, SurvivesGarbageEverywhere) {
  testing::TempDir dir;
  testing::CopyTree(kSysfsHost + "/sys", dir / "sys");
  const std::string port = dir / "sys/class/infiniband/mlx5_0/ports/1";
  testing::WriteFile(port + "/counters/port_rcv_data", "\xff\xfe\x00garbage");
  testing::WriteFile(port + "/hw_counters/out_of_sequence", "");
  testing::WriteFile(port + "/rate", "fast\n");
  testing::WriteFile(port + "/phys_state", "LinkUp\n");
  testing::WriteFile(port + "/state", "ACTIVE\n");
  // A port directory whose name is not a number.
  testing::WriteFile(dir / "sys/class/infiniband/mlx5_0/ports/x/counters/port_rcv_data", "1\n");
  // A device without ports/.
  testing::WriteFile(dir / "sys/class/infiniband/mlx5_9/node_type", "1: CA\n");
  FsRoot sysfs(dir / "sys");
  ReadHealth health;
  auto nics = RdmaSysfsReader(sysfs).ReadAll(&health);
  ASSERT_EQ(nics.size(), 2u);  // mlx5_0 port 1 and mlx5_1 port 1
  EXPECT_EQ(nics[0].counters.count("rx_bytes"), 0u);
  EXPECT_EQ(nics[0].counters.count("out_of_sequence"), 0u);
  EXPECT_FALSE(nics[0].rate_bytes_per_second.has_value());
  EXPECT_FALSE(nics[0].link_up.has_value());
  // port_rcv_data, out_of_sequence, rate, state, "x" + mlx5_1's garbage.
  EXPECT_EQ(health.parse_errors, 6u);
  EXPECT_EQ(health.source_errors, 1u);  // mlx5_9 has no ports/
}

// phys_state decides; state is read only where phys_state does not answer.
TEST(RdmaSysfsReader, LinkStateFromPhysStateElseState) {
  struct Case {
    const char* phys;   // nullptr: no file
    const char* state;  // nullptr: no file
    std::optional<bool> up;
    uint64_t parse_errors, skipped;
  };
  const Case cases[] = {
      {"5: LinkUp\n", "1: DOWN\n", true, 0, 0},       // the physical layer is up while the logical is not
      {"3: Disabled\n", "4: ACTIVE\n", false, 0, 0},  // phys_state answered: state is not asked
      {nullptr, "4: ACTIVE\n", true, 0, 0},
      {"LinkUp\n", "1: DOWN\n", false, 0, 0},         // phys_state garbage: state decides
      {"LinkUp\n", nullptr, std::nullopt, 1, 0},
      {nullptr, nullptr, std::nullopt, 0, 1},
  };
  for (const Case& c : cases) {
    testing::TempDir dir;
    testing::CopyTree(kSysfsHost + "/sys", dir / "sys");
    std::filesystem::remove_all(dir / "sys/class/infiniband/mlx5_1");
    const std::string port = dir / "sys/class/infiniband/mlx5_0/ports/1";
    std::filesystem::remove(port + "/phys_state");
    std::filesystem::remove(port + "/state");
    if (c.phys) testing::WriteFile(port + "/phys_state", c.phys);
    if (c.state) testing::WriteFile(port + "/state", c.state);
    FsRoot sysfs(dir / "sys");
    ReadHealth health;
    auto nics = RdmaSysfsReader(sysfs).ReadAll(&health);
    ASSERT_EQ(nics.size(), 1u);
    const std::string what = std::string(c.phys ? c.phys : "(none)") + " / " + (c.state ? c.state : "(none)");
    EXPECT_EQ(nics[0].link_up, c.up) << what;
    EXPECT_EQ(health.parse_errors, c.parse_errors) << what;
    EXPECT_EQ(health.skipped_values, c.skipped) << what;
  }
}

}  // namespace
}  // namespace rocefab::hostd
