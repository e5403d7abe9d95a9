#pragma once
// Prometheus exposition. Components declare their metrics in one struct that
// registers on an injected prometheus::Registry (never a global one); the
// daemon's main owns one MetricsServer that serves the registries it is given.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace rocefab {

class MetricsServer final {
 public:
  // Listens on `listen` ("host:port"; port 0 picks one) and serves GET
  // /metrics. `web_config` is the path of an exporter-toolkit web config
  // (v1::WebConfig), as node_exporter's --web.config.file:
  //   - basic_auth_users: users and bcrypt hashes, asked of every request;
  //   - tls_server_config: HTTPS with cert_file and key_file; with
  //     client_auth_type RequireAndVerifyClientCert, a client certificate
  //     signed by client_ca_file is required (403 without one).
  // The three TLS files are re-read every `reload_interval` when they
  // change: new connections get the new certificate, without a restart.
  // Fails with a clear message when the address is taken or malformed, or
  // the file or its certificates are wrong.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen, const std::string& web_config = "",
      std::chrono::milliseconds reload_interval = std::chrono::seconds(60));
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Serves `collectable` on /metrics for as long as it lives.
  void Register(const std::shared_ptr<prometheus::Collectable>& collectable);
  const std::string& bound_address() const;
  // "https" with tls_server_config, else "http".
  const char* scheme() const;

  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Shorthands for the one-metric families most components need.
prometheus::Counter& AddCounter(prometheus::Registry& registry, const std::string& name,
                                const std::string& help);
prometheus::Gauge& AddGauge(prometheus::Registry& registry, const std::string& name,
                            const std::string& help);
// rocefab_grpc_denied_total{method}: RPCs refused by authorization.
prometheus::Family<prometheus::Counter>& AddDeniedRpcs(prometheus::Registry& registry);
prometheus::Family<prometheus::Counter>& AddCounterFamily(prometheus::Registry& registry,
                                                          const std::string& name,
                                                          const std::string& help);

}  // namespace rocefab
