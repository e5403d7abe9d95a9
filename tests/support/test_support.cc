#include "tests/support/test_support.h"

#include <crypt.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace rocefab::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/rocefab-test-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void CopyTree(const std::string& from, const std::string& to) {
  std::filesystem::create_directories(to);
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive |
                                      std::filesystem::copy_options::overwrite_existing);
}

std::string BinDir() { return ROCEFAB_BIN_DIR; }
std::string FixturesDir() { return ROCEFAB_FIXTURES_DIR; }

Daemon StartDaemon(std::vector<std::string> argv, const std::string& log_path,
                   std::chrono::seconds timeout) {
  NotifySocket ready;
  Daemon daemon;
  daemon.process = std::make_unique<Subprocess>(
      Subprocess::Options{std::move(argv), {{"NOTIFY_SOCKET", ready.path()}}, "", log_path});
  daemon.status = ready.WaitReady(timeout).value_or("");
  return daemon;
}

void AddRoceQosItems(v1::SwitchConfig* config) {
  auto qos = [&](const char* key) {
    auto* item = config->add_items();
    item->set_key(key);
    return item->mutable_qos()->mutable_qos();
  };
  auto* dscp = qos("qos/dscp")->add_dscp_to_tc();
  dscp->set_dscp(26);
  dscp->set_tc(3);
  auto* pfc = qos("qos/pfc");
  pfc->add_pfc_priorities(3);
  pfc->add_lossless_tcs(3);
  qos("qos/ets")->set_strict_priority_tc(6);
  auto* ecn = qos("qos/ecn")->add_ecn();
  ecn->set_tc(3);
  ecn->set_min_bytes(150'000);
  ecn->set_max_bytes(1'500'000);
  ecn->set_probability(0.1);
  auto* wd = qos("qos/pfc_watchdog")->mutable_pfc_watchdog();
  wd->set_detect_ms(200);
  wd->set_restore_ms(400);
  wd->set_action("drop");
}

RedisServer::RedisServer() : socket_(dir_ / "redis.sock") { Start(); }

void RedisServer::Start() {
  error_.clear();
  if (access("/usr/bin/redis-server", X_OK) != 0) {
    error_ = "redis-server is not installed (Debian package redis-server)";
    return;
  }
  // Redis sends READY=1 in a message of its own, without a STATUS=.
  NotifySocket ready;
  process_ = std::make_unique<Subprocess>(Subprocess::Options{
      {"/usr/bin/redis-server", "--port", "0", "--unixsocket", socket_, "--save", "", "--appendonly", "no",
       "--supervised", "systemd", "--databases", "16", "--dir", dir_.path(), "--logfile", dir_ / "redis.log"},
      {{"NOTIFY_SOCKET", ready.path()}},
      "",
      dir_ / "redis.stderr"});
  if (!ready.WaitReady(std::chrono::seconds(20)).has_value())
    error_ = "redis-server did not become ready: " + ReadFile(dir_ / "redis.log");
}

void RedisServer::Stop() {
  if (!process_) return;
  process_->Signal(SIGTERM);
  process_->Wait();
  process_.reset();
}

int RunCommand(const std::vector<std::string>& argv, std::string* out, std::string* err) {
  TempDir dir;
  int code;
  {
    Subprocess process({argv, {}, dir / "out", dir / "err"});
    code = process.Wait();
  }
  if (out) *out = ReadFile(dir / "out");
  if (err) *err = ReadFile(dir / "err");
  return code;
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

std::optional<std::string> HttpGet(const std::string& host_port, const std::string& target) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  using boost::asio::ip::tcp;
  try {
    const size_t colon = host_port.rfind(':');
    boost::asio::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(10));
    stream.connect(resolver.resolve(host_port.substr(0, colon), host_port.substr(colon + 1)));
    http::request<http::string_body> request{http::verb::get, target, 11};
    request.set(http::field::host, host_port);
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    if (response.result() != http::status::ok) return std::nullopt;
    return response.body();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

int FreeTcpPort() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(
      io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  return acceptor.local_endpoint().port();
}

DevCa::DevCa(const std::vector<std::string>& identities) {
  if (!identities.empty()) Issue(identities);
}

void DevCa::Issue(const std::vector<std::string>& identities) {
  std::vector<std::string> argv = {BinDir() + "/rocefab-dev-ca", dir_.path()};
  argv.insert(argv.end(), identities.begin(), identities.end());
  std::string out, err;
  if (RunCommand(argv, &out, &err) != 0) {
    std::fprintf(stderr, "rocefab-dev-ca failed: %s\n", err.c_str());
    std::abort();
  }
}

std::vector<std::string> DevCa::Flags(const std::string& identity) const {
  return {"--tls-ca", ca(), "--tls-cert", cert(identity), "--tls-key", key(identity)};
}

std::string BcryptHash(const std::string& password) {
  char* salt = crypt_gensalt_ra("$2b$", 10, nullptr, 0);
  if (salt == nullptr) return "";
  crypt_data data{};
  const char* hash = crypt_r(password.c_str(), salt, &data);
  std::string out = hash != nullptr && hash[0] != '*' ? hash : "";
  free(salt);
  return out;
}

std::vector<std::string> With(std::vector<std::string> argv, const std::vector<std::string>& extra) {
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

}  // namespace rocefab::testing
