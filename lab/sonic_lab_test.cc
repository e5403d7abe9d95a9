// The lab's SONiC emulation against the sonic backend: what the lab writes,
// the backend reads back as the same vocabulary values; what the backend
// writes to CONFIG_DB, the lab turns back into the config the controller sent.
#include "lab/sonic_lab.h"

#include <gtest/gtest.h>

#include "agents/switch/sonic_backend.h"
#include "common/fs_root.h"
#include "lab/fabric_model.h"
#include "tests/support/test_support.h"

namespace rocefab::lab {
namespace {

v1::SwitchConfig Sent() {
  v1::SwitchConfig config;
  config.set_switch_name("z1-rtsw01");
  auto add = [&](const std::string& key) {
    auto* item = config.add_items();
    item->set_key(key);
    return item;
  };
  auto* group = add("nhg/1")->mutable_nexthop_group();
  group->set_id(1);
  for (const char* port : {"Ethernet32", "Ethernet36"}) group->add_nexthops()->set_port(port);
  auto* zone = add("route/10.1.0.0/16")->mutable_route();
  zone->set_prefix("10.1.0.0/16");
  zone->set_nexthop_group(1);
  auto* host = add("route/10.1.1.1/32")->mutable_route();
  host->set_prefix("10.1.1.1/32");
  host->set_port("Ethernet0");
  auto* hash = add("hash")->mutable_hash();
  for (const char* field : {"src_ip", "dst_ip", "ip_proto", "src_port", "dst_port", "roce_dst_qp"}) hash->add_fields(field);
  testing::AddRoceQosItems(&config);
  return config;
}

TEST(SonicLab, CONFIG_DBReadsBackAsTheConfigTheControllerSent) {
  const std::vector<std::string> ports = {"Ethernet0", "Ethernet32", "Ethernet36"};
  const v1::SwitchConfig sent = Sent();
  ConfigDb db;
  for (const auto& port : ports) db["PORT|" + port] = {{"admin_status", "up"}};
  std::map<uint32_t, v1::NexthopGroupItem> groups;
  for (const auto& item : sent.items()) {
    if (item.has_nexthop_group()) groups[item.nexthop_group().id()] = item.nexthop_group();
    auto entries = switchd::SonicConfigBackend::EntriesFor(item, ports, groups);
    ASSERT_TRUE(entries.ok()) << item.key() << ": " << entries.status();
    for (const auto& entry : *entries)
      for (const auto& [field, value] : entry.fields) db[entry.key][field] = value;
  }
  const v1::SwitchConfig read = ConfigFromConfigDb("z1-rtsw01", db);
  EXPECT_EQ(read.scheme(), v1::ROUTING_SCHEME_EECMP) << "the hash takes the RoCE destination QP";
  std::map<std::string, std::vector<std::string>> routes;  // prefix -> egress ports
  std::map<uint32_t, std::vector<std::string>> read_groups;
  v1::QosPolicy qos;
  for (const auto& item : read.items()) {
    if (item.has_nexthop_group())
      for (const auto& hop : item.nexthop_group().nexthops()) read_groups[item.nexthop_group().id()].push_back(hop.port());
    if (item.has_qos()) qos.MergeFrom(item.qos().qos());
  }
  for (const auto& item : read.items())
    if (item.has_route())
      routes[item.route().prefix()] = item.route().nexthop_group() != 0 ? read_groups[item.route().nexthop_group()]
                                                                        : std::vector<std::string>{item.route().port()};
  const std::map<std::string, std::vector<std::string>> expected = {
      {"10.1.0.0/16", {"Ethernet32", "Ethernet36"}}, {"10.1.1.1/32", {"Ethernet0"}}};
  EXPECT_EQ(routes, expected);
  // The model queues by the same QoS either way.
  v1::QosPolicy sent_qos;
  for (const auto& item : sent.items())
    if (item.has_qos()) sent_qos.MergeFrom(item.qos().qos());
  const ModelConstants k;
  const SwitchQos a = QosFromPolicy(sent_qos, k), b = QosFromPolicy(qos, k);
  EXPECT_EQ(a.roce_tc, b.roce_tc);
  EXPECT_EQ(a.lossless, b.lossless);
  EXPECT_EQ(a.ecn, b.ecn);
  EXPECT_EQ(a.kmin_bytes, b.kmin_bytes);
  EXPECT_EQ(a.kmax_bytes, b.kmax_bytes);
  EXPECT_DOUBLE_EQ(a.pmax, b.pmax);
  EXPECT_EQ(a.wd_detect_s, b.wd_detect_s);
  EXPECT_EQ(a.wd_action, b.wd_action);
  EXPECT_EQ(a.control_priority, b.control_priority);
  EXPECT_EQ(qos.strict_priority_tc(), 6u);
  EXPECT_EQ(qos.pfc_watchdog().detect_ms(), 200u);
  EXPECT_EQ(qos.pfc_watchdog().restore_ms(), 400u);
}

TEST(SonicLab, WhatTheLabWritesTheBackendReadsAndWhatTheBackendWritesTheLabRoutesBy) {
  if (access("/usr/bin/redis-server", X_OK) != 0) GTEST_SKIP() << "redis-server is not installed";
  testing::TempDir dir;
  v1::Topology topology;
  auto* sw = topology.add_switches();
  sw->set_name("z1-rtsw01");
  for (const char* port : {"Ethernet0", "Ethernet32"}) {
    auto* link = topology.add_links();
    link->set_a(std::string("z1-rtsw01/") + port);
    link->set_b(std::string("z1-r01-h1/mlx5_") + port[8]);
    link->set_speed_gbps(400);
  }
  auto lab = SonicLab::Start(dir / "sonic", topology, 64'000'000);
  ASSERT_TRUE(lab.ok()) << lab.status();
  const nlohmann::json reading = nlohmann::json::parse(R"({
    "switch": "z1-rtsw01", "ports": {
      "Ethernet0": {"rx_bytes": 1000, "tx_bytes": 2000, "rx_packets": 10, "tx_packets": 20, "rx_fcs_errors": 3,
                    "rx_symbol_errors": 0, "link_up": 1, "rate_bytes_per_second": 50000000000, "link_flaps": 2,
                    "pfc_rx_pause_frames": {"3": 7}, "pfc_tx_pause_frames": {"3": 9}, "pfc_rx_pause_us": {"3": 1500},
                    "pfc_tx_pause_us": {"3": 0}, "pfcwd_storms_detected": {"3": 1}, "pfcwd_storms_restored": {"3": 1},
                    "queues": {"3": {"queue_tx_bytes": 3000, "queue_tx_packets": 30, "queue_drops": 4,
                                     "queue_ecn_marked_packets": 5, "queue_depth_bytes": 4096, "queue_watermark_bytes": 8192}}},
      "Ethernet32": {"rx_bytes": 5, "link_up": 0, "rate_bytes_per_second": 50000000000, "link_flaps": 1}},
    "buffer_pools": {"ingress_lossless_pool": {"buffer_used_bytes": 100, "buffer_watermark_bytes": 120}}})");
  nlohmann::json written = reading;
  written["ports"]["Ethernet0"]["link_up"] = 1;  // outputs.cc writes a signed int
  ASSERT_TRUE(written["ports"]["Ethernet0"]["link_up"].is_number_integer());
  ASSERT_TRUE((*lab)->WriteSwitch("z1-rtsw01", written).ok());

