#include "common/daemon_setup.h"

#include <iostream>

#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/config_loader.h"
#include "common/duration.h"
#include "common/log.h"
#include "common/strings.h"

namespace rocefab {

void SetUpDaemonProcess() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

absl::Status ApplyLogLevel(const std::string& level) {
  log::Level parsed;
  if (!log::ParseLevel(level, &parsed))
    return absl::InvalidArgumentError(
        StrCat("--log-level: unknown level '", level, "' (debug, info, warning or error)"));
  log::SetMinLevel(parsed);
  return absl::OkStatus();
}

void AddSecurityFlags(CLI::App& app, SecurityFlags* flags, bool serves_rpcs) {
  app.add_option("--tls-ca", flags->ca, "CA file (PEM) that signs every peer: mutual TLS");
  app.add_option("--tls-cert", flags->cert, "this daemon's certificate (PEM); its CN is its identity");
  app.add_option("--tls-key", flags->key, "this daemon's private key (PEM)");
  app.add_flag("--insecure", flags->insecure,
               "plaintext, with no authentication or authorization (tests on a closed host only)");
  if (serves_rpcs)
    app.add_option("--grant", flags->grants,
                   "ROLE=IDENTITY[,IDENTITY...]: add identities to a role (viewer, operator, admin, "
                   "controller, agent); repeatable, adds to the config's authorization block");
}

absl::Status ResolveSecurity(const SecurityFlags& flags, bool config_has_tls, v1::TlsSettings* tls,
                             v1::AuthorizationConfig* authorization) {
  if (!flags.ca.empty()) tls->set_ca(flags.ca);
  if (!flags.cert.empty()) tls->set_cert(flags.cert);
  if (!flags.key.empty()) tls->set_key(flags.key);
  const bool tls_set = !tls->ca().empty() || !tls->cert().empty() || !tls->key().empty();
  if (tls_set && flags.insecure)
    return absl::InvalidArgumentError("--insecure contradicts the TLS files given; choose one");
  if (!tls_set && !flags.insecure && !config_has_tls)
    return absl::InvalidArgumentError(
        "no TLS configured: give --tls-ca, --tls-cert and --tls-key (or a tls: block), or choose "
        "plaintext explicitly with --insecure or `tls: {}` (docs/security.md)");
  if (!tls_set)
    LOG_WARN("security", "plaintext: peers are not authenticated and every RPC is allowed");
  for (const std::string& grant : flags.grants) {
    const size_t eq = grant.find('=');
    const std::string role = grant.substr(0, eq);
    google::protobuf::RepeatedPtrField<std::string>* list =
        role == "viewer"       ? authorization->mutable_viewer()
        : role == "operator"   ? authorization->mutable_operator_()
        : role == "admin"      ? authorization->mutable_admin()
        : role == "controller" ? authorization->mutable_controller()
        : role == "agent"      ? authorization->mutable_agent()
                               : nullptr;
    if (eq == std::string::npos || list == nullptr || eq + 1 >= grant.size())
      return absl::InvalidArgumentError(StrCat(
          "--grant '", grant, "': expected ROLE=IDENTITY[,IDENTITY...] with ROLE one of viewer, "
          "operator, admin, controller, agent"));
    for (absl::string_view identity : absl::StrSplit(grant.substr(eq + 1), ',', absl::SkipEmpty()))
      list->Add(std::string(identity));
  }
  return absl::OkStatus();
}

absl::Status LoadConfigIfGiven(const std::string& path, google::protobuf::Message* config) {
  if (path.empty()) return absl::OkStatus();
  return LoadYamlConfigFile(path, config);
}

int64_t DurationToUs(const google::protobuf::Duration& duration) {
  return duration.seconds() * 1'000'000 + duration.nanos() / 1000;
}

absl::StatusOr<int64_t> ResolveDurationUs(std::string_view flag_name, bool flag_given,
                                          const std::string& flag_text, bool config_has,
                                          const google::protobuf::Duration& config_value) {
  if (config_has && !flag_given) return DurationToUs(config_value);
  auto parsed = ParseDurationUs(flag_text);
  if (!parsed.ok())
    return absl::InvalidArgumentError(StrCat(flag_name, ": ", parsed.status().message()));
  return *parsed;
}

absl::StatusOr<int64_t> ResolveFastIntervalUs(bool flag_given, const std::string& flag_text, bool config_has,
                                              const google::protobuf::Duration& config_value,
                                              int64_t interval_us) {
  auto fast = ResolveDurationUs("--fast-interval", flag_given, flag_text, config_has, config_value);
  if (!fast.ok() || *fast == 0) return fast;
  absl::Status problem;
  if (*fast < 10'000)
    problem = absl::InvalidArgumentError("--fast-interval must be at least 10ms (or 0s: off)");
  else if (*fast >= interval_us || interval_us % *fast != 0)
    problem = absl::InvalidArgumentError(StrCat("--fast-interval (", FormatDurationUs(*fast),
                                                ") must be shorter than --interval (", FormatDurationUs(interval_us),
                                                ") and divide it"));
  if (problem.ok()) return fast;
  if (flag_given || config_has) return problem;
  LOG_INFO("agent", "the PFC fast path is off: ", problem.message());
  return 0;
}

int ParseFlags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return -1;
}

int UsageError(std::string_view program, const absl::Status& status) {
  std::cerr << program << ": " << status.message() << "\n";
  return 2;
}

}  // namespace rocefab

namespace rocefab {

void AddMetricsFlags(CLI::App& app, MetricsFlags* flags, const std::string& listen_help) {
  app.add_option("--metrics-listen", flags->listen, listen_help)->capture_default_str();
  app.add_option("--metrics-web-config", flags->web_config,
                 "TLS and basic auth for /metrics: an exporter-toolkit web config file "
                 "(tls_server_config, basic_auth_users), as node_exporter's --web.config.file")
      ->check(CLI::ExistingFile);
}

absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetrics(
    const std::string& listen, const std::string& web_config, const v1::TlsSettings& tls,
    const std::vector<std::shared_ptr<prometheus::Collectable>>& collectables) {
  if (listen.empty()) return std::unique_ptr<MetricsServer>();
  const std::chrono::seconds reload(
      tls.has_reload_interval() && tls.reload_interval().seconds() > 0 ? tls.reload_interval().seconds() : 60);
  auto server = MetricsServer::Start(listen, web_config, reload);
  if (!server.ok()) return server.status();
  for (const auto& collectable : collectables) (*server)->Register(collectable);
  return server;
}

}  // namespace rocefab
