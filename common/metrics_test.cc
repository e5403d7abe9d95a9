#include "common/metrics.h"

#include <gtest/gtest.h>

#include "tests/support/test_support.h"

namespace rocefab {
namespace {

TEST(MetricsServer, ServesRegisteredMetricsOnEphemeralPort) {
  auto server = MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_NE((*server)->bound_address(), "127.0.0.1:0");
  auto registry = std::make_shared<prometheus::Registry>();
  AddCounter(*registry, "rocefab_test_events_total", "events").Increment(3);
  AddGauge(*registry, "rocefab_test_level", "level").Set(1.5);
  (*server)->Register(registry);
  auto body = testing::HttpGet((*server)->bound_address(), "/metrics");
  ASSERT_TRUE(body.has_value());
  EXPECT_NE(body->find("rocefab_test_events_total 3"), std::string::npos) << *body;
  EXPECT_NE(body->find("rocefab_test_level 1.5"), std::string::npos) << *body;
}

TEST(MetricsServer, TakenPortIsAClearError) {
  auto first = MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(first.ok());
  auto second = MetricsServer::Start((*first)->bound_address());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(std::string(second.status().message()).find("cannot serve /metrics"),
            std::string::npos);
}

TEST(MetricsServer, MalformedAddress) {
  EXPECT_FALSE(MetricsServer::Start("9411").ok());
}

}  // namespace
}  // namespace rocefab
