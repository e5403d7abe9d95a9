// The sonic backend against a real redis-server holding SONiC's layout
// (docs/sonic-redis.md): counters in, config out.
#include "agents/switch/sonic_backend.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "agents/switch/config_applier.h"
#include "tests/support/test_support.h"

namespace rocefab::switchd {
namespace {

using Snapshot = std::map<std::string, std::map<std::string, std::string>>;

constexpr char kPort0[] = "oid:0x1000000000012";
constexpr char kPort4[] = "oid:0x1000000000013";
constexpr char kQueue0Uc3[] = "oid:0x15000000000353";
constexpr char kQueue0Mc10[] = "oid:0x1500000000035a";
constexpr char kQueue4Uc3[] = "oid:0x15000000000363";
constexpr char kPool[] = "oid:0x18000000000b66";

class SonicBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!redis_.ok()) GTEST_SKIP() << redis_.error();
    layout_.address.unix_path = redis_.socket();
    Populate();
  }

  RedisClient Db(int db) { return RedisClient(layout_.address, db); }

  void Run(int db, const std::vector<std::vector<std::string>>& commands) {
    RedisClient client = Db(db);
    auto replies = client.Pipeline(commands);
    ASSERT_TRUE(replies.ok()) << replies.status();
    for (const auto& reply : *replies) ASSERT_FALSE(reply.is_error()) << reply.str;
  }

  // A two-port switch as syncd, orchagent and portsyncd leave it.
  void Populate() {
    Run(layout_.counters_db,
        {{"HSET", "COUNTERS_PORT_NAME_MAP", "Ethernet0", kPort0, "Ethernet4", kPort4},
         {"HSET", "COUNTERS_QUEUE_NAME_MAP", "Ethernet0:3", kQueue0Uc3, "Ethernet0:10", kQueue0Mc10, "Ethernet4:3",
          kQueue4Uc3},
         {"HSET", "COUNTERS_QUEUE_TYPE_MAP", kQueue0Uc3, "SAI_QUEUE_TYPE_UNICAST", kQueue0Mc10,
          "SAI_QUEUE_TYPE_MULTICAST", kQueue4Uc3, "SAI_QUEUE_TYPE_UNICAST"},
         {"HSET", "COUNTERS_QUEUE_INDEX_MAP", kQueue0Uc3, "3", kQueue0Mc10, "10", kQueue4Uc3, "3"},
         {"HSET", "COUNTERS_QUEUE_PORT_MAP", kQueue0Uc3, kPort0, kQueue0Mc10, kPort0, kQueue4Uc3, kPort4},
         {"HSET", "COUNTERS_BUFFER_POOL_NAME_MAP", "ingress_lossless_pool", kPool},
         {"HSET", std::string("COUNTERS:") + kPort0, "SAI_PORT_STAT_IF_IN_OCTETS", "1000", "SAI_PORT_STAT_IF_OUT_OCTETS",
          "2000", "SAI_PORT_STAT_IF_IN_UCAST_PKTS", "10", "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS", "2",
          "SAI_PORT_STAT_IF_OUT_UCAST_PKTS", "20", "SAI_PORT_STAT_PFC_3_RX_PKTS", "7", "SAI_PORT_STAT_PFC_3_TX_PKTS", "9",
          "SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION_US", "1500", "SAI_PORT_STAT_DOT3_STATS_FCS_ERRORS", "4",
          "SAI_PORT_STAT_ETHER_STATS_JABBERS", "0", "SAI_PORT_STAT_PFC_4_RX_PKTS", "12abc", "ROGUE_FIELD", "1"},
         {"HSET", std::string("COUNTERS:") + kPort4, "SAI_PORT_STAT_IF_IN_OCTETS", "5",
          "SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION", "78125"},
         {"HSET", std::string("COUNTERS:") + kQueue0Uc3, "SAI_QUEUE_STAT_BYTES", "3000", "SAI_QUEUE_STAT_PACKETS", "30",
          "SAI_QUEUE_STAT_DROPPED_PACKETS", "1", "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS", "5",
          "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES", "4096", "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES", "8192",
          "PFC_WD_STATUS", "operational", "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED", "2",
          "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED", "1"},
         {"HSET", std::string("COUNTERS:") + kQueue0Mc10, "SAI_QUEUE_STAT_BYTES", "99"},
         {"HSET", std::string("COUNTERS:") + kQueue4Uc3, "SAI_QUEUE_STAT_DROPPED_PACKETS", "0"},
         {"HSET", std::string("COUNTERS:") + kPool, "SAI_BUFFER_POOL_STAT_WATERMARK_BYTES", "123456",
          "SAI_BUFFER_POOL_STAT_XOFF_ROOM_WATERMARK_BYTES", "0"}});
    Run(layout_.appl_db,
        {{"HSET", "PORT_TABLE:Ethernet0", "oper_status", "up", "admin_status", "up", "speed", "400000", "flap_count", "5"},
         {"HSET", "PORT_TABLE:Ethernet4", "oper_status", "down", "admin_status", "up", "speed", "400000", "flap_count",
          "3"},
         {"HSET", "PORT_TABLE:PortConfigDone", "count", "2"}});
    Run(layout_.state_db, {{"HSET", "PORT_TABLE|Ethernet0", "state", "ok", "speed", "400000"}});
    Run(layout_.config_db,
        {{"HSET", "BUFFER_POOL|ingress_lossless_pool", "size", "10875072", "type", "ingress", "mode", "dynamic"},
         {"HSET", "PORT|Ethernet0", "lanes", "0,1,2,3", "speed", "400000", "admin_status", "up"},
         {"HSET", "PORT|Ethernet4", "lanes", "4,5,6,7", "speed", "400000", "admin_status", "up"},
         {"HSET", "PORT_QOS_MAP|Ethernet0", "dscp_to_tc_map", "AZURE"},
         {"SET", "CONFIG_DB_INITIALIZED", "1"}});
  }

  // Every key of a database: hashes by field, strings as field "".
  Snapshot Dump(int db) {
    Snapshot out;
    RedisClient client = Db(db);
    auto keys = client.Command({"KEYS", "*"});
    EXPECT_TRUE(keys.ok());
    if (!keys.ok()) return out;
    for (const auto& key : keys->elements) {
      auto type = client.Command({"TYPE", key.str});
      if (type.ok() && type->str == "hash") out[key.str] = client.Command({"HGETALL", key.str})->AsHash();
      else out[key.str] = {{"", client.Command({"GET", key.str})->str}};
    }
    return out;
  }

  testing::RedisServer redis_;
  SonicDbLayout layout_;
};

