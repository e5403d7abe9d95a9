#pragma once
// Child processes and the systemd notify protocol, for programs that
// supervise rocefab daemons (the lab, tests). Not thread-safe per object.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rocefab {

// A child process; its stdout and stderr go to files (appended).
class Subprocess final {
 public:
  struct Options {
    std::vector<std::string> argv;           // argv[0] is the executable's path
    std::map<std::string, std::string> env;  // added to (or replacing in) the parent's environment
    std::string stdout_path;                 // default /dev/null
    std::string stderr_path;                 // default /dev/null
  };
  // Throws std::runtime_error when the process cannot be spawned; use Spawn
  // for a status instead.
  explicit Subprocess(Options options);
  static absl::StatusOr<std::unique_ptr<Subprocess>> Spawn(Options options);
  ~Subprocess();  // SIGKILLs and reaps if still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signal);
  // Waits for exit; returns the exit code, or 128+signal.
  int Wait();
  // Waits up to `timeout`; nullopt if still running.
  std::optional<int> WaitFor(std::chrono::milliseconds timeout);
  // True once the process has exited (reaps it without blocking).
  bool Exited();

 private:
  Subprocess() = default;
  int ExitCode() const;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

// Receives sd_notify messages the way systemd does: a datagram socket whose
// path a child gets as NOTIFY_SOCKET. Waiting for READY=1 is how a supervisor
// knows a daemon is up, without sleeping.
class NotifySocket final {
 public:
  // Binds a socket at `path` (removed on destruction).
  explicit NotifySocket(std::string path);
  ~NotifySocket();
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;
  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // Blocks until a message containing READY=1 arrives; returns its STATUS=
  // value, or nullopt after `timeout`.
  std::optional<std::string> WaitReady(std::chrono::milliseconds timeout);

 private:
  std::string path_;
  int fd_ = -1;
};

// "listening grpc=127.0.0.1:4567 metrics=..." -> the value of `key`, or "".
std::string StatusField(const std::string& status, const std::string& key);

}  // namespace rocefab
