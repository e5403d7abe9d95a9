#include "common/grpc_util.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "rocefab/v1/query.grpc.pb.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

TEST(SplitHostPort, ParsesAndRejects) {
  std::string host;
  int port = -1;
  ASSERT_TRUE(SplitHostPort("127.0.0.1:9410", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 9410);
  ASSERT_TRUE(SplitHostPort("[::1]:0", &host, &port));
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 0);
  for (const char* bad : {"", "host", ":80", "host:", "host:70000", "host:8x", "[::1:80"})
    EXPECT_FALSE(SplitHostPort(bad, &host, &port)) << bad;
}

TEST(Tls, PartialSettingsAreAnError) {
  v1::TlsSettings tls;
  EXPECT_TRUE(ValidateTls(tls).ok());
  EXPECT_FALSE(TlsEnabled(tls));
  tls.set_ca("/etc/ca.pem");
  absl::Status status = ValidateTls(tls);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("all of ca, cert and key"), std::string::npos);
  tls.set_cert("/nonexistent/cert.pem");
  tls.set_key("/nonexistent/key.pem");
  status = ValidateTls(tls);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("cannot read"), std::string::npos);
  EXPECT_FALSE(MakeServerCredentials(tls).ok());
  EXPECT_FALSE(MakeChannel("127.0.0.1:1", tls).ok());
}

// A Query service that answers ListAgents with a marker, to prove a call went through.
class MarkerService final : public v1::Query::Service {
  grpc::Status ListAgents(grpc::ServerContext*, const v1::ListAgentsRequest*,
                          v1::ListAgentsResponse* response) override {
    response->set_now_us(4711);
    return grpc::Status::OK;
  }
};