TEST_F(SonicBackendTest, ReadsCountersDbIntoTheVocabulary) {
  SonicBackend backend(layout_, "z1-ctsw01");
  auto reading = backend.ReadCounters();
  ASSERT_TRUE(reading.ok()) << reading.status();
  EXPECT_EQ(reading->name, "z1-ctsw01");
  ASSERT_EQ(reading->ports.size(), 2u);
  const PortReading& e0 = reading->ports.at("Ethernet0");
  EXPECT_EQ(e0.counters.at("rx_bytes"), 1000u);
  EXPECT_EQ(e0.counters.at("tx_bytes"), 2000u);
  EXPECT_EQ(e0.counters.at("rx_packets"), 12u);  // unicast + non-unicast
  EXPECT_EQ(e0.counters.at("tx_packets"), 20u);
  EXPECT_EQ(e0.counters.at("rx_fcs_errors"), 4u);
  EXPECT_EQ(e0.counters.at("link_up"), 1u);
  EXPECT_EQ(e0.counters.at("rate_bytes_per_second"), 50'000'000'000u);
  EXPECT_EQ(e0.counters.at("link_flaps"), 2u);  // 5 changes, up now: 2 losses
  EXPECT_EQ(e0.per_prio.at("pfc_rx_pause_frames").at(3), 7u);
  EXPECT_EQ(e0.per_prio.at("pfc_tx_pause_frames").at(3), 9u);
  EXPECT_EQ(e0.per_prio.at("pfc_rx_pause_us").at(3), 1500u);
  EXPECT_FALSE(e0.per_prio.at("pfc_rx_pause_frames").count(4)) << "12abc is not a counter";
  ASSERT_EQ(e0.queues.size(), 1u) << "the multicast queue is not a unicast queue";
  const auto& q3 = e0.queues.at(3);
  EXPECT_EQ(q3.at("queue_tx_bytes"), 3000u);
  EXPECT_EQ(q3.at("queue_tx_packets"), 30u);
  EXPECT_EQ(q3.at("queue_drops"), 1u);
  EXPECT_EQ(q3.at("queue_ecn_marked_packets"), 5u);
  EXPECT_EQ(q3.at("queue_depth_bytes"), 4096u);
  EXPECT_EQ(q3.at("queue_watermark_bytes"), 8192u);
  EXPECT_EQ(e0.port_queue.at("pfcwd_storms_detected").at(3), 2u);
  EXPECT_EQ(e0.port_queue.at("pfcwd_storms_restored").at(3), 1u);

  const PortReading& e4 = reading->ports.at("Ethernet4");
  EXPECT_EQ(e4.counters.at("link_up"), 0u);
  EXPECT_EQ(e4.counters.at("link_flaps"), 2u);  // 3 changes, down now: 2 losses
  EXPECT_EQ(e4.counters.at("rate_bytes_per_second"), 50'000'000'000u) << "APPL_DB speed while down";
  // 78125 quanta of 512 bit times at 400 Gb/s.
  EXPECT_EQ(e4.per_prio.at("pfc_rx_pause_us").at(3), 100u);
  EXPECT_FALSE(e4.counters.count("rx_fcs_errors")) << "absent before 202605, so not reported";

  EXPECT_EQ(reading->buffer_pools.at("ingress_lossless_pool").at("buffer_watermark_bytes"), 123456u);
  EXPECT_EQ(reading->buffer_pools.at("ingress_lossless_pool").at("buffer_size_bytes"), 10875072u);
  EXPECT_EQ(reading->unknown_keys, 1u) << "ROGUE_FIELD; SAI fields rocefab leaves are not unknown";
  EXPECT_EQ(reading->bad_values, 1u);
  EXPECT_TRUE(reading->degraded.empty());
}

// PFC per port and priority from CONFIG_DB's PORT_QOS_MAP: the listed
// priorities on, the rest off; a port without pfc_enable reports nothing,
// and a list that does not parse is counted, not half read.
TEST_F(SonicBackendTest, PfcEnableListsAPortsLosslessPriorities) {
  SonicBackend backend(layout_, "z1-ctsw01");
  auto before = backend.ReadCounters();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE(before->ports.at("Ethernet0").per_prio.count("pfc_enabled")) << "no pfc_enable field: not 0";
  Run(layout_.config_db, {{"HSET", "PORT_QOS_MAP|Ethernet0", "pfc_enable", "4"},
                          {"HSET", "PORT_QOS_MAP|Ethernet4", "pfc_enable", "3,x"}});
  auto reading = backend.ReadCounters();
  ASSERT_TRUE(reading.ok()) << reading.status();
  const auto& e0 = reading->ports.at("Ethernet0").per_prio.at("pfc_enabled");
  EXPECT_EQ(e0.size(), 8u);
  EXPECT_EQ(e0.at(3), 0u) << "priority 3 is not in the list";
  EXPECT_EQ(e0.at(4), 1u);
  EXPECT_FALSE(reading->ports.at("Ethernet4").per_prio.count("pfc_enabled"));
  EXPECT_EQ(reading->bad_values, before->bad_values + 1) << "'3,x' is counted";
  Run(layout_.config_db, {{"HSET", "PORT_QOS_MAP|Ethernet0", "pfc_enable", "3, 4"}});
  auto again = backend.ReadCounters();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ports.at("Ethernet0").per_prio.at("pfc_enabled").at(3), 1u);
}

// The fast path reads the ports' counter hashes alone, with the last full
// read's port map and speeds.
TEST_F(SonicBackendTest, TheFastPathReadsOnlyThePortCounterHashes) {
  SonicBackend backend(layout_, "z1-ctsw01");
  ASSERT_TRUE(backend.ReadCounters().ok());
  Run(layout_.counters_db, {{"HSET", std::string("COUNTERS:") + kPort0, "SAI_PORT_STAT_PFC_3_TX_PKTS", "19",
                             "SAI_PORT_STAT_PFC_3_TX_PAUSE_DURATION_US", "100000"},
                            {"HSET", std::string("COUNTERS:") + kQueue0Uc3, "SAI_QUEUE_STAT_DROPPED_PACKETS", "9"},
                            {"DEL", "COUNTERS_QUEUE_NAME_MAP"}});
  auto fast = backend.ReadPfcCounters();
  ASSERT_TRUE(fast.ok()) << fast.status();
  const PortReading& e0 = fast->ports.at("Ethernet0");
  EXPECT_EQ(e0.per_prio.at("pfc_tx_pause_frames").at(3), 19u);
  EXPECT_EQ(e0.per_prio.at("pfc_tx_pause_us").at(3), 100'000u);
  EXPECT_EQ(e0.per_prio.at("pfc_rx_pause_us").at(3), 1500u);
  EXPECT_EQ(fast->ports.at("Ethernet4").per_prio.at("pfc_rx_pause_us").at(3), 100u)
      << "quanta at the speed the full read found: 78125 x 512 bits at 400G";
  EXPECT_TRUE(e0.queues.empty()) << "no queue reads on the fast path";
}

TEST_F(SonicBackendTest, NoPortMapIsAClearError) {
  Run(layout_.counters_db, {{"DEL", "COUNTERS_PORT_NAME_MAP"}});
  SonicBackend backend(layout_, "z1-ctsw01");
  auto reading = backend.ReadCounters();
  ASSERT_FALSE(reading.ok());
  EXPECT_NE(reading.status().message().find("COUNTERS_PORT_NAME_MAP"), std::string::npos) << reading.status();
}

TEST_F(SonicBackendTest, MissingTablesAreNamedAndTheRestIsRead) {
  Run(layout_.counters_db, {{"DEL", "COUNTERS_QUEUE_NAME_MAP"},
                            {"DEL", std::string("COUNTERS:") + kPort4},
                            {"SET", std::string("COUNTERS:") + kPool, "not a hash"}});
  Run(layout_.appl_db, {{"DEL", "PORT_TABLE:Ethernet4"}});
  SonicBackend backend(layout_, "z1-ctsw01");
  auto reading = backend.ReadCounters();
  ASSERT_TRUE(reading.ok()) << reading.status();
  const std::set<std::string> degraded(reading->degraded.begin(), reading->degraded.end());
  EXPECT_TRUE(degraded.count("COUNTERS_QUEUE_NAME_MAP is missing (flex counter group QUEUE)"));
  EXPECT_TRUE(degraded.count(std::string("COUNTERS:") + kPort4 + " of Ethernet4 is missing"));
  EXPECT_TRUE(degraded.count("APPL_DB PORT_TABLE:Ethernet4 is missing"));
  EXPECT_EQ(reading->ports.at("Ethernet0").counters.at("rx_bytes"), 1000u);
  EXPECT_TRUE(reading->ports.at("Ethernet0").queues.empty());
  // The pool hash of the wrong type is skipped; its configured size still reads.
  EXPECT_FALSE(reading->buffer_pools.at("ingress_lossless_pool").count("buffer_watermark_bytes"));
  EXPECT_EQ(reading->buffer_pools.at("ingress_lossless_pool").at("buffer_size_bytes"), 10875072u);
}

TEST_F(SonicBackendTest, ARestartedRedisCostsOnePoll) {
  SonicBackend backend(layout_, "z1-ctsw01");
  ASSERT_TRUE(backend.ReadCounters().ok());
  redis_.Stop();
  auto down = backend.ReadCounters();
  ASSERT_FALSE(down.ok());
  EXPECT_TRUE(absl::IsUnavailable(down.status())) << down.status();
  redis_.Start();
  ASSERT_TRUE(redis_.ok()) << redis_.error();
  Populate();
  auto again = backend.ReadCounters();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ports.at("Ethernet0").counters.at("rx_bytes"), 1000u);
}

TEST(SonicDbConfig, ReadsSonicsOwnFile) {
  auto layout = ParseSonicDbConfig(R"({
    "INSTANCES": {"redis": {"hostname": "127.0.0.1", "port": 6379, "unix_socket_path": "/var/run/redis/redis.sock"}},
    "DATABASES": {"APPL_DB": {"id": 0, "separator": ":", "instance": "redis"},
                  "COUNTERS_DB": {"id": 2, "separator": ":", "instance": "redis"},
                  "CONFIG_DB": {"id": 4, "separator": "|", "instance": "redis"},
                  "STATE_DB": {"id": 6, "separator": "|", "instance": "redis"}},
    "VERSION": "1.0"})");
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->address.unix_path, "/var/run/redis/redis.sock");
  EXPECT_EQ(layout->counters_db, 2);
  EXPECT_EQ(layout->config_db, 4);
  for (const char* bad : {"", "[]", R"({"DATABASES": {}})",
                          R"({"INSTANCES": {}, "DATABASES": {"APPL_DB": {"id": "zero", "instance": "redis"}}})"})
    EXPECT_FALSE(ParseSonicDbConfig(bad).ok()) << bad;
}

