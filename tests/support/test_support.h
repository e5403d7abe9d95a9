#pragma once
// Helpers for tests that run real processes, files and sockets.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/process.h"
#include "rocefab/v1/control.pb.h"

namespace rocefab::testing {

// A topology YAML: two racks of one host (one NIC) each, their RTSWs
// joined by one CTSW.
inline constexpr const char* kTwoRacksOneSpine = R"yaml(
switches:
  - {name: z1-rtsw01, role: rtsw, zone: z1}
  - {name: z1-rtsw02, role: rtsw, zone: z1}
  - {name: z1-ctsw01, role: ctsw, zone: z1}
hosts:
  - {name: z1-r01-h1, zone: z1, rack: 1, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.1.1}]}
  - {name: z1-r02-h1, zone: z1, rack: 2, nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.2.1}]}
links:
  - {a: z1-r01-h1/mlx5_0, b: z1-rtsw01/Ethernet0, speed_gbps: 400}
  - {a: z1-r02-h1/mlx5_0, b: z1-rtsw02/Ethernet0, speed_gbps: 400}
  - {a: z1-rtsw01/Ethernet8, b: z1-ctsw01/Ethernet0, speed_gbps: 400}
  - {a: z1-rtsw02/Ethernet8, b: z1-ctsw01/Ethernet4, speed_gbps: 400}
)yaml";

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

// Process helpers live in common/process.h; tests use them by these names.
using ::rocefab::StatusField;
using ::rocefab::Subprocess;

// A NotifySocket in its own temporary directory.
class NotifySocket final {
 public:
  NotifySocket() : socket_(dir_ / "notify.sock") {}
  const std::string& path() const { return socket_.path(); }
  std::optional<std::string> WaitReady(std::chrono::milliseconds timeout) {
    return socket_.WaitReady(timeout);
  }

 private:
  TempDir dir_;
  ::rocefab::NotifySocket socket_;
};

// A daemon started with NOTIFY_SOCKET, once it said READY=1.
struct Daemon {
  std::unique_ptr<Subprocess> process;
  std::string status;  // its STATUS= line; empty if it never became ready
};
// Starts `argv` (stderr to `log_path`) and waits up to `timeout` for READY=1.
Daemon StartDaemon(std::vector<std::string> argv, const std::string& log_path,
                   std::chrono::seconds timeout = std::chrono::seconds(20));

// A real redis-server (Debian's) on a unix socket in its own directory,
// nothing persisted, ready (it says READY=1 through NOTIFY_SOCKET) when the
// constructor returns. `error()` says why not, when it could not start.
class RedisServer final {
 public:
  RedisServer();
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& socket() const { return socket_; }
  void Stop();   // SIGTERM, and wait
  void Start();  // again, on the same socket (empty: its data is gone)

 private:
  TempDir dir_;
  std::string socket_;
  std::string error_;
  std::unique_ptr<Subprocess> process_;
};

// The QoS items the controller compiles from the lab's policies/ecmp.yaml:
// qos/dscp (DSCP 26 to TC 3), qos/pfc (priority 3 lossless), qos/ets (TC 6
// strict), qos/ecn (TC 3, 150 KB to 1.5 MB, 10%), qos/pfc_watchdog (200 ms,
// 400 ms, drop).
void AddRoceQosItems(v1::SwitchConfig* config);

// A throwaway CA and certificates (rocefab-dev-ca), so tests run the
// daemons with mutual TLS and authorization on, as production does.
class DevCa final {
 public:
  // Issues a certificate for each identity (more can be added later).
  explicit DevCa(const std::vector<std::string>& identities = {});
  void Issue(const std::vector<std::string>& identities);
  // --tls-ca/--tls-cert/--tls-key for `identity`.
  std::vector<std::string> Flags(const std::string& identity) const;
  std::string ca() const { return dir_ / "ca.pem"; }
  std::string cert(const std::string& identity) const { return dir_ / (identity + ".pem"); }
  std::string key(const std::string& identity) const { return dir_ / (identity + ".key"); }
  const std::string& dir() const { return dir_.path(); }

 private:
  TempDir dir_;
};
// `argv` with `extra` appended.
std::vector<std::string> With(std::vector<std::string> argv, const std::vector<std::string>& extra);

// A bcrypt hash of `password` (cost 10), as htpasswd -nBC 10 writes for an
// exporter-toolkit web config; empty if libxcrypt cannot make one.
std::string BcryptHash(const std::string& password);

// Runs a command to completion, capturing stdout. Returns the exit code.
int RunCommand(const std::vector<std::string>& argv, std::string* out, std::string* err = nullptr);

// Polls `condition` until it holds or `timeout` passes: for conditions that
// have no event to wait on (a row appearing in another process's database).
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// A TCP port on 127.0.0.1 that was free a moment ago (for peers that cannot
// listen on port 0 and report it).
int FreeTcpPort();

// HTTP GET with Boost.Beast. Returns the body, or nullopt on failure.
std::optional<std::string> HttpGet(const std::string& host_port, const std::string& target);

}  // namespace rocefab::testing