grpc::Status Call(const std::string& target, const v1::TlsSettings& tls, int64_t* now_us) {
  auto channel = MakeChannel(target, tls);
  if (!channel.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad channel");
  auto stub = v1::Query::NewStub(*channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListAgentsResponse response;
  grpc::Status status = stub->ListAgents(&context, {}, &response);
  *now_us = response.now_us();
  return status;
}

TEST(GrpcServer, PlaintextOnEphemeralPort) {
  MarkerService service;
  auto server = StartGrpcServer("127.0.0.1:0", {}, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_NE(server->bound_address, "127.0.0.1:0");
  int64_t now_us = 0;
  EXPECT_TRUE(Call(server->bound_address, {}, &now_us).ok());
  EXPECT_EQ(now_us, 4711);
  server->server->Shutdown();
}

TEST(GrpcServer, BadListenAddressIsAClearError) {
  MarkerService service;
  auto server = StartGrpcServer("no-port", {}, {&service});
  ASSERT_FALSE(server.ok());
  EXPECT_NE(std::string(server.status().message()).find("not host:port"), std::string::npos);
}

// Makes a CA and server and client certificates with the openssl command.
class MutualTls : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string out, err;
    if (testing::RunCommand({"/usr/bin/openssl", "version"}, &out, &err) != 0)
      GTEST_SKIP() << "openssl command not available to make test certificates";
    const std::string d = dir_.path();
    const std::string script =
        "set -e; cd " + d +
        "; openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
        "-subj /CN=rocefab-test-ca 2>/dev/null;"
        "for n in server client; do "
        "openssl req -newkey rsa:2048 -nodes -keyout $n.key -out $n.csr -subj /CN=localhost "
        "2>/dev/null; printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > $n.ext; "
        "openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $n.pem "
        "-days 2 -extfile $n.ext 2>/dev/null; done";
    ASSERT_EQ(testing::RunCommand({"/bin/sh", "-c", script}, &out, &err), 0) << err;
    server_tls_.set_ca(dir_ / "ca.pem");
    server_tls_.set_cert(dir_ / "server.pem");
    server_tls_.set_key(dir_ / "server.key");
    client_tls_.set_ca(dir_ / "ca.pem");
    client_tls_.set_cert(dir_ / "client.pem");
    client_tls_.set_key(dir_ / "client.key");
  }
  testing::TempDir dir_;
  v1::TlsSettings server_tls_, client_tls_;
};

TEST_F(MutualTls, ClientWithCertificateIsServed) {
  MarkerService service;
  auto server = StartGrpcServer("127.0.0.1:0", server_tls_, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  int64_t now_us = 0;
  grpc::Status status = Call(server->bound_address, client_tls_, &now_us);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(now_us, 4711);
  server->server->Shutdown();
}

TEST_F(MutualTls, PlaintextClientIsRefused) {
  MarkerService service;
  auto server = StartGrpcServer("127.0.0.1:0", server_tls_, {&service});
  ASSERT_TRUE(server.ok());
  int64_t now_us = 0;
  EXPECT_FALSE(Call(server->bound_address, {}, &now_us).ok());
  EXPECT_EQ(now_us, 0);
  server->server->Shutdown();
}

TEST_F(MutualTls, ClientFromAnotherCaIsRefused) {
  // A client certificate the server's CA did not sign.
  std::string out, err;
  const std::string d = dir_.path();
  ASSERT_EQ(testing::RunCommand(
                {"/bin/sh", "-c",
                 "cd " + d +
                     " && openssl req -x509 -newkey rsa:2048 -nodes -keyout rogue.key -out "
                     "rogue.pem -days 2 -subj /CN=rogue 2>/dev/null"},
                &out, &err),
            0);
  MarkerService service;
  auto server = StartGrpcServer("127.0.0.1:0", server_tls_, {&service});
  ASSERT_TRUE(server.ok());
  v1::TlsSettings rogue = client_tls_;
  rogue.set_cert(dir_ / "rogue.pem");
  rogue.set_key(dir_ / "rogue.key");
  int64_t now_us = 0;
  EXPECT_FALSE(Call(server->bound_address, rogue, &now_us).ok());
  server->server->Shutdown();
}

// The server's certificate is rotated on disk while it runs: new
// connections get the new one within reload_interval, without a restart.
TEST(TlsReload, ARotatedServerCertificateIsServedWithoutARestart) {
  testing::DevCa ca({"alpha", "beta", "client"});
  testing::TempDir live;
  auto install = [&](const std::string& identity) {
    // Written aside and renamed, as certificate tooling does.
    testing::WriteFile(live / "server.pem.new", testing::ReadFile(ca.cert(identity)));
    testing::WriteFile(live / "server.key.new", testing::ReadFile(ca.key(identity)));
    std::rename((live / "server.key.new").c_str(), (live / "server.key").c_str());
    std::rename((live / "server.pem.new").c_str(), (live / "server.pem").c_str());
  };
  install("alpha");
  v1::TlsSettings server_tls;
  server_tls.set_ca(ca.ca());
  server_tls.set_cert(live / "server.pem");
  server_tls.set_key(live / "server.key");
  server_tls.mutable_reload_interval()->set_seconds(1);
  MarkerService service;
  auto server = StartGrpcServer("127.0.0.1:0", server_tls, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  v1::TlsSettings client_tls;
  client_tls.set_ca(ca.ca());
  client_tls.set_cert(ca.cert("client"));
  client_tls.set_key(ca.key("client"));
  // The server's certificate name, as a new connection sees it.
  auto served_name = [&]() -> std::string {
    auto channel = MakeChannel(server->bound_address, client_tls);
    if (!channel.ok()) return "";
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListAgentsResponse response;
    if (!v1::Query::NewStub(*channel)->ListAgents(&context, {}, &response).ok()) return "";
    for (const auto& name : context.auth_context()->FindPropertyValues("x509_common_name"))
      return std::string(name.data(), name.size());
    return "";
  };
  EXPECT_EQ(served_name(), "alpha");
  install("beta");
  EXPECT_TRUE(testing::WaitFor([&] { return served_name() == "beta"; }, std::chrono::seconds(10)));
  server->server->Shutdown();
}

}  // namespace
}  // namespace rocefab
