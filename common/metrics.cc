#include "common/metrics.h"

#include <prometheus/exposer.h>

#include <exception>

#include "common/strings.h"
#include "common/grpc_util.h"

namespace rocefab {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(listen, &host, &port))
    return absl::InvalidArgumentError(
        StrCat("metrics listen address '", listen, "' is not host:port"));
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(listen, 2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        StrCat("cannot serve /metrics on ", listen, ": ", e.what()));
  }
  auto ports = server->exposer_->GetListeningPorts();
  if (ports.empty())
    return absl::UnavailableError(StrCat("cannot serve /metrics on ", listen));
  const bool v6 = host.find(':') != std::string::npos;
  server->bound_address_ =
      v6 ? StrCat("[", host, "]:", ports[0]) : StrCat(host, ":", ports[0]);
  return server;
}

MetricsServer::~MetricsServer() = default;

void MetricsServer::Register(const std::shared_ptr<prometheus::Collectable>& collectable) {
  exposer_->RegisterCollectable(collectable);
}

prometheus::Counter& AddCounter(prometheus::Registry& registry, const std::string& name,
                                const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Gauge& AddGauge(prometheus::Registry& registry, const std::string& name,
                            const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Family<prometheus::Counter>& AddCounterFamily(prometheus::Registry& registry,
                                                          const std::string& name,
                                                          const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

}  // namespace rocefab
