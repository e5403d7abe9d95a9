#pragma once
// Start-up steps every rocefab daemon's main() shares: log level, optional
// YAML config file, and flag-or-config durations. Errors come back as
// statuses whose message is ready to print after "<program>: ".

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "common/metrics.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/message.h"
#include "rocefab/v1/config.pb.h"

namespace rocefab {

// First step of every daemon's main(). Turns off absl::Mutex's lock-order
// graph, which builds of absl without NDEBUG (Debian's among them) keep on:
// it takes a global lock on each lock gRPC's own mutexes make, a cost a
// daemon pays on every RPC. The tests keep it, to find lock-order cycles.
void SetUpDaemonProcess();

// Parses and applies --log-level.
absl::Status ApplyLogLevel(const std::string& level);

// Loads `path` into `config` when `path` is not empty; defaults already set
// in `config` stay for keys the file does not name.
absl::Status LoadConfigIfGiven(const std::string& path, google::protobuf::Message* config);

int64_t DurationToUs(const google::protobuf::Duration& duration);

// The duration to use: the flag when it was given on the command line, else
// the config file's value when it has one, else the flag's default text.
absl::StatusOr<int64_t> ResolveDurationUs(std::string_view flag_name, bool flag_given,
                                          const std::string& flag_text, bool config_has,
                                          const google::protobuf::Duration& config_value);

// The agents' PFC fast-path interval (0: off). Given on the command line or
// in the config, it must be 0, or at least 10ms and divide `interval_us`
// while being shorter. Left at its default, it is off (with a log line)
// where it would not fit the interval.
absl::StatusOr<int64_t> ResolveFastIntervalUs(bool flag_given, const std::string& flag_text, bool config_has,
                                              const google::protobuf::Duration& config_value,
                                              int64_t interval_us);

// The TLS and authorization flags every daemon takes (docs/security.md).
struct SecurityFlags {
  std::string ca, cert, key;
  bool insecure = false;
  std::vector<std::string> grants;  // "operator=alice,bob"
};
// Adds --tls-ca, --tls-cert, --tls-key, --insecure and, for a daemon that
// serves RPCs, --grant.
void AddSecurityFlags(CLI::App& app, SecurityFlags* flags, bool serves_rpcs);
// Merges the flags into the config's blocks (flags win) and checks the
// choice is explicit: mutual TLS, or plaintext by --insecure or `tls: {}`.
// Plaintext logs a warning. `config_has_tls` is whether the file had a tls key.
absl::Status ResolveSecurity(const SecurityFlags& flags, bool config_has_tls, v1::TlsSettings* tls,
                             v1::AuthorizationConfig* authorization);

// --metrics-listen and --metrics-web-config, for a daemon that serves
// Prometheus /metrics.
struct MetricsFlags {
  std::string listen;
  std::string web_config;
};
void AddMetricsFlags(CLI::App& app, MetricsFlags* flags, const std::string& listen_help);
// Serves `collectables` on /metrics at `listen` with the exporter-toolkit
// `web_config` (TLS, basic auth), re-reading its certificate every
// tls.reload_interval as the gRPC side does. Null when `listen` is empty.
absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetrics(
    const std::string& listen, const std::string& web_config, const v1::TlsSettings& tls,
    const std::vector<std::shared_ptr<prometheus::Collectable>>& collectables);

// Parses the command line like CLI11_PARSE, but every parse error exits 2
// (help and version exit 0), so systemd's RestartPreventExitStatus=2 covers
// bad flags too. Returns -1 when the program should go on.
int ParseFlags(CLI::App& app, int argc, char** argv);

// Prints "<program>: <message>" to stderr and returns 2, the exit code for
// bad flags or config (systemd units do not restart on it).
int UsageError(std::string_view program, const absl::Status& status);

}  // namespace rocefab
