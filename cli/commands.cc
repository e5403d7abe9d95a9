#include "cli/commands.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <google/protobuf/util/json_util.h>

#include "common/strings.h"
#include "cli/table.h"
#include "common/clock.h"
#include "common/counters.h"
#include "common/duration.h"
#include "common/grpc_util.h"

namespace rocefab::cli {
namespace {

std::string AgentKindName(v1::AgentKind kind) {
  switch (kind) {
    case v1::AGENT_KIND_HOST: return "host";
    case v1::AGENT_KIND_SWITCH: return "switch";
    default: return "unknown";
  }
}

}  // namespace

std::vector<std::string> CollectorShards(const GlobalOptions& global) {
  std::vector<std::string> shards;
  size_t start = 0;
  for (;;) {
    const size_t comma = global.collector.find(',', start);
    std::string shard = global.collector.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!shard.empty()) shards.push_back(std::move(shard));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return shards;
}

absl::StatusOr<std::unique_ptr<v1::Query::Stub>> ConnectCollector(const GlobalOptions& global,
                                                                  const std::string& address) {
  std::string target = address;
  if (target.empty()) {
    const auto shards = CollectorShards(global);
    if (shards.size() != 1)
      return absl::InvalidArgumentError(StrCat(
          "this command reads one collector; --collector names ", shards.size(),
          " (", global.collector, "): name the shard to ask"));
    target = shards[0];
  }
  auto tls = ClientTls(global);
  if (!tls.ok()) return tls.status();
  auto channel = MakeChannel(target, *tls);
  if (!channel.ok()) return channel.status();
  return v1::Query::NewStub(*channel);
}

absl::StatusOr<v1::TlsSettings> ClientTls(const GlobalOptions& global) {
  v1::TlsSettings tls;
  tls.set_ca(global.tls_ca);
  tls.set_cert(global.tls_cert);
  tls.set_key(global.tls_key);
  const bool any = TlsEnabled(tls);
  if (any && global.insecure)
    return absl::InvalidArgumentError("--insecure contradicts the --tls-* files given; choose one");
  if (!any && !global.insecure)
    return absl::InvalidArgumentError(
        "no client certificate: give --tls-ca, --tls-cert and --tls-key (or set ROCEFAB_TLS_CA, "
        "ROCEFAB_TLS_CERT and ROCEFAB_TLS_KEY), or --insecure for daemons started with --insecure");
  if (auto status = ValidateTls(tls); !status.ok()) return status;
  return tls;
}

void SetDeadline(grpc::ClientContext* context, const GlobalOptions& global) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(global.timeout_ms));
}

void ReportRpcFailure(const std::string& daemon, const std::string& flag, const std::string& address,
                      const grpc::Status& status, std::ostream& err) {
  err << "rocefab: " << daemon << " " << address << ": " << status.error_message();
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
    err << " (is rocefab-" << daemon << "d running there, and does it trust this certificate's CA? set "
        << flag << " HOST:PORT)";
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
      status.error_code() == grpc::StatusCode::UNAUTHENTICATED)
    err << " (the " << daemon << "'s authorization block decides which identities hold which role; "
        << "docs/security.md)";
  err << "\n";
}

void PrintJson(const google::protobuf::Message& message, std::ostream& out) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  if (auto status = google::protobuf::util::MessageToJsonString(message, &json, options); !status.ok())
    json = "{}\n";  // only a message with invalid UTF-8 in a string field
  out << json;
}

int ExitCodeFor(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK: return kExitOk;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE: return kExitUsage;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED: return kExitUnreachable;
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED: return kExitDenied;
    default: return kExitNoResult;
  }
}

std::string ClaimedUser() {
  const char* user = std::getenv("SUDO_USER");
  if (user == nullptr) user = std::getenv("USER");
  return user ? user : "unknown";
}