// ---- config ----

v1::SwitchConfig FullConfig(uint64_t generation) {
  v1::SwitchConfig config;
  config.set_switch_name("z1-ctsw01");
  config.set_generation(generation);
  auto add = [&](const std::string& key) {
    auto* item = config.add_items();
    item->set_key(key);
    return item;
  };
  auto* addr = add("addr/Ethernet0")->mutable_address();
  addr->set_port("Ethernet0");
  addr->set_address("100.64.0.0/31");
  auto* group = add("nhg/1")->mutable_nexthop_group();
  group->set_id(1);
  for (const auto& [port, gw] : {std::pair{"Ethernet0", "100.64.0.1"}, std::pair{"Ethernet4", "100.64.0.3"}}) {
    auto* hop = group->add_nexthops();
    hop->set_port(port);
    hop->set_gateway(gw);
  }
  auto* route = add("route/10.1.0.0/24")->mutable_route();
  route->set_prefix("10.1.0.0/24");
  route->set_nexthop_group(1);
  auto* pinned = add("route/t101/10.2.0.0/24")->mutable_route();
  pinned->set_prefix("10.2.0.0/24");
  pinned->set_port("Ethernet4");
  pinned->set_table(101);
  auto* hash = add("hash")->mutable_hash();
  for (const char* field : {"src_ip", "dst_ip", "ip_proto", "src_port", "dst_port", "roce_dst_qp"})
    hash->add_fields(field);
  testing::AddRoceQosItems(&config);
  auto* buffer = add("qos/buffer")->mutable_qos()->mutable_buffer();
  buffer->set_pool_bytes(20'000'000);
  buffer->set_headroom_bytes(4'000'000);
  return config;
}

