// The shipper against no collector at all; tests with a real collector
// service live in collector/telemetry_service_test.cc.
#include "common/telemetry_shipper.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace rocefab {
namespace {

TEST(NewBootId, IsAVersion4Uuid) {
  std::set<std::string> seen;
  const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  for (int i = 0; i < 100; ++i) {
    std::string id = NewBootId();
    EXPECT_TRUE(std::regex_match(id, uuid)) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(TelemetryShipper, StampsSequenceAndBoundsTheQueueWhileUnreachable) {
  TelemetryShipper::Options options;
  options.target = "127.0.0.1:1";  // nothing listens on port 1
  options.agent_id = "z1-r01-h1";
  options.max_pending = 5;
  options.initial_backoff_us = 1000;
  options.max_backoff_us = 2000;
  TelemetryShipper shipper(options, SystemClock::Instance());
  ASSERT_TRUE(shipper.Start().ok());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(shipper.Enqueue(v1::TelemetryBatch{}), static_cast<uint64_t>(i + 1));
  auto stats = shipper.stats();
  EXPECT_EQ(stats.enqueued, 8u);
  EXPECT_EQ(stats.last_seq, 8u);
  EXPECT_EQ(stats.pending, 5u);
  EXPECT_EQ(stats.dropped_overflow, 3u);
  EXPECT_EQ(stats.max_acked_seq, 0u);
  EXPECT_FALSE(shipper.Flush(50'000));
  shipper.Stop();
}

TEST(TelemetryShipper, BadTlsFailsStart) {
  TelemetryShipper::Options options;
  options.target = "127.0.0.1:1";
  options.agent_id = "h";
  options.tls.set_ca("/nonexistent.pem");
  TelemetryShipper shipper(options, SystemClock::Instance());
  EXPECT_FALSE(shipper.Start().ok());
}

}  // namespace
}  // namespace rocefab