std::string WithDefaultPort(const std::string& address, int default_port) {
  if (address.empty() || address.starts_with("unix:")) return address;
  if (address.front() == '[') {
    const size_t close = address.find(']');
    if (close != std::string::npos && close + 1 == address.size()) return StrCat(address, ":", default_port);
    return address;
  }
  // One colon is host:port; several without brackets is a bare IPv6 address.
  const size_t colons = static_cast<size_t>(std::count(address.begin(), address.end(), ':'));
  if (colons == 0) return StrCat(address, ":", default_port);
  if (colons > 1) return StrCat("[", address, "]:", default_port);
  return address;
}

int CollectorRpcFailed(const GlobalOptions& global, const grpc::Status& status, std::ostream& err,
                       const std::string& shard) {
  ReportRpcFailure("collector", "--collector", shard.empty() ? global.collector : shard, status, err);
  return ExitCodeFor(status);
}

int RunAgents(const GlobalOptions& global, std::ostream& out, std::ostream& err) {
  std::vector<v1::ListAgentsResponse> parts(CollectorShards(global).size());
  if (int code = WithShards(global, err, [&](auto& stub, auto* ctx, size_t i) {
        return stub.ListAgents(ctx, v1::ListAgentsRequest(), &parts[i]);
      });
      code != 0)
    return code;
  // Every shard's agents; each agent reports to one shard.
  v1::ListAgentsResponse response;
  for (const auto& part : parts) {
    for (const auto& agent : part.agents()) *response.add_agents() = agent;
    response.set_now_us(std::max(response.now_us(), part.now_us()));
  }
  std::sort(response.mutable_agents()->begin(), response.mutable_agents()->end(),
            [](const v1::AgentInfo& a, const v1::AgentInfo& b) { return a.agent_id() < b.agent_id(); });

  if (global.output == "json") {
    PrintJson(response, out);
    return 0;
  }
  Table table({"AGENT", "KIND", "CONNECTED", "LAST SEEN", "BATCHES", "SAMPLES", "SKIPPED",
               "ERRORS", "RECONNECTS", "DROPPED", "VERSION", "OS"});
  // The agent's own version, and the switch image (a host's kernel).
  auto component = [](const v1::AgentInfo& agent, std::initializer_list<const char*> names) {
    for (const char* name : names)
      if (auto it = agent.components().find(name); it != agent.components().end()) return it->second;
    return std::string("-");
  };
  for (const auto& agent : response.agents()) {
    table.AddRow({agent.agent_id(), AgentKindName(agent.kind()), agent.connected() ? "yes" : "no",
                  Ago(response.now_us(), agent.last_seen_us()), StrCat(agent.batches()),
                  StrCat(agent.samples()), StrCat(agent.health().skipped_values()),
                  StrCat(agent.health().parse_errors() + agent.health().source_errors()),
                  StrCat(agent.delivery().stream_failures()),
                  StrCat(agent.delivery().dropped_overflow()),
                  component(agent, {"rocefab-hostd", "rocefab-switchd"}), component(agent, {"os", "kernel"})});
  }
  if (table.rows() == 0) {
    out << "no agents have reported to " << global.collector << " yet\n";
    return 0;
  }
  table.Print(out);
  return 0;
}

