#pragma once
// Helpers for tests that run real processes, files and sockets.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rocefab::testing {

// A fresh directory under $TMPDIR, removed with its contents on destruction.
class TempDir final {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& text);
std::string ReadFile(const std::string& path);
void CopyTree(const std::string& from, const std::string& to);

// Where the built daemons live (build/bin).
std::string BinDir();
// The source tree's tests/fixtures.
std::string FixturesDir();

// Receives sd_notify messages the way systemd does: a datagram socket whose
// path a child gets as NOTIFY_SOCKET. Waiting for READY=1 is how tests know a
// daemon is up, with no sleeps.
class NotifySocket final {
 public:
  NotifySocket();
  ~NotifySocket();
  const std::string& path() const { return path_; }
  // Blocks until a message containing READY=1 arrives; returns its STATUS=
  // value, or nullopt after `timeout`.
  std::optional<std::string> WaitReady(std::chrono::milliseconds timeout);

 private:
  TempDir dir_;
  std::string path_;
  int fd_ = -1;
};

// A child process. Its stdout and stderr go to files.
class Subprocess final {
 public:
  struct Options {
    std::vector<std::string> argv;
    std::map<std::string, std::string> env;  // added to the parent's environment
    std::string stdout_path;                 // default: /dev/null
    std::string stderr_path;
  };
  explicit Subprocess(Options options);
  ~Subprocess();  // SIGKILLs and reaps if still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signal);
  // Waits for exit; returns the exit code, or 128+signal.
  int Wait();
  bool running() const { return pid_ > 0 && !exited_; }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

// Runs a command to completion, capturing stdout. Returns the exit code.
int RunCommand(const std::vector<std::string>& argv, std::string* out, std::string* err = nullptr);

// Polls `condition` until it holds or `timeout` passes: for conditions that
// have no event to wait on (a row appearing in another process's database).
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// HTTP GET with Boost.Beast. Returns the body, or nullopt on failure.
std::optional<std::string> HttpGet(const std::string& host_port, const std::string& target);

// "grpc=127.0.0.1:4567 metrics=..." -> value of `key`.
std::string StatusField(const std::string& status, const std::string& key);

}  // namespace rocefab::testing
