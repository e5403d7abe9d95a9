#pragma once
// Prometheus exposition. Components declare their metrics in one struct that
// registers on an injected prometheus::Registry (never a global one); the
// daemon's main owns one MetricsServer that serves the registries it is given.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Exposer;
}

namespace rocefab {

class MetricsServer final {
 public:
  // Listens on `listen` ("host:port"; port 0 picks one). With `web_config`
  // (the path of an exporter-toolkit web config, v1::WebConfig), asks for
  // basic auth as that file says. Its tls_server_config is refused: the
  // HTTP server under prometheus-cpp cannot serve TLS here. Fails with a clear
  // message when the address is taken or malformed, or the file is wrong.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen,
                                                             const std::string& web_config = "");
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Serves `collectable` on /metrics for as long as it lives.
  void Register(const std::shared_ptr<prometheus::Collectable>& collectable);
  const std::string& bound_address() const { return bound_address_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string bound_address_;
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