int RunCounters(const GlobalOptions& global, const CountersOptions& options, std::ostream& out,
                std::ostream& err) {
  auto since = ParseDurationUs(options.since);
  if (!since.ok()) {
    err << "rocefab: --since: " << since.status().message() << "\n";
    return 2;
  }
  v1::GetCountersRequest request;
  request.set_host(options.host);
  request.set_device(options.device);
  request.set_counter(options.counter);
  request.set_allow_unknown(options.allow_unknown);
  if (!options.scope.empty()) {
    v1::Scope scope;
    if (!ParseScope(options.scope, &scope)) {
      err << "rocefab: --scope: one of nic, port, queue\n";
      return kExitUsage;
    }
    if (scope == v1::SCOPE_COLL) {
      err << "rocefab: --scope coll: collective timings are kept per job, not as counters: "
             "rocefab job show JOB (and job diagnose JOB)\n";
      return kExitUsage;
    }
    request.set_scope(scope);
  }
  if (!options.counter.empty()) {
    bool known = false;
    for (const CounterDef& def : AllCounters()) known |= def.name == options.counter;
    if (!known) {
      err << "rocefab: --counter: '" << options.counter
          << "' is not in the counter vocabulary (see docs/counters.md)\n";
      return 2;
    }
  }
  request.set_since_us(SystemClock::Instance().NowUs() - *since);
  std::vector<v1::GetCountersResponse> parts(CollectorShards(global).size());
  if (int code = WithShards(global, err, [&](auto& stub, auto* ctx, size_t i) {
        return stub.GetCounters(ctx, request, &parts[i]);
      });
      code != 0)
    return code;
  v1::GetCountersResponse response;
  for (const auto& part : parts) {
    for (const auto& row : part.rows()) *response.add_rows() = row;
    for (const auto& note : part.notes()) response.add_notes(note);
    response.set_now_us(std::max(response.now_us(), part.now_us()));
  }
  {
    auto* rows = response.mutable_rows();
    auto drop = [&](const v1::CounterRow& r) {
      if (options.prio >= 0 && (!r.has_prio() || static_cast<int>(r.prio()) != options.prio)) return true;
      if (options.nonzero && r.value() == 0 && (!r.has_rate() || r.rate_per_second() == 0)) return true;
      return false;
    };
    rows->erase(std::remove_if(rows->begin(), rows->end(), drop), rows->end());
  }
  if (options.top > 0 || options.sort == "rate") {
    // The loudest series first; series without a rate sort last.
    auto* rows = response.mutable_rows();
    std::stable_sort(rows->begin(), rows->end(), [](const v1::CounterRow& a, const v1::CounterRow& b) {
      const double ra = a.has_rate() ? a.rate_per_second() : -1;
      const double rb = b.has_rate() ? b.rate_per_second() : -1;
      return ra > rb;
    });
    while (options.top > 0 && rows->size() > options.top) rows->RemoveLast();
  }

  if (global.output == "json") {
    PrintJson(response, out);
    return response.rows().empty() ? kExitNoResult : kExitOk;
  }
  for (const auto& note : response.notes()) err << "note: " << note << "\n";
  Table table({"ENTITY", "PORT", "COUNTER", "PRIO", "VALUE", "RATE/S", "UPDATED"});
  for (const auto& row : response.rows()) {
    table.AddRow({row.entity(), StrCat(row.port()), row.counter(),
                  row.has_prio() ? StrCat(row.prio()) : "-", StrCat(row.value()),
                  row.kind() != v1::VALUE_KIND_COUNTER ? "-"
                  : row.has_rate()                     ? HumanRate(row.rate_per_second())
                                                       : "n/a",
                  Ago(response.now_us(), row.timestamp_us())});
  }
  if (table.rows() == 0) {
    out << "no matching counters (check --host/--device/--counter, or `rocefab agents`)\n";
    return kExitNoResult;
  }
  table.Print(out);
  return 0;
}