std::set<std::string> Keys(const Snapshot& snapshot) {
  std::set<std::string> keys;
  for (const auto& [key, _] : snapshot) keys.insert(key);
  return keys;
}

TEST_F(SonicBackendTest, AnApplyWritesExactlyTheseConfigDbKeys) {
  const Snapshot before = Dump(layout_.config_db);
  SonicConfigBackend backend(layout_, "z1-ctsw01");
  ConfigApplier applier("z1-ctsw01", backend, "");
  auto response = applier.Apply(FullConfig(1));
  ASSERT_TRUE(response.ok()) << response.error();
  std::map<std::string, v1::ItemState> states;
  for (const auto& item : response.state().items()) states[item.key()] = item.state();
  EXPECT_EQ(states.at("route/t101/10.2.0.0/24"), v1::ITEM_STATE_UNSUPPORTED) << "no PBR on this backend";
  EXPECT_EQ(states.at("qos/ecn"), v1::ITEM_STATE_APPLIED);

  const Snapshot after = Dump(layout_.config_db);
  std::set<std::string> added;
  for (const auto& key : Keys(after))
    if (!before.count(key)) added.insert(key);
  const std::set<std::string> expected = {
      "INTERFACE|Ethernet0", "INTERFACE|Ethernet0|100.64.0.0/31", "STATIC_ROUTE|default|10.1.0.0/24",
      "SWITCH_HASH|GLOBAL", "DSCP_TO_TC_MAP|ROCEFAB", "TC_TO_QUEUE_MAP|ROCEFAB", "TC_TO_PRIORITY_GROUP_MAP|ROCEFAB",
      "MAP_PFC_PRIORITY_TO_QUEUE|ROCEFAB", "PORT_QOS_MAP|Ethernet4", "SCHEDULER|ROCEFAB_STRICT",
      "QUEUE|Ethernet0|6", "QUEUE|Ethernet4|6", "WRED_PROFILE|ROCEFAB_TC3", "QUEUE|Ethernet0|3", "QUEUE|Ethernet4|3",
      "PFC_WD|Ethernet0", "PFC_WD|Ethernet4"};
  EXPECT_EQ(added, expected);
  const std::map<std::string, std::string> route = {
      {"nexthop", "100.64.0.1,100.64.0.3"}, {"ifname", "Ethernet0,Ethernet4"}, {"advertise", "false"}};
  EXPECT_EQ(after.at("STATIC_ROUTE|default|10.1.0.0/24"), route);
  EXPECT_EQ(after.at("SWITCH_HASH|GLOBAL").at("ecmp_hash@"),
            "SRC_IP,DST_IP,IP_PROTOCOL,L4_SRC_PORT,L4_DST_PORT,RDMA_BTH_DEST_QP");
  const std::map<std::string, std::string> qos_map = {
      {"dscp_to_tc_map", "ROCEFAB"}, {"tc_to_queue_map", "ROCEFAB"}, {"tc_to_pg_map", "ROCEFAB"},
      {"pfc_to_queue_map", "ROCEFAB"}, {"pfc_enable", "3"},          {"pfcwd_sw_enable", "3"}};
  EXPECT_EQ(after.at("PORT_QOS_MAP|Ethernet0"), qos_map) << "SONiC's AZURE reference replaced by rocefab's";
  EXPECT_EQ(after.at("DSCP_TO_TC_MAP|ROCEFAB").at("26"), "3");
  EXPECT_EQ(after.at("TC_TO_PRIORITY_GROUP_MAP|ROCEFAB").at("3"), "3");
  EXPECT_EQ(after.at("TC_TO_PRIORITY_GROUP_MAP|ROCEFAB").at("1"), "0");
  EXPECT_EQ(after.at("WRED_PROFILE|ROCEFAB_TC3").at("green_min_threshold"), "150000");
  EXPECT_EQ(after.at("WRED_PROFILE|ROCEFAB_TC3").at("green_max_threshold"), "1500000");
  EXPECT_EQ(after.at("WRED_PROFILE|ROCEFAB_TC3").at("green_drop_probability"), "10");
  EXPECT_EQ(after.at("WRED_PROFILE|ROCEFAB_TC3").at("ecn"), "ecn_all");
  EXPECT_EQ(after.at("QUEUE|Ethernet0|3").at("wred_profile"), "ROCEFAB_TC3");
  EXPECT_EQ(after.at("QUEUE|Ethernet0|6").at("scheduler"), "ROCEFAB_STRICT");
  const std::map<std::string, std::string> wd = {
      {"action", "drop"}, {"detection_time", "200"}, {"restoration_time", "400"}};
  EXPECT_EQ(after.at("PFC_WD|Ethernet4"), wd);
  EXPECT_EQ(after.at("BUFFER_POOL|ingress_lossless_pool").at("size"), "20000000");
  EXPECT_EQ(after.at("BUFFER_POOL|ingress_lossless_pool").at("xoff"), "4000000");
  EXPECT_EQ(after.at("BUFFER_POOL|ingress_lossless_pool").at("mode"), "dynamic") << "fields rocefab does not set stay";

  // A changed group rewrites the route that uses it.
  v1::SwitchConfig next = FullConfig(2);
  for (auto& item : *next.mutable_items())
    if (item.has_nexthop_group()) item.mutable_nexthop_group()->mutable_nexthops()->RemoveLast();
  ASSERT_TRUE(applier.Apply(next).ok());
  EXPECT_EQ(Dump(layout_.config_db).at("STATIC_ROUTE|default|10.1.0.0/24").at("nexthop"), "100.64.0.1");
}

