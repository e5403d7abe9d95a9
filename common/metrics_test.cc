#include "common/metrics.h"

#include <crypt.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "common/http_client.h"
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

// As node_exporter's --web.config.file: basic auth against a bcrypt hash.
TEST(MetricsServer, WebConfigAsksForBasicAuth) {
  testing::TempDir dir;
  char* salt = crypt_gensalt_ra("$2b$", 10, nullptr, 0);
  ASSERT_NE(salt, nullptr);
  crypt_data data{};
  const std::string hash = crypt_r("s3cret", salt, &data);
  free(salt);
  ASSERT_TRUE(hash.starts_with("$2b$10$")) << hash;
  testing::WriteFile(dir / "web.yaml", "basic_auth_users:\n  prometheus: '" + hash + "'\n");
  auto server = MetricsServer::Start("127.0.0.1:0", dir / "web.yaml");
  ASSERT_TRUE(server.ok()) << server.status();
  auto registry = std::make_shared<prometheus::Registry>();
  AddCounter(*registry, "rocefab_test_events_total", "events").Increment(3);
  (*server)->Register(registry);
  auto get = [&](const std::string& credentials) {
    HttpPostOptions options;
    options.basic_auth = credentials;
    options.max_body_bytes = 1 << 16;
    return HttpGet("http://" + (*server)->bound_address() + "/metrics", options);
  };
  const HttpResult ok = get("prometheus:s3cret");
  EXPECT_EQ(ok.status, 200) << ok.error;
  EXPECT_NE(ok.body.find("rocefab_test_events_total 3"), std::string::npos) << ok.body;
  EXPECT_EQ(get("prometheus:wrong").status, 401);
  EXPECT_EQ(get("").status, 401) << "no credentials";
}

TEST(MetricsServer, AWebConfigThatIsWrongIsAClearError) {
  testing::TempDir dir;
  testing::WriteFile(dir / "web.yaml", "basic_auth_users:\n  prometheus: plaintext-password\n");
  auto server = MetricsServer::Start("127.0.0.1:0", dir / "web.yaml");
  ASSERT_FALSE(server.ok());
  EXPECT_NE(std::string(server.status().message()).find("not a bcrypt hash"), std::string::npos);
  testing::WriteFile(dir / "web2.yaml", "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n");
  auto tls = MetricsServer::Start("127.0.0.1:0", dir / "web2.yaml");
  ASSERT_FALSE(tls.ok());
  EXPECT_NE(std::string(tls.status().message()).find("terminate TLS in front"), std::string::npos);
  testing::WriteFile(dir / "web3.yaml", "http_server_config:\n  http2: true\n");
  auto unknown = MetricsServer::Start("127.0.0.1:0", dir / "web3.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(std::string(unknown.status().message()).find("http_server_config"), std::string::npos);
}

TEST(MetricsServer, MalformedAddress) {
  EXPECT_FALSE(MetricsServer::Start("9411").ok());
}

}  // namespace
}  // namespace rocefab
