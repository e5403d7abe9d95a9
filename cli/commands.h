#pragma once
// The rocefab CLI's commands. Each returns the process exit code:
// 0 success, 1 the collector answered with an error or was unreachable,
// 2 bad usage.

#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "rocefab/v1/config.pb.h"
#include "rocefab/v1/query.grpc.pb.h"

namespace rocefab::cli {

struct GlobalOptions {
  // One collector, or several shards separated by commas (one per AI Zone,
  // docs/architecture.md "Sharded collectors").
  std::string collector = "127.0.0.1:9410";
  std::string output = "table";  // or "json"
  int timeout_ms = 10000;
  std::string tls_ca, tls_cert, tls_key;
  bool insecure = false;
};

// The TLS block the global flags give: mutual TLS, or plaintext only with
// --insecure. Fails on a partial set or missing files.
absl::StatusOr<v1::TlsSettings> ClientTls(const GlobalOptions& global);

struct CountersOptions {
  std::string host, device, counter, scope;
  std::string since = "1m";
  int top = 0;  // > 0: only the N series with the highest rate, highest first
};

// The collector shards --collector names, in order.
std::vector<std::string> CollectorShards(const GlobalOptions& global);
// A Query stub for `address` (default: the only shard) with the global TLS
// flags. Fails on bad TLS settings (missing files, a partial set), or when
// --collector names several shards and no address is given.
absl::StatusOr<std::unique_ptr<v1::Query::Stub>> ConnectCollector(const GlobalOptions& global,
                                                                  const std::string& address = "");
void SetDeadline(grpc::ClientContext* context, const GlobalOptions& global);
// Prints "rocefab: <daemon> <address>: <message>" with a hint for an
// unreachable daemon or a refused identity.
void ReportRpcFailure(const std::string& daemon, const std::string& flag, const std::string& address,
                      const grpc::Status& status, std::ostream& err);
// Prints a failed collector RPC with a hint; returns 2 for a refused
// argument, else 1.
int CollectorRpcFailed(const GlobalOptions& global, const grpc::Status& status, std::ostream& err,
                       const std::string& shard = "");

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

// Runs `call(stub, context, shard_index)` on every shard at once, each with
// the global deadline. 0 when every shard answered; otherwise reports each
// failure and returns the worst exit code: a sharded answer with a shard
// missing would mislead.
template <typename Call>
int WithShards(const GlobalOptions& g, std::ostream& err, Call call) {
  const std::vector<std::string> shards = CollectorShards(g);
  std::vector<std::unique_ptr<v1::Query::Stub>> stubs;
  for (const std::string& shard : shards) {
    auto stub = ConnectCollector(g, shard);
    if (!stub.ok()) {
      err << "rocefab: " << stub.status().message() << "\n";
      return 2;
    }
    stubs.push_back(std::move(*stub));
  }
  std::vector<grpc::Status> statuses(shards.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < shards.size(); ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext context;
      SetDeadline(&context, g);
      statuses[i] = call(*stubs[i], &context, i);
    });
  }
  for (auto& t : threads) t.join();
  int code = 0;
  for (size_t i = 0; i < shards.size(); ++i)
    if (!statuses[i].ok()) code = std::max(code, CollectorRpcFailed(g, statuses[i], err, shards[i]));
  return code;
}

int RunAgents(const GlobalOptions& global, std::ostream& out, std::ostream& err);
int RunCounters(const GlobalOptions& global, const CountersOptions& options, std::ostream& out,
                std::ostream& err);

}  // namespace rocefab::cli