// The buffer item with a fixed XOFF threshold, as the compiler sends it.
v1::SwitchConfig WithXoffThreshold(uint64_t generation, std::vector<uint32_t> lossless_pgs) {
  v1::SwitchConfig config = FullConfig(generation);
  for (auto& item : *config.mutable_items()) {
    if (item.key() != "qos/buffer") continue;
    auto* buffer = item.mutable_qos()->mutable_buffer();
    buffer->set_xoff_bytes(3'000'000);
    buffer->set_pg_xon_bytes(19'456);
    buffer->set_pg_headroom_bytes(160'000);
    for (uint32_t pg : lossless_pgs) buffer->add_lossless_pgs(pg);
  }
  return config;
}

TEST_F(SonicBackendTest, AFixedXoffThresholdIsAProfileBoundToTheLosslessPgsOfEveryPort) {
  SonicConfigBackend backend(layout_, "z1-ctsw01");
  ConfigApplier applier("z1-ctsw01", backend, "");
  auto response = applier.Apply(WithXoffThreshold(1, {3, 4}));
  ASSERT_TRUE(response.ok()) << response.error();
  const Snapshot after = Dump(layout_.config_db);
  // With a shared headroom pool (headroom_bytes) the PG reserves only its XON part.
  const std::map<std::string, std::string> profile = {{"pool", "ingress_lossless_pool"},
                                                      {"size", "19456"},
                                                      {"xon", "19456"},
                                                      {"xoff", "160000"},
                                                      {"static_th", "3000000"}};
  EXPECT_EQ(after.at("BUFFER_PROFILE|ROCEFAB_LOSSLESS"), profile);
  for (const char* port : {"Ethernet0", "Ethernet4"}) {
    const std::string key = std::string("BUFFER_PG|") + port + "|3-4";
    ASSERT_TRUE(after.count(key)) << key;
    EXPECT_EQ(after.at(key).at("profile"), "ROCEFAB_LOSSLESS");
  }

  // Fewer lossless PGs: the item's own earlier key is replaced, not an overlap.
  auto fewer = applier.Apply(WithXoffThreshold(2, {3}));
  ASSERT_TRUE(fewer.ok()) << fewer.error();
  EXPECT_FALSE(Dump(layout_.config_db).count("BUFFER_PG|Ethernet0|3-4"));
  EXPECT_EQ(Dump(layout_.config_db).at("BUFFER_PG|Ethernet0|3").at("profile"), "ROCEFAB_LOSSLESS");

  // Taking the threshold out deletes the profile and its bindings.
  ASSERT_TRUE(applier.Apply(FullConfig(3)).ok());
  const Snapshot later = Dump(layout_.config_db);
  EXPECT_FALSE(later.count("BUFFER_PROFILE|ROCEFAB_LOSSLESS"));
  EXPECT_FALSE(later.count("BUFFER_PG|Ethernet0|3-4"));
  EXPECT_FALSE(later.count("BUFFER_PG|Ethernet0|3"));
}

TEST_F(SonicBackendTest, PgsThatAreNotARangeGetAKeyEachAndAnOverlapIsRefused) {
  v1::ConfigItem item;
  item.set_key("qos/buffer");
  *item.mutable_qos()->mutable_buffer() = WithXoffThreshold(1, {3, 5}).items().rbegin()->qos().buffer();
  auto mapped = SonicConfigBackend::EntriesFor(item, {"Ethernet0"}, {});
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  std::set<std::string> keys;
  for (const auto& e : *mapped) keys.insert(e.key);
  EXPECT_TRUE(keys.count("BUFFER_PG|Ethernet0|3") && keys.count("BUFFER_PG|Ethernet0|5")) << keys.size();
  for (const auto& e : *mapped)
    if (e.key == "BUFFER_PROFILE|ROCEFAB_LOSSLESS") EXPECT_EQ(e.fields.at("size"), "19456");

  // SONiC's own lossless entry binds PGs 3-4: a profile for PG 3 alone
  // would give PG 3 two profiles, so the item fails and nothing is written.
  // Keys that name no PG range are not rocefab's to judge, and block nothing.
  Run(layout_.config_db, {{"HSET", "BUFFER_PG|Ethernet0|3-4", "profile", "NULL"},
                          {"HSET", "BUFFER_PG|Ethernet4|junk", "profile", "NULL"},
                          {"HSET", "BUFFER_PG|Ethernet4|3-", "profile", "NULL"},
                          {"HSET", "BUFFER_PG|Ethernet4", "profile", "NULL"}});
  const Snapshot before = Dump(layout_.config_db);
  SonicConfigBackend backend(layout_, "z1-ctsw01");
  ConfigApplier applier("z1-ctsw01", backend, "");
  auto response = applier.Apply(WithXoffThreshold(1, {3}));
  ASSERT_FALSE(response.ok());
  EXPECT_NE(response.error().find("BUFFER_PG|Ethernet0|3-4 already binds PG 3"), std::string::npos)
      << response.error();
  EXPECT_EQ(Dump(layout_.config_db), before);
  // The same PGs as SONiC's entry take it over.
  ASSERT_TRUE(applier.Apply(WithXoffThreshold(2, {3, 4})).ok());
  EXPECT_EQ(Dump(layout_.config_db).at("BUFFER_PG|Ethernet0|3-4").at("profile"), "ROCEFAB_LOSSLESS");
}

TEST_F(SonicBackendTest, AFailedItemRollsTheWholeApplyBack) {
  SonicConfigBackend backend(layout_, "z1-ctsw01");
  ConfigApplier applier("z1-ctsw01", backend, "");
  ASSERT_TRUE(applier.Apply(FullConfig(1)).ok());
  const Snapshot before = Dump(layout_.config_db);

  // Installs go in dependency order (groups, routes, ..., QoS in config
  // order), so the group and the ECN profile change before the watchdog
  // item fails.
  v1::SwitchConfig next = FullConfig(2);
  for (auto& item : *next.mutable_items()) {
    if (item.has_nexthop_group()) item.mutable_nexthop_group()->mutable_nexthops()->RemoveLast();
    if (item.key() == "qos/ecn") item.mutable_qos()->mutable_qos()->mutable_ecn(0)->set_min_bytes(300'000);
    if (item.key() == "qos/pfc_watchdog") item.mutable_qos()->mutable_qos()->mutable_pfc_watchdog()->set_detect_ms(50);
  }
  auto response = applier.Apply(next);
  ASSERT_FALSE(response.ok());
  EXPECT_NE(response.error().find("SONiC takes 100-5000"), std::string::npos) << response.error();
  EXPECT_NE(response.error().find("rolled back 2 applied change(s) [nhg/1, qos/ecn]"), std::string::npos)
      << response.error();
  EXPECT_EQ(Dump(layout_.config_db), before) << response.error();
  EXPECT_EQ(response.state().applied_generation(), 1u);
}

TEST_F(SonicBackendTest, ReplacingAnItemRemovesWhatItNoLongerSets) {
  SonicConfigBackend backend(layout_, "z1-ctsw01");
  ConfigApplier applier("z1-ctsw01", backend, "");
  ASSERT_TRUE(applier.Apply(FullConfig(1)).ok());
  v1::SwitchConfig next = FullConfig(2);
  for (auto& item : *next.mutable_items())
    if (item.key() == "qos/ecn") item.mutable_qos()->mutable_qos()->mutable_ecn(0)->set_tc(4);
  ASSERT_TRUE(applier.Apply(next).ok());
  const Snapshot after = Dump(layout_.config_db);
  EXPECT_FALSE(after.count("WRED_PROFILE|ROCEFAB_TC3"));
  EXPECT_FALSE(after.count("QUEUE|Ethernet0|3"));
  EXPECT_EQ(after.at("QUEUE|Ethernet0|4").at("wred_profile"), "ROCEFAB_TC4");

  // Removing the item takes away its fields only.
  v1::SwitchConfig fewer = FullConfig(3);
  for (int i = 0; i < fewer.items_size(); ++i)
    if (fewer.items(i).key() == "qos/ecn" || fewer.items(i).key() == "qos/ets") fewer.mutable_items()->DeleteSubrange(i--, 1);
  ASSERT_TRUE(applier.Apply(fewer).ok());
  const Snapshot last = Dump(layout_.config_db);
  EXPECT_FALSE(last.count("QUEUE|Ethernet0|4"));
  EXPECT_FALSE(last.count("SCHEDULER|ROCEFAB_STRICT"));
  EXPECT_TRUE(last.count("PFC_WD|Ethernet0"));
}

TEST_F(SonicBackendTest, ARestartReconcilesCONFIG_DB) {
  testing::TempDir dir;
  {
    SonicConfigBackend backend(layout_, "z1-ctsw01");
    ConfigApplier applier("z1-ctsw01", backend, dir / "applied.pb");
    ASSERT_TRUE(applier.Apply(FullConfig(1)).ok());
  }
  const Snapshot applied = Dump(layout_.config_db);
  // While the agent was down, someone removed a route and a WRED profile.
  Run(layout_.config_db, {{"DEL", "STATIC_ROUTE|default|10.1.0.0/24"}, {"DEL", "WRED_PROFILE|ROCEFAB_TC3"}});
  SonicConfigBackend backend(layout_, "z1-ctsw01");
  ConfigApplier applier("z1-ctsw01", backend, dir / "applied.pb");
  ASSERT_TRUE(applier.Reconcile().ok());
  EXPECT_EQ(Dump(layout_.config_db), applied);
  EXPECT_EQ(applier.State().applied_generation(), 1u);
}

TEST_F(SonicBackendTest, AnUninitializedConfigDbIsNotWritten) {
  Run(layout_.config_db, {{"DEL", "CONFIG_DB_INITIALIZED"}});
  const Snapshot before = Dump(layout_.config_db);
  SonicConfigBackend backend(layout_, "z1-ctsw01");
  ConfigApplier applier("z1-ctsw01", backend, "");
  auto response = applier.Apply(FullConfig(1));
  ASSERT_FALSE(response.ok());
  EXPECT_NE(response.error().find("CONFIG_DB_INITIALIZED"), std::string::npos) << response.error();
  EXPECT_EQ(Dump(layout_.config_db), before);
}

TEST(SonicConfigEntries, RefusesWhatSonicWouldRefuse) {
  const std::vector<std::string> ports = {"Ethernet0"};
  v1::ConfigItem item;
  item.set_key("qos/pfc_watchdog");
  item.mutable_qos()->mutable_qos()->mutable_pfc_watchdog()->set_detect_ms(50);
  EXPECT_TRUE(absl::IsInvalidArgument(SonicConfigBackend::EntriesFor(item, ports, {}).status()));
  item.Clear();
  item.mutable_hash()->add_fields("flow_label");
  EXPECT_TRUE(absl::IsInvalidArgument(SonicConfigBackend::EntriesFor(item, ports, {}).status()));
  item.Clear();
  item.mutable_rule()->set_priority(100);
  EXPECT_TRUE(absl::IsUnimplemented(SonicConfigBackend::EntriesFor(item, ports, {}).status()));
  item.Clear();
  item.mutable_qos()->mutable_buffer()->set_xoff_bytes(3'000'000);
  item.mutable_qos()->mutable_buffer()->add_lossless_pgs(3);
  auto refused = SonicConfigBackend::EntriesFor(item, ports, {});
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_NE(std::string(refused.status().message()).find("pg_xon_bytes"), std::string::npos) << refused.status();
  item.Clear();
  item.mutable_route()->set_prefix("10.0.0.0/24");
  item.mutable_route()->set_nexthop_group(7);
  EXPECT_TRUE(absl::IsFailedPrecondition(SonicConfigBackend::EntriesFor(item, ports, {}).status()));
}

}  // namespace
}  // namespace rocefab::switchd