namespace {

// One port's PFC, one direction: frames and pause time per priority.
struct PfcRow {
  double frames[8] = {}, pause_us[8] = {};
  bool any = false;
};

int PrintPfcOnce(const GlobalOptions& global, const PfcOptions& o, int64_t since_us, std::ostream& out,
                 std::ostream& err) {
  // (entity, "rx"|"tx") -> row
  std::map<std::pair<std::string, std::string>, PfcRow> rows;
  for (const char* counter : {"pfc_rx_pause_frames", "pfc_tx_pause_frames", "pfc_rx_pause_us", "pfc_tx_pause_us"}) {
    v1::GetCountersRequest request;
    request.set_host(o.host);
    request.set_device(o.device);
    request.set_counter(counter);
    request.set_allow_unknown(o.allow_unknown);
    request.set_since_us(since_us);
    std::vector<v1::GetCountersResponse> parts(CollectorShards(global).size());
    if (int code = WithShards(global, err, [&](auto& stub, auto* ctx, size_t i) {
          return stub.GetCounters(ctx, request, &parts[i]);
        });
        code != 0)
      return code;
    const std::string c = counter;
    const std::string dir = c.substr(4, 2);
    const bool frames = c.ends_with("_frames");
    for (const auto& part : parts)
      for (const auto& r : part.rows()) {
        if (!r.has_prio() || r.prio() > 7) continue;
        PfcRow& row = rows[{r.scope() == v1::SCOPE_NIC && r.port() > 1 ? StrCat(r.entity(), ":", r.port()) : r.entity(), dir}];
        const double v = o.totals ? static_cast<double>(r.value()) : (r.has_rate() ? r.rate_per_second() : 0);
        (frames ? row.frames : row.pause_us)[r.prio()] += v;
        row.any = true;
      }
  }
  std::vector<std::string> header = {"PORT", "DIR"};
  for (int p = 0; p < 8; ++p)
    if (o.prio < 0 || o.prio == p) header.push_back(StrCat("PFC", p, o.totals ? " FRAMES" : " FRAMES/S"));
  header.push_back(o.totals ? "PAUSED (TOTAL)" : "PAUSED");
  Table table(header);
  for (const auto& [key, row] : rows) {
    double frames = 0, paused = 0;
    std::vector<std::string> cells = {key.first, key.second};
    for (int p = 0; p < 8; ++p) {
      if (o.prio >= 0 && o.prio != p) continue;
      frames += row.frames[p];
      paused = std::max(paused, row.pause_us[p]);
      cells.push_back(HumanRate(row.frames[p]));
    }
    if (o.nonzero && frames == 0 && paused == 0) continue;
    char share[48];
    // Pause time per second on the worst priority: the share of time paused.
    if (o.totals) std::snprintf(share, sizeof share, "%.1f s", paused / 1e6);
    else std::snprintf(share, sizeof share, "%.0f%%", std::min(100.0, paused / 1e4));
    cells.push_back(share);
    table.AddRow(cells);
  }
  if (table.rows() == 0) {
    out << (o.nonzero ? "no port sent or received PFC pause frames" : "no PFC counters matched")
        << (o.totals ? "" : StrCat(" in the last ", o.since)) << "\n";
    return kExitNoResult;
  }
  table.Print(out);
  out << (o.totals ? "counter totals" : StrCat("rates over the last ", o.since))
      << "; PAUSED is the worst priority's pause time (tx: this port paused its peer; rx: it was paused)\n";
  return kExitOk;
}

}  // namespace

int RunPfc(const GlobalOptions& global, const PfcOptions& o, std::ostream& out, std::ostream& err) {
  auto since = ParseDurationUs(o.since);
  if (!since.ok() || *since <= 0) {
    err << "rocefab: --since: a positive duration, e.g. 10s\n";
    return kExitUsage;
  }
  if (o.prio > 7) {
    err << "rocefab: --prio: a PFC priority, 0-7\n";
    return kExitUsage;
  }
  int64_t every_us = 0;
  if (!o.watch.empty()) {
    auto every = ParseDurationUs(o.watch);
    if (!every.ok() || *every < 500'000) {
      err << "rocefab: --watch: a period of at least 500ms, e.g. 2s\n";
      return kExitUsage;
    }
    every_us = *every;
  }
  for (;;) {
    const int64_t now = SystemClock::Instance().NowUs();
    if (every_us > 0) out << "\033[H\033[2J" << FormatUtcTimeOfDay(now) << "  (every " << o.watch << "; Ctrl-C stops)\n";
    const int code = PrintPfcOnce(global, o, now - *since, out, err);
    if (every_us == 0) return code;
    if (code > kExitNoResult) return code;
    out.flush();
    std::this_thread::sleep_for(std::chrono::microseconds(every_us));
  }
}

}  // namespace rocefab::cli
