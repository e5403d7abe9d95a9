#include "common/metrics.h"

#include <prometheus/exposer.h>

#include <crypt.h>

#include <exception>
#include <map>

#include "common/strings.h"
#include "common/config_loader.h"
#include "common/grpc_util.h"
#include "rocefab/v1/config.pb.h"

namespace rocefab {

namespace {

// Checks `password` against a bcrypt hash, as exporter-toolkit does
// (libxcrypt's crypt_r knows $2a$, $2b$ and $2y$).
bool PasswordMatches(const std::string& password, const std::string& hash) {
  crypt_data data{};
  const char* out = crypt_r(password.c_str(), hash.c_str(), &data);
  return out != nullptr && out[0] != '*' && hash == out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen,
                                                                   const std::string& web_config) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(listen, &host, &port))
    return absl::InvalidArgumentError(
        StrCat("metrics listen address '", listen, "' is not host:port"));
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  v1::WebConfig web;
  if (!web_config.empty()) {
    if (auto status = LoadYamlConfigFile(web_config, &web); !status.ok()) return status;
    for (const auto& [user, hash] : web.basic_auth_users())
      if (!hash.starts_with("$2")) 
        return absl::InvalidArgumentError(StrCat(web_config, ": basic_auth_users.", user,
                                                 ": not a bcrypt hash (htpasswd -nBC 10 '' | tr -d ':')"));
  }
  std::vector<std::string> options = {"listening_ports", listen, "num_threads", "2"};
  const auto& tls = web.tls_server_config();
  if (!tls.cert_file().empty() || !tls.key_file().empty() || !tls.client_ca_file().empty())
    // Debian's civetweb (under prometheus-cpp) crashes serving TLS with
    // OpenSSL 3, so HTTPS for /metrics is refused rather than attempted.
    return absl::UnimplementedError(StrCat(
        web_config, ": tls_server_config is not supported by this build's /metrics server; terminate TLS in "
                    "front of it (a local proxy) and keep basic_auth_users here"));
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        StrCat("cannot serve /metrics on ", listen, ": ", e.what()));
  }
  if (!web.basic_auth_users().empty()) {
    std::map<std::string, std::string> users(web.basic_auth_users().begin(), web.basic_auth_users().end());
    server->exposer_->RegisterAuth(
        [users](const std::string& user, const std::string& password) {
          auto it = users.find(user);
          return it != users.end() && PasswordMatches(password, it->second);
        },
        "rocefab");
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

prometheus::Family<prometheus::Counter>& AddDeniedRpcs(prometheus::Registry& registry) {
  return AddCounterFamily(registry, "rocefab_grpc_denied_total",
                          "RPCs refused by authorization (PERMISSION_DENIED or UNAUTHENTICATED), by method");
}

}  // namespace rocefab
