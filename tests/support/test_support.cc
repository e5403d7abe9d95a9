#include "tests/support/test_support.h"

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

NotifySocket::NotifySocket() {
  path_ = dir_ / "notify.sock";
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error("cannot bind notify socket " + path_);
}

NotifySocket::~NotifySocket() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<std::string> NotifySocket::WaitReady(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf - 1, 0);
    if (n <= 0) continue;
    std::string message(buf, static_cast<size_t>(n));
    if (message.find("READY=1") == std::string::npos) continue;
    std::string status;
    if (size_t at = message.find("STATUS="); at != std::string::npos) {
      status = message.substr(at + 7);
      if (size_t nl = status.find('\n'); nl != std::string::npos) status.resize(nl);
    }
    return status;
  }
}

Subprocess::Subprocess(Options options) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (!options.env.count(name)) env_strings.push_back(entry);
  }
  for (const auto& [name, value] : options.env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : options.argv) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string out = options.stdout_path.empty() ? "/dev/null" : options.stdout_path;
  const std::string err = options.stderr_path.empty() ? "/dev/null" : options.stderr_path;
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error(std::string("posix_spawn ") + argv[0] + ": " + std::strerror(rc));
}

Subprocess::~Subprocess() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    Wait();
  }
}

void Subprocess::Signal(int signal) {
  if (running()) ::kill(pid_, signal);
}

int Subprocess::Wait() {
  if (!exited_) {
    while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
    }
    exited_ = true;
  }
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
  return -1;
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

std::string StatusField(const std::string& status, const std::string& key) {
  const std::string needle = key + "=";
  size_t at = status.find(needle);
  if (at == std::string::npos) return "";
  at += needle.size();
  return status.substr(at, status.find(' ', at) - at);
}

}  // namespace rocefab::testing
