#include "common/metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

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
  const std::string hash = testing::BcryptHash("s3cret");
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
  EXPECT_NE(std::string(tls.status().message()).find("cert_file"), std::string::npos) << tls.status();
  testing::WriteFile(dir / "c.pem", "not a certificate\n");
  testing::WriteFile(dir / "k.pem", "not a key\n");
  auto garbage = MetricsServer::Start("127.0.0.1:0", dir / "web2.yaml");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(std::string(garbage.status().message()).find("not a PEM certificate and its key"), std::string::npos)
      << garbage.status();
  testing::WriteFile(dir / "web4.yaml",
                     "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n"
                     "  client_auth_type: RequireAndVerifyClientCert\n");
  auto no_ca = MetricsServer::Start("127.0.0.1:0", dir / "web4.yaml");
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(std::string(no_ca.status().message()).find("needs client_ca_file"), std::string::npos);
  testing::WriteFile(dir / "web3.yaml", "http_server_config:\n  http2: true\n");
  auto unknown = MetricsServer::Start("127.0.0.1:0", dir / "web3.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(std::string(unknown.status().message()).find("http_server_config"), std::string::npos);
}

// HTTPS as exporter-toolkit serves it: the server's certificate, and with
// RequireAndVerifyClientCert only clients with a certificate from the CA.
TEST(MetricsServer, ServesHttpsAndAsksForAClientCertificateWhenTold) {
  testing::DevCa ca({"collector-z1", "prometheus"});
  testing::DevCa other({"prometheus"});
  testing::TempDir dir;
  testing::WriteFile(dir / "web.yaml", "tls_server_config:\n  cert_file: " + ca.cert("collector-z1") +
                                           "\n  key_file: " + ca.key("collector-z1") + "\n  client_ca_file: " +
                                           ca.ca() + "\n  client_auth_type: RequireAndVerifyClientCert\n");
  auto server = MetricsServer::Start("127.0.0.1:0", dir / "web.yaml");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_STREQ((*server)->scheme(), "https");
  auto registry = std::make_shared<prometheus::Registry>();
  AddCounter(*registry, "rocefab_test_events_total", "events").Increment(3);
  (*server)->Register(registry);
  const std::string url = "https://" + (*server)->bound_address() + "/metrics";
  auto get = [&](const std::string& ca_file, const std::string& cert, const std::string& key) {
    HttpPostOptions options;
    options.ca_file = ca_file;
    options.cert_file = cert;
    options.key_file = key;
    options.max_body_bytes = 1 << 16;
    return HttpGet(url, options);
  };
  const HttpResult ok = get(ca.ca(), ca.cert("prometheus"), ca.key("prometheus"));
  ASSERT_EQ(ok.status, 200) << ok.error;
  EXPECT_NE(ok.body.find("rocefab_test_events_total 3"), std::string::npos) << ok.body;
  EXPECT_EQ(get(ca.ca(), "", "").status, 403) << "no client certificate";
  EXPECT_NE(get(ca.ca(), other.cert("prometheus"), other.key("prometheus")).status, 200)
      << "a client certificate from another CA";
  const HttpResult wrong_ca = get(other.ca(), ca.cert("prometheus"), ca.key("prometheus"));
  EXPECT_EQ(wrong_ca.status, 0) << "the client must not trust a server its CA did not sign";
  EXPECT_FALSE(wrong_ca.error.empty());
  // Plain HTTP to the TLS port gets no metrics.
  HttpPostOptions plain;
  EXPECT_NE(HttpGet("http://" + (*server)->bound_address() + "/metrics", plain).status, 200);
}

// A rotated certificate is served without a restart, as gRPC's are.
TEST(MetricsServer, ARotatedCertificateIsServedWithoutARestart) {
  testing::DevCa ca({"collector-z1", "collector-new"});
  testing::TempDir dir;
  std::filesystem::copy_file(ca.cert("collector-z1"), dir / "server.pem");
  std::filesystem::copy_file(ca.key("collector-z1"), dir / "server.key");
  testing::WriteFile(dir / "web.yaml", "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n");
  auto server = MetricsServer::Start("127.0.0.1:0", dir / "web.yaml", std::chrono::milliseconds(50));
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string url = "https://" + (*server)->bound_address() + "/metrics";
  // The name the server's certificate carries, as the client saw it.
  auto served_name = [&] {
    std::string out;
    testing::RunCommand({"/bin/sh", "-c",
                         "openssl s_client -connect " + (*server)->bound_address() +
                             " </dev/null 2>/dev/null | openssl x509 -noout -subject"},
                        &out);
    return out;
  };
  EXPECT_NE(served_name().find("collector-z1"), std::string::npos) << served_name();
  // Half a rotation (a key that does not match) keeps the old certificate.
  std::filesystem::copy_file(ca.cert("collector-new"), dir / "server.pem",
                             std::filesystem::copy_options::overwrite_existing);
  HttpPostOptions options;
  options.ca_file = ca.ca();
  options.max_body_bytes = 1 << 16;
  ASSERT_TRUE(testing::WaitFor(
      [&] { return HttpGet(url, options).body.find("rocefab_metrics_tls_reloads_total{result=\"error\"}") !=
                   std::string::npos; },
      std::chrono::seconds(10)));
  EXPECT_NE(served_name().find("collector-z1"), std::string::npos);
  std::filesystem::copy_file(ca.key("collector-new"), dir / "server.key",
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_TRUE(testing::WaitFor([&] { return served_name().find("collector-new") != std::string::npos; },
                               std::chrono::seconds(10)));
  const HttpResult after = HttpGet(url, options);
  EXPECT_EQ(after.status, 200) << after.error;
  EXPECT_NE(after.body.find("rocefab_metrics_tls_reloads_total{result=\"ok\"} 1"), std::string::npos)
      << after.body;
}

TEST(MetricsServer, OnlyGetMetricsIsServed) {
  auto server = MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  HttpPostOptions options;
  EXPECT_EQ(HttpGet("http://" + (*server)->bound_address() + "/other", options).status, 404);
  EXPECT_EQ(HttpPost("http://" + (*server)->bound_address() + "/metrics", "x", options).status, 405);
}

TEST(MetricsServer, MalformedAddress) {
  EXPECT_FALSE(MetricsServer::Start("9411").ok());
}

}  // namespace
}  // namespace rocefab
