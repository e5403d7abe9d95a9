#pragma once
#include <google/protobuf/message.h>
// The rocefab CLI's commands. Each returns the process exit code (the
// ExitCode values below; `rocefab --help` and docs/operations.md list them).

#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "rocefab/v1/config.pb.h"
#include "rocefab/v1/query.grpc.pb.h"

namespace rocefab::cli {

// What scripts can rely on.
enum ExitCode : int {
  kExitOk = 0,           // a result
  kExitNoResult = 1,     // nothing matched, not found, or the change was refused or failed
  kExitUsage = 2,        // bad usage: a flag, a name, an argument
  kExitUnreachable = 3,  // the daemon did not answer
  kExitDenied = 4,       // the daemon refused this identity (authorization)
};
// The exit code for a failed RPC.
int ExitCodeFor(const grpc::Status& status);
// Every `-o json`: the command's protobuf message, as protobuf's JSON
// printer writes it (proto field names, enum value names, 64-bit integers as
// strings, every field printed even when zero). One shape everywhere; the
// field names are the .proto files' (docs/operations.md, "JSON output").
void PrintJson(const google::protobuf::Message& message, std::ostream& out);
// The user a request claims to come from ($SUDO_USER, else $USER, else
// "unknown"). Only a claim: daemons record the certificate's identity, and
// show this name only in the plaintext mode, marked unauthenticated.
std::string ClaimedUser();
// "HOST" -> "HOST:default_port" ("[::1]" too); anything with a port as is.
std::string WithDefaultPort(const std::string& address, int default_port);

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
  bool allow_unknown = false;
  int prio = -1;         // >= 0: only this PFC priority
  bool nonzero = false;  // only series whose value or rate is not 0
  std::string sort;      // "rate": highest rate first
};

// `rocefab pfc`: pfcstat's view, one row per port and direction.
struct PfcOptions {
  std::string host, device;
  std::string since = "10s";  // a few poll intervals: a storm's rate, not a minute's average
  int prio = -1;
  bool nonzero = false, totals = false, allow_unknown = false;
  std::string watch;  // a period: print again every so often until interrupted
};
int RunPfc(const GlobalOptions& global, const PfcOptions& options, std::ostream& out, std::ostream& err);

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
