#include "common/grpc_util.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <charconv>

#include "common/strings.h"
#include "common/fs_root.h"

namespace rocefab {
namespace {

struct Pem {
  std::string ca, cert, key;
};

absl::StatusOr<Pem> ReadPem(const v1::TlsSettings& tls) {
  Pem pem;
  for (auto [path, out, what] : {std::tuple{&tls.ca(), &pem.ca, "ca"},
                                 std::tuple{&tls.cert(), &pem.cert, "cert"},
                                 std::tuple{&tls.key(), &pem.key, "key"}}) {
    auto text = ReadWholeFile(*path);
    if (!text.ok())
      return absl::InvalidArgumentError(
          StrCat("tls.", what, ": cannot read ", *path, ": ", text.status().message()));
    *out = std::move(*text);
  }
  return pem;
}

}  // namespace

bool TlsEnabled(const v1::TlsSettings& tls) {
  return !tls.ca().empty() || !tls.cert().empty() || !tls.key().empty();
}

absl::Status ValidateTls(const v1::TlsSettings& tls) {
  if (!TlsEnabled(tls)) return absl::OkStatus();
  if (tls.ca().empty() || tls.cert().empty() || tls.key().empty())
    return absl::InvalidArgumentError(
        "tls: set all of ca, cert and key for mutual TLS, or none of them for plaintext");
  return ReadPem(tls).status();
}

namespace {

// The three files, re-read every reload_interval: a rotated certificate or
// CA is used from the next handshake on, without a restart.
std::shared_ptr<grpc::experimental::CertificateProviderInterface> FileProvider(
    const v1::TlsSettings& tls) {
  const int64_t reload_s =
      tls.has_reload_interval() && tls.reload_interval().seconds() > 0 ? tls.reload_interval().seconds() : 60;
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key(), tls.cert(), tls.ca(), static_cast<unsigned>(reload_s));
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const v1::TlsSettings& tls) {
  if (auto status = ValidateTls(tls); !status.ok()) return status;
  if (!TlsEnabled(tls)) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(FileProvider(tls));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const v1::TlsSettings& tls) {
  if (auto status = ValidateTls(tls); !status.ok()) return status;
  if (!TlsEnabled(tls)) return grpc::InsecureChannelCredentials();
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(FileProvider(tls));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  return grpc::experimental::TlsCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& target,
                                                           const v1::TlsSettings& tls,
                                                           ChannelTraffic traffic) {
  auto credentials = MakeChannelCredentials(tls);
  if (!credentials.ok()) return credentials.status();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  if (traffic == ChannelTraffic::kTrickle) args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  if (!tls.server_name().empty()) args.SetSslTargetNameOverride(tls.server_name());
  return grpc::CreateCustomChannel(target, *credentials, args);
}

bool SplitHostPort(const std::string& address, std::string* host, int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= address.size()) return false;
  std::string h = address.substr(0, colon);
  if (h.front() == '[') {
    if (h.back() != ']') return false;
    h = h.substr(1, h.size() - 2);
  }
  const char* begin = address.data() + colon + 1;
  const char* end = address.data() + address.size();
  int p = 0;
  auto [ptr, ec] = std::from_chars(begin, end, p);
  if (ec != std::errc() || ptr != end || p < 0 || p > 65535) return false;
  *host = h;
  *port = p;
  return true;
}

absl::StatusOr<RunningServer> StartGrpcServer(const std::string& listen,
                                              const v1::TlsSettings& tls,
                                              const std::vector<grpc::Service*>& services) {
  // "unix:/path" listens on a Unix socket: reachable from other network
  // namespaces of the machine, which loopback TCP is not.
  const bool unix_socket = listen.starts_with("unix:");
  std::string host;
  int port = 0;
  if (!unix_socket && !SplitHostPort(listen, &host, &port))
    return absl::InvalidArgumentError(StrCat(
        "listen address '", listen, "' is not host:port (e.g. 127.0.0.1:9410) or unix:/path"));
  auto credentials = MakeServerCredentials(tls);
  if (!credentials.ok()) return credentials.status();
  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(listen, *credentials, &selected_port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // What servers receive is requests and the agents' telemetry streams,
  // small messages at a steady pace: no bandwidth-delay probing, whose
  // pings after each batch cost every agent a wake-up (see ChannelTraffic).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  for (grpc::Service* service : services) builder.RegisterService(service);
  RunningServer running;
  running.server = builder.BuildAndStart();
  if (unix_socket) {
    if (!running.server) return absl::UnavailableError(StrCat("cannot listen on ", listen));
    running.bound_address = listen;
    return running;
  }
  if (!running.server || selected_port == 0)
    return absl::UnavailableError(StrCat("cannot listen on ", listen,
                                               " (address in use or not local?)"));
  const bool v6 = host.find(':') != std::string::npos;
  running.bound_address =
      v6 ? StrCat("[", host, "]:", selected_port) : StrCat(host, ":", selected_port);
  return running;
}

}  // namespace rocefab