  auto text = ReadWholeFile((*lab)->DbConfigPath("z1-rtsw01"));
  ASSERT_TRUE(text.ok());
  auto layout = switchd::ParseSonicDbConfig(*text);
  ASSERT_TRUE(layout.ok()) << layout.status();
  switchd::SonicBackend backend(*layout, "z1-rtsw01");
  auto got = backend.ReadCounters();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->degraded.empty());
  EXPECT_EQ(got->unknown_keys, 0u);
  EXPECT_EQ(got->bad_values, 0u);
  // Every value of the lab's reading comes back under its own name.
  for (const auto& [port, values] : reading["ports"].items()) {
    const auto& read = got->ports.at(port);
    for (const auto& [name, value] : values.items()) {
      if (name == "queues") {
        for (const auto& [counter, v] : value["3"].items()) EXPECT_EQ(read.queues.at(3).at(counter), v) << port << " " << counter;
      } else if (value.is_object()) {
        const auto& by_index = read.per_prio.count(name) ? read.per_prio.at(name) : read.port_queue.at(name);
        EXPECT_EQ(by_index.at(3), value["3"]) << port << " " << name;
      } else {
        EXPECT_EQ(read.counters.at(name), value) << port << " " << name;
      }
    }
  }
  EXPECT_EQ(got->buffer_pools.at("ingress_lossless_pool").at("buffer_size_bytes"), 64'000'000u);
  EXPECT_EQ(got->buffer_pools.at("ingress_lossless_pool").at("buffer_used_bytes"), 100u);

  // Nothing applied yet: the model keeps the switch's own routing.
  auto none = (*lab)->ReadConfigIfChanged("z1-rtsw01");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  switchd::SonicConfigBackend config(*layout, "z1-rtsw01");
  v1::ConfigItem route;
  route.set_key("route/10.1.1.1/32");
  route.mutable_route()->set_prefix("10.1.1.1/32");
  route.mutable_route()->set_port("Ethernet0");
  ASSERT_TRUE(config.Install(route).ok());
  auto applied = (*lab)->ReadConfigIfChanged("z1-rtsw01");
  ASSERT_TRUE(applied.ok());
  ASSERT_TRUE(applied->has_value());
  ASSERT_EQ((*applied)->items_size(), 1);
  EXPECT_EQ((*applied)->items(0).route().port(), "Ethernet0");
  auto again = (*lab)->ReadConfigIfChanged("z1-rtsw01");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value()) << "unchanged";
}

}  // namespace
}  // namespace rocefab::lab
