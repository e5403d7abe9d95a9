#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "common/strings.h"

extern char** environ;

namespace rocefab {

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Spawn(Options options) {
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
  if (options.argv.empty()) return absl::InvalidArgumentError("no program to run");

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string out = options.stdout_path.empty() ? "/dev/null" : options.stdout_path;
  const std::string err = options.stderr_path.empty() ? "/dev/null" : options.stderr_path;
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::unique_ptr<Subprocess> process(new Subprocess());
  const int rc = posix_spawn(&process->pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    process->pid_ = -1;
    return absl::UnavailableError(StrCat("cannot start ", argv[0], ": ", std::strerror(rc)));
  }
  return process;
}

Subprocess::Subprocess(Options options) {
  auto spawned = Spawn(std::move(options));
  if (!spawned.ok()) throw std::runtime_error(std::string(spawned.status().message()));
  pid_ = (*spawned)->pid_;
  (*spawned)->pid_ = -1;
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !Exited()) {
    ::kill(pid_, SIGKILL);
    Wait();
  }
}

void Subprocess::Signal(int signal) {
  if (pid_ > 0 && !exited_) ::kill(pid_, signal);
}

int Subprocess::ExitCode() const {
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
  return -1;
}

int Subprocess::Wait() {
  if (!exited_ && pid_ > 0) {
    while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
    }
    exited_ = true;
  }
  return ExitCode();
}

bool Subprocess::Exited() {
  if (exited_ || pid_ <= 0) return true;
  const pid_t r = ::waitpid(pid_, &status_, WNOHANG);
  if (r == pid_) exited_ = true;
  return exited_;
}

std::optional<int> Subprocess::WaitFor(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // waitpid has no timeout; poll its non-blocking form until the deadline.
  while (!Exited()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ExitCode();
}

NotifySocket::NotifySocket(std::string path) {
  // sd_notify(3) takes NOTIFY_SOCKET only as an absolute path (or an
  // abstract name): a relative one, as a relative run directory gives,
  // would never hear the daemon.
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  path_ = ec ? std::move(path) : absolute.lexically_normal().string();
  sockaddr_un addr{};
  if (path_.size() >= sizeof(addr.sun_path)) return;
  ::unlink(path_.c_str());
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

NotifySocket::~NotifySocket() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
}

std::optional<std::string> NotifySocket::WaitReady(std::chrono::milliseconds timeout) {
  if (fd_ < 0) return std::nullopt;
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

std::string StatusField(const std::string& status, const std::string& key) {
  const std::string needle = key + "=";
  size_t at = status.find(needle);
  if (at == std::string::npos) return "";
  at += needle.size();
  return status.substr(at, status.find(' ', at) - at);
}

}  // namespace rocefab
