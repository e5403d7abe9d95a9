#include "agents/switch/file_backend.h"

#include <gtest/gtest.h>

#include "common/fs_root.h"
#include "tests/support/test_support.h"

namespace rocefab::switchd {
namespace {

constexpr char kCounters[] = R"({
  "switch": "z1-rtsw01", "timestamp_us": 1700000000000000,
  "ports": {
    "Ethernet0": {"rx_bytes": 1000, "tx_bytes": 2000, "link_up": 1, "link_flaps": 2,
                  "pfc_rx_pause_frames": {"3": 7, "4": 0},
                  "pfcwd_storms_detected": {"3": 1},
                  "queues": {"3": {"queue_drops": 0, "queue_ecn_marked_packets": 55,
                                   "queue_depth_bytes": 4096}}},
    "Ethernet4": {"rx_fcs_errors": 9, "mystery_counter": 1, "tx_bytes": -5,
                  "pfc_tx_pause_frames": {"x": 1, "3": "many"}}
  },
  "buffer_pools": {"ingress_lossless_pool": {"buffer_used_bytes": 123, "temperature": 40}}
})";

TEST(ParseSwitchCountersJson, ReadsTheLabFormat) {
  auto reading = ParseSwitchCountersJson(kCounters);
  ASSERT_TRUE(reading.ok()) << reading.status();
  EXPECT_EQ(reading->name, "z1-rtsw01");
  EXPECT_EQ(reading->timestamp_us, 1700000000000000);
  const PortReading& e0 = reading->ports.at("Ethernet0");
  EXPECT_EQ(e0.counters.at("rx_bytes"), 1000u);
  EXPECT_EQ(e0.counters.at("link_flaps"), 2u);
  EXPECT_EQ(e0.per_prio.at("pfc_rx_pause_frames").at(3), 7u);
  EXPECT_EQ(e0.port_queue.at("pfcwd_storms_detected").at(3), 1u);
  EXPECT_EQ(e0.queues.at(3).at("queue_ecn_marked_packets"), 55u);
  EXPECT_EQ(reading->buffer_pools.at("ingress_lossless_pool").at("buffer_used_bytes"), 123u);
  // Unknown names and bad values are skipped and counted, never zeroed.
  const PortReading& e4 = reading->ports.at("Ethernet4");
  EXPECT_EQ(e4.counters.count("tx_bytes"), 0u);
  EXPECT_EQ(e4.counters.count("mystery_counter"), 0u);
  EXPECT_TRUE(e4.per_prio.at("pfc_tx_pause_frames").empty());
  EXPECT_EQ(reading->unknown_keys, 2u);  // mystery_counter, temperature
  EXPECT_EQ(reading->bad_values, 3u);    // -5, "x", "many"
}

TEST(ParseSwitchCountersJson, ReadsTheOsVersionAndCountsABadOne) {
  auto reading = ParseSwitchCountersJson(R"({"os_version": "lab-2.3", "ports": {}})");
  ASSERT_TRUE(reading.ok()) << reading.status();
  EXPECT_EQ(reading->os_version, "lab-2.3");
  EXPECT_EQ(reading->bad_values, 0u);
  for (const std::string& bad : std::vector<std::string>{R"({"os_version": 7, "ports": {}})", R"({"os_version": "", "ports": {}})",
                                R"({"os_version": ")" + std::string(129, 'v') + R"(", "ports": {}})"}) {
    auto r = ParseSwitchCountersJson(bad);
    ASSERT_TRUE(r.ok()) << bad << ": one bad field is no bad file";
    EXPECT_EQ(r->os_version, "") << bad;
    EXPECT_EQ(r->bad_values, 1u) << bad;
  }
}

TEST(ParseSwitchCountersJson, RejectsWhatIsNotACountersFile) {
  for (const char* bad : {"", "{", "[]", "42", "{\"switch\": \"a\"}", "{\"ports\": []}",
                          "{\"ports\": {}} trailing"}) {
    EXPECT_FALSE(ParseSwitchCountersJson(bad).ok()) << bad;
  }
  EXPECT_TRUE(ParseSwitchCountersJson("{\"ports\": {}}").ok());
}

TEST(FileBackend, ReadsItsSwitchAndRefusesAnotherSwitchsFile) {
  testing::TempDir dir;
  testing::WriteFile(dir / "z1-rtsw01/counters.json", kCounters);
  FileBackend backend(dir.path(), "z1-rtsw01");
  auto reading = backend.ReadCounters();
  ASSERT_TRUE(reading.ok()) << reading.status();
  EXPECT_EQ(reading->ports.size(), 2u);
  testing::WriteFile(dir / "z1-rtsw02/counters.json", kCounters);
  auto wrong = FileBackend(dir.path(), "z1-rtsw02").ReadCounters();
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(std::string(wrong.status().message()).find("written for switch z1-rtsw01"),
            std::string::npos);
  EXPECT_TRUE(absl::IsNotFound(FileBackend(dir.path(), "z1-rtsw09").ReadCounters().status()));
}

// The fast path parses the file only when the lab replaced it.
TEST(FileBackend, TheFastPathSkipsAFileNotReplacedSinceItsLastRead) {
  testing::TempDir dir;
  testing::WriteFile(dir / "z1-rtsw01/counters.json", kCounters);
  FileBackend backend(dir.path(), "z1-rtsw01");
  auto first = backend.ReadPfcCounters();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->ports.size(), 2u);
  auto same = backend.ReadPfcCounters();
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->ports.empty()) << "unchanged: nothing moved";
  ASSERT_TRUE(WriteFileAtomic(dir / "z1-rtsw01/counters.json", kCounters).ok());
  auto replaced = backend.ReadPfcCounters();
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->ports.size(), 2u) << "a new file (new inode) is read again";
}

}  // namespace
}  // namespace rocefab::switchd
