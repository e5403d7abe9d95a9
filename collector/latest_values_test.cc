#include "collector/latest_values.h"

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

namespace rocefab::collector {
namespace {

v1::TelemetryBatch NicBatch(int64_t ts, uint64_t rx, uint64_t pause_us) {
  v1::TelemetryBatch batch;
  auto* e = batch.add_entities();
  e->set_scope(v1::SCOPE_NIC);
  e->set_entity("z1-r01-h1/mlx5_3");
  e->set_port(1);
  e->set_timestamp_us(ts);
  auto* s = e->add_samples();
  s->set_counter("rx_bytes");
  s->set_value(rx);
  s = e->add_samples();
  s->set_counter("pfc_rx_pause_us");
  s->set_prio(3);
  s->set_value(pause_us);
  s = e->add_samples();
  s->set_counter("link_up");
  s->set_value(1);
  s = e->add_samples();
  s->set_counter("not_a_counter");
  s->set_value(1);
  return batch;
}

TEST(LatestValues, ExportsNicSeriesWithLabelsAndUnits) {
  LatestValues latest(ExportOptions{20, true});
  latest.Update(NicBatch(2000, 4096, 2'500'000));
  latest.Update(NicBatch(1000, 1, 1));  // older: ignored
  EXPECT_EQ(latest.size(), 3u);
  const std::string text = prometheus::TextSerializer().Serialize(latest.Collect());
  EXPECT_NE(text.find("# TYPE rocefab_nic_rx_bytes_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("rocefab_nic_rx_bytes_total{host=\"z1-r01-h1\",device=\"mlx5_3\",port=\"1\"} 4096"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rocefab_nic_pfc_rx_pause_seconds_total{host=\"z1-r01-h1\",device=\"mlx5_3\","
                      "port=\"1\",prio=\"3\"} 2.5"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE rocefab_nic_link_up gauge"), std::string::npos);
  EXPECT_EQ(text.find("not_a_counter"), std::string::npos);
  // Families without series are not printed.
  EXPECT_EQ(text.find("rocefab_nic_tx_bytes_total"), std::string::npos);
}

// A port entity with a pause delta of `pause_us` in its latest interval.
v1::TelemetryBatch PortBatch(const std::string& entity, uint64_t pause_us, uint64_t link_up) {
  v1::TelemetryBatch batch;
  auto* e = batch.add_entities();
  e->set_scope(v1::SCOPE_PORT);
  e->set_entity(entity);
  e->set_timestamp_us(1000);
  auto* s = e->add_samples();
  s->set_counter("pfc_rx_pause_us");
  s->set_prio(3);
  s->set_value(pause_us * 10);
  s->set_delta(pause_us);
  s = e->add_samples();
  s->set_counter("link_up");
  s->set_value(link_up);
  return batch;
}

TEST(LatestValues, PerPortSeriesOnlyForTheTopKAndHighlightedButSummariesForAll) {
  const char* yaml = R"yaml(
switches:
  - {name: z1-rtsw01, role: rtsw, zone: z1}
  - {name: z1-ctsw01, role: ctsw, zone: z1}
hosts:
  - {name: z1-r01-h1, zone: z1, rack: 1, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.1.1}]}
links:
  - {a: z1-r01-h1/mlx5_0, b: z1-rtsw01/Ethernet0, speed_gbps: 400}
  - {a: z1-rtsw01/Ethernet8, b: z1-ctsw01/Ethernet0, speed_gbps: 400}
)yaml";
  auto topo = Topology::FromYaml(yaml, "test");
  ASSERT_TRUE(topo.ok()) << topo.status();
  LatestValues latest(ExportOptions{1, false}, *topo);
  latest.Update(PortBatch("z1-rtsw01/Ethernet0", 500'000, 1));  // the most paused
  latest.Update(PortBatch("z1-rtsw01/Ethernet8", 1'000, 1));
  latest.Update(PortBatch("z1-ctsw01/Ethernet0", 0, 0));        // quiet but down
  std::string text = prometheus::TextSerializer().Serialize(latest.Collect());
  EXPECT_NE(text.find("rocefab_port_pfc_rx_pause_seconds_total{switch=\"z1-rtsw01\",port=\"Ethernet0\",prio=\"3\"} 5"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("port=\"Ethernet8\""), std::string::npos) << "not in the top 1";
  // Summaries count every port, per zone and tier.
  EXPECT_NE(text.find("rocefab_fabric_ports{zone=\"z1\",tier=\"rtsw\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("rocefab_fabric_links_down{zone=\"z1\",tier=\"ctsw\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("rocefab_fabric_pfc_pause_seconds_total{zone=\"z1\",tier=\"rtsw\",direction=\"rx\"} 5.01"),
            std::string::npos)
      << text;
  // An anomaly names the quiet port: it gets its series.
  latest.SetHighlighted({"z1-ctsw01/Ethernet0"});
  text = prometheus::TextSerializer().Serialize(latest.Collect());
  EXPECT_NE(text.find("rocefab_port_link_up{switch=\"z1-ctsw01\",port=\"Ethernet0\"} 0"), std::string::npos)
      << text;
}

// The fabric sums follow every update of every entity, also when an entity's
// reading changes shape or a link goes down and comes back.
TEST(LatestValues, FabricSummariesFollowUpdatesAndReshapes) {
  LatestValues latest(ExportOptions{0, false});
  auto collect = [&] { return prometheus::TextSerializer().Serialize(latest.Collect()); };
  latest.Update(PortBatch("s1/Ethernet0", 100, 1));
  latest.Update(PortBatch("s1/Ethernet4", 200, 0));
  std::string text = collect();
  // 10x the deltas are the values: 1000 + 2000 us.
  EXPECT_NE(text.find("rocefab_fabric_pfc_pause_seconds_total{zone=\"unknown\",tier=\"switch\",direction=\"rx\"} 0.003"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rocefab_fabric_links_down{zone=\"unknown\",tier=\"switch\"} 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("rocefab_port_"), std::string::npos) << "top 0 exports no port series";
  latest.Update(PortBatch("s1/Ethernet4", 300, 1));  // grows, link back up
  text = collect();
  EXPECT_NE(text.find("direction=\"rx\"} 0.004"), std::string::npos) << text;
  EXPECT_NE(text.find("rocefab_fabric_links_down{zone=\"unknown\",tier=\"switch\"} 0"), std::string::npos) << text;
  // A reading without its pause series: the last value still counts, so the
  // summary counter does not go backwards.
  v1::TelemetryBatch only_link = PortBatch("s1/Ethernet0", 0, 1);
  only_link.mutable_entities(0)->mutable_samples()->DeleteSubrange(0, 1);
  only_link.mutable_entities(0)->set_timestamp_us(2000);
  latest.Update(only_link);
  text = collect();
  EXPECT_NE(text.find("direction=\"rx\"} 0.004"), std::string::npos) << text;
  EXPECT_NE(text.find("rocefab_fabric_ports{zone=\"unknown\",tier=\"switch\"} 2"), std::string::npos) << text;
  EXPECT_EQ(latest.size(), 4u);
}

}  // namespace
}  // namespace rocefab::collector
