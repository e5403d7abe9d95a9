#include "agents/switch/switch_agent.h"

#include <gtest/gtest.h>

#include "agents/switch/file_backend.h"

namespace rocefab::switchd {
namespace {

SwitchReading Reading(uint64_t rx, uint64_t pauses) {
  SwitchReading reading;
  reading.name = "z1-rtsw01";
  auto& port = reading.ports["Ethernet12"];
  port.counters["rx_bytes"] = rx;
  port.counters["link_up"] = 1;
  port.per_prio["pfc_rx_pause_frames"][3] = pauses;
  port.queues[3]["queue_drops"] = 0;
  port.queues[3]["queue_depth_bytes"] = 8192;
  reading.buffer_pools["ingress_lossless_pool"]["buffer_used_bytes"] = 100;
  reading.unknown_keys = 2;
  return reading;
}

TEST(AppendReading, PortQueueAndPoolEntitiesWithDeltas) {
  BatchBuilder builder;
  v1::TelemetryBatch first;
  AppendReading(Reading(1000, 5), 1, &builder, &first);
  ASSERT_EQ(first.entities_size(), 3);
  EXPECT_EQ(first.entities(0).scope(), v1::SCOPE_PORT);
  EXPECT_EQ(first.entities(0).entity(), "z1-rtsw01/Ethernet12");
  EXPECT_EQ(first.entities(1).scope(), v1::SCOPE_QUEUE);
  EXPECT_EQ(first.entities(1).samples(0).queue(), 3u);
  EXPECT_EQ(first.entities(2).entity(), "z1-rtsw01/ingress_lossless_pool");
  EXPECT_EQ(first.health().skipped_values(), 2u);

  v1::TelemetryBatch second;
  AppendReading(Reading(5000, 9), 2, &builder, &second);
  const auto& port = second.entities(0);
  for (const auto& sample : port.samples()) {
    if (sample.counter() == "rx_bytes") {
      EXPECT_EQ(sample.delta(), 4000u);
    }
    if (sample.counter() == "pfc_rx_pause_frames") {
      EXPECT_EQ(sample.prio(), 3u);
      EXPECT_EQ(sample.delta(), 4u);
    }
    if (sample.counter() == "link_up") {
      EXPECT_FALSE(sample.has_delta());
    }
  }
}

// The fast path sends only the pause counters, only of ports where one
// moved, with deltas chained to the full poll's.
TEST(AppendFastReading, OnlyThePauseCountersOfPortsWhereOneMoved) {
  BatchBuilder builder;
  v1::TelemetryBatch full;
  SwitchReading reading = Reading(1000, 5);
  reading.ports["Ethernet16"] = reading.ports["Ethernet12"];
  AppendReading(reading, 1'000'000, &builder, &full);

  v1::TelemetryBatch quiet;
  reading.ports["Ethernet12"].counters["rx_bytes"] = 9000;  // not a fast-path counter
  AppendFastReading(reading, 1'100'000, 1'000'000, &builder, &quiet);
  EXPECT_EQ(quiet.entities_size(), 0) << "no pause counter moved";

  v1::TelemetryBatch moved;
  reading.ports["Ethernet16"].per_prio["pfc_rx_pause_frames"][3] = 12;
  AppendFastReading(reading, 1'200'000, 1'100'000, &builder, &moved);
  ASSERT_EQ(moved.entities_size(), 1);
  const v1::EntitySamples& port = moved.entities(0);
  EXPECT_EQ(port.entity(), "z1-rtsw01/Ethernet16");
  EXPECT_TRUE(port.fast());
  EXPECT_EQ(port.previous_us(), 1'100'000);
  ASSERT_EQ(port.samples_size(), 1) << "only pfc_rx_pause_frames{3}: no rx_bytes, link_up or queues";
  EXPECT_EQ(port.samples(0).counter(), "pfc_rx_pause_frames");
  EXPECT_EQ(port.samples(0).delta(), 7u);
}

TEST(ReadingToJson, HasTheDocumentedShape) {
  nlohmann::json json = ReadingToJson(Reading(1, 2));
  EXPECT_EQ(json["switch"], "z1-rtsw01");
  EXPECT_EQ(json["ports"][0]["port"], "Ethernet12");
  EXPECT_EQ(json["ports"][0]["counters"]["pfc_rx_pause_frames"]["3"], 2);
  EXPECT_EQ(json["ports"][0]["queues"]["3"]["queue_depth_bytes"], 8192);
  EXPECT_EQ(json["health"]["unknown_keys"], 2);
}

}  // namespace
}  // namespace rocefab::switchd
