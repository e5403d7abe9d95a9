#pragma once
// gRPC servers and channels from one TLS settings block.
//
// With ca, cert and key set, servers require and verify client certificates
// and channels present theirs: mutual TLS. With all three empty, both sides
// use plaintext. Anything in between is a configuration error, never a
// silent downgrade. Callers never build credentials themselves.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rocefab/v1/config.pb.h"

namespace rocefab {

// OK when all of ca/cert/key are set or none is, and set files are readable.
absl::Status ValidateTls(const v1::TlsSettings& tls);
bool TlsEnabled(const v1::TlsSettings& tls);

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const v1::TlsSettings& tls);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const v1::TlsSettings& tls);

// What a channel carries. kTrickle: small messages at a steady pace, as an
// agent's telemetry stream. HTTP/2's bandwidth-delay probing pings the peer
// after each burst of data it receives, to grow the window for bulk
// transfers; on a trickle it only costs both ends a ping exchange and the
// wake-ups of its timers every second or two (docs/performance.md).
enum class ChannelTraffic { kDefault, kTrickle };

// A channel to `target` ("host:port") with keepalives, so a peer that
// vanishes is noticed within seconds rather than at the next TCP timeout.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const std::string& target, const v1::TlsSettings& tls,
    ChannelTraffic traffic = ChannelTraffic::kDefault);

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  std::string bound_address;  // "127.0.0.1:41234" even when asked for port 0
};

// Builds and starts a server on `listen` ("host:port", port 0 picks one; or
// "unix:/path").
absl::StatusOr<RunningServer> StartGrpcServer(const std::string& listen,
                                              const v1::TlsSettings& tls,
                                              const std::vector<grpc::Service*>& services);

// Splits "host:port" or "[v6]:port". False when malformed.
bool SplitHostPort(const std::string& address, std::string* host, int* port);

}  // namespace rocefab
