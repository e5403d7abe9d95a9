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
  LatestValues latest;
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

}  // namespace
}  // namespace rocefab::collector
