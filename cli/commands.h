#pragma once
// The rocefab CLI's commands. Each returns the process exit code:
// 0 success, 1 the collector answered with an error or was unreachable,
// 2 bad usage.

#include <iostream>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rocefab/v1/query.grpc.pb.h"

namespace rocefab::cli {

struct GlobalOptions {
  std::string collector = "127.0.0.1:9410";
  std::string output = "table";  // or "json"
  int timeout_ms = 10000;
  std::string tls_ca, tls_cert, tls_key;
};

struct CountersOptions {
  std::string host, device, counter, scope;
  std::string since = "1m";
  int top = 0;  // > 0: only the N series with the highest rate, highest first
};

// A Query stub for --collector with the global TLS flags. Fails on bad TLS
// settings (missing files, a partial set).
absl::StatusOr<std::unique_ptr<v1::Query::Stub>> ConnectCollector(const GlobalOptions& global);
void SetDeadline(grpc::ClientContext* context, const GlobalOptions& global);
// Prints a failed collector RPC with a hint; returns 2 for a refused
// argument, else 1.
int CollectorRpcFailed(const GlobalOptions& global, const grpc::Status& status, std::ostream& err);

// Runs `call(stub, context)` on a collector stub with the global deadline;
// returns 0, or the exit code after reporting why there is no answer.
template <typename Call>
int WithCollector(const GlobalOptions& g, std::ostream& err, Call call) {
  auto stub = ConnectCollector(g);
  if (!stub.ok()) {
    err << "rocefab: " << stub.status().message() << "\n";
    return 2;
  }
  grpc::ClientContext context;
  SetDeadline(&context, g);
  grpc::Status status = call(**stub, &context);
  return status.ok() ? 0 : CollectorRpcFailed(g, status, err);
}

int RunAgents(const GlobalOptions& global, std::ostream& out, std::ostream& err);
int RunCounters(const GlobalOptions& global, const CountersOptions& options, std::ostream& out,
                std::ostream& err);

}  // namespace rocefab::cli
