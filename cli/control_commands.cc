#include "cli/control_commands.h"

#include <unistd.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "cli/roce_check.h"
#include "cli/table.h"
#include "common/clock.h"
#include "common/topology.h"
#include "rocefab/v1/query.grpc.pb.h"
#include "common/grpc_util.h"
#include "common/strings.h"
#include "rocefab/v1/control.grpc.pb.h"

namespace rocefab::cli {
namespace {

absl::StatusOr<std::unique_ptr<v1::Controller::Stub>> Connect(const GlobalOptions& g, const ControlOptions& o) {
  auto tls = ClientTls(g);
  if (!tls.ok()) return tls.status();
  auto channel = MakeChannel(o.controller, *tls);
  if (!channel.ok()) return channel.status();
  return v1::Controller::NewStub(*channel);
}

int Failed(const ControlOptions& o, const grpc::Status& status, std::ostream& err) {
  ReportRpcFailure("controller", "--controller", o.controller, status, err);
  return ExitCodeFor(status);
}

// The controller stub, or null after saying why there is none.
std::unique_ptr<v1::Controller::Stub> ConnectOrSay(const GlobalOptions& g, const ControlOptions& o,
                                                   std::ostream& err) {
  auto stub = Connect(g, o);
  if (stub.ok()) return std::move(*stub);
  err << "rocefab: " << stub.status().message() << "\n";
  return nullptr;
}

void Deadline(grpc::ClientContext* context, int seconds) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}


std::string Short(const std::string& hash) { return hash.substr(0, 12); }

}  // namespace

int RunConfigPlan(const GlobalOptions& g, const ControlOptions& o, std::ostream& out, std::ostream& err) {
  auto stub = ConnectOrSay(g, o, err);
  if (!stub) return 2;
  grpc::ClientContext context;
  Deadline(&context, 60);
  v1::PlanResponse response;
  if (auto s = stub->Plan(&context, {}, &response); !s.ok()) return Failed(o, s, err);
  if (g.output == "json") {
    PrintJson(response, out);
    return 0;
  }
  Table table({"SWITCH", "APPLIED", "DESIRED", "ADDED", "CHANGED", "REMOVED", "NOTE"});
  int to_change = 0, unreachable = 0;
  for (const auto& d : response.switches()) {
    const bool same = d.error().empty() && d.added().empty() && d.changed().empty() && d.removed().empty();
    if (!d.error().empty()) ++unreachable;
    else if (!same) ++to_change;
    table.AddRow({d.switch_name(), StrCat(d.applied_generation(), " ", Short(d.applied_hash())),
                  StrCat(d.desired_generation(), " ", Short(d.desired_hash())), StrCat(d.added_size()),
                  StrCat(d.changed_size()), StrCat(d.removed_size()),
                  !d.error().empty() ? d.error() : (same ? "in sync" : "")});
  }
  table.Print(out);
  out << "\ndesired generation " << response.desired_generation() << ": " << to_change
      << " switch(es) to change, " << response.switches_size() - to_change - unreachable
      << " in sync, " << unreachable << " unreachable\n";
  return 0;
}

int RunConfigApply(const GlobalOptions& g, const ControlOptions& o, std::ostream& out, std::ostream& err) {
  auto stub = ConnectOrSay(g, o, err);
  if (!stub) return 2;
  v1::ApplyRequest request;
  request.set_canary(o.canary);
  request.set_wave_size(o.wave_size);
  request.set_gate_seconds(o.gate_seconds);
  request.set_dry_run(o.dry_run);
  request.set_who(ClaimedUser());
  request.set_why(o.why);
  grpc::ClientContext context;
  Deadline(&context, 3600);
  v1::ApplyResponse response;
  if (auto s = stub->Apply(&context, request, &response); !s.ok()) return Failed(o, s, err);
  if (g.output == "json") {
    PrintJson(response, out);
  } else {
    Table table({"WAVE", "SWITCHES", "APPLIED", "GATE", "DETAIL"});
    for (const auto& wave : response.waves()) {
      std::string names;
      for (const auto& n : wave.switches()) StrAppend(&names, names.empty() ? "" : ",", n);
      table.AddRow({wave.wave() == 0 ? "canary" : StrCat(wave.wave()), names,
                    o.dry_run ? "-" : (wave.applied() ? "yes" : "NO"),
                    o.dry_run ? "-" : (wave.gate_passed() ? "passed" : (wave.applied() ? "FAILED" : "-")),
                    wave.detail()});
    }
    if (table.rows() > 0) table.Print(out);
    for (const auto& name : response.skipped()) out << "skipped (unreachable): " << name << "\n";
    if (response.ok())
      out << (o.dry_run ? "dry run: " : "") << "generation " << response.generation()
          << (o.dry_run ? " would be applied in " : " applied in ") << response.waves_size()
          << " wave(s)\n";
    else
      out << "generation " << response.generation() << " NOT applied"
          << (response.rolled_back() ? " (rolled back)" : "") << ": " << response.error() << "\n";
  }
  return response.ok() ? 0 : 1;
}

int RunConfigStatus(const GlobalOptions& g, const ControlOptions& o, std::ostream& out, std::ostream& err) {
  auto stub = ConnectOrSay(g, o, err);
  if (!stub) return 2;
  grpc::ClientContext context;
  Deadline(&context, 60);
  v1::StatusResponse response;
  if (auto s = stub->Status(&context, {}, &response); !s.ok()) return Failed(o, s, err);
  if (g.output == "json") {
    PrintJson(response, out);
    return 0;
  }
  Table table({"SWITCH", "DESIRED", "APPLIED", "DRIFT", "FAILED", "UNSUPPORTED", "NOTE"});
  for (const auto& s : response.switches())
    table.AddRow({s.switch_name(), StrCat(s.desired_generation(), " ", Short(s.desired_hash())),
                  StrCat(s.applied_generation(), " ", Short(s.applied_hash())), s.drift() ? "DRIFT" : "-",
                  StrCat(s.failed_items()), StrCat(s.unsupported_items()), s.error()});
  table.Print(out);
  // Why items are not applied, once per (item, state, reason) however many
  // switches share it: on a fleet of one kind, one row per cause.
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<std::string>> causes;
  for (const auto& s : response.switches())
    for (const auto& item : s.not_applied())
      causes[{item.key(), item.state() == v1::ITEM_STATE_FAILED ? "failed" : "unsupported", item.reason()}].push_back(
          s.switch_name());
  if (!causes.empty()) {
    out << "\nnot applied:\n";
    Table why({"ITEM", "STATE", "SWITCHES", "REASON"});
    for (const auto& [cause, switches] : causes) {
      const auto& [key, state, reason] = cause;
      why.AddRow({key, state,
                  switches.size() == 1 ? switches[0] : StrCat(switches.size(), " (", switches[0], " ...)"), reason});
    }
    why.Print(out);
  }
  if (!response.drained().empty()) {
    out << "\ndrained:";
    for (const auto& port : response.drained()) out << " " << port;
    out << "\n";
  }
  return 0;
}

int RunConfigHistory(const GlobalOptions& g, const ControlOptions& o, std::ostream& out, std::ostream& err) {
  auto stub = ConnectOrSay(g, o, err);
  if (!stub) return 2;
  grpc::ClientContext context;
  Deadline(&context, 30);
  v1::HistoryRequest request;
  request.set_limit(o.limit);
  v1::HistoryResponse response;
  if (auto s = stub->History(&context, request, &response); !s.ok()) return Failed(o, s, err);
  if (g.output == "json") {
    PrintJson(response, out);
    return 0;
  }
  Table table({"WHEN", "WHO", "ACTION", "TARGET", "GEN", "WHY", "DETAIL"});
  const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  for (const auto& e : response.entries())
    table.AddRow({Ago(now, e.timestamp_us()), e.who(), e.action(), e.target(), StrCat(e.generation()),
                  e.why(), e.detail()});
  table.Print(out);
  return 0;
}

int RunDrain(const GlobalOptions& g, const ControlOptions& o, bool undrain, std::ostream& out,
             std::ostream& err) {
  if (!undrain && o.reason.empty()) {
    err << "rocefab: drain needs --reason TEXT (it goes to the audit log)\n";
    return 2;
  }
  auto stub = ConnectOrSay(g, o, err);
  if (!stub) return 2;
  v1::DrainRequest request;
  request.set_kind(o.kind);
  request.set_name(o.name);
  request.set_force(o.force);
  request.set_reason(o.reason);
  request.set_who(ClaimedUser());
  request.set_undrain(undrain);
  request.set_dry_run(o.dry_run);
  grpc::ClientContext context;
  Deadline(&context, 120);
  v1::DrainResponse response;
  if (auto s = stub->Drain(&context, request, &response); !s.ok()) return Failed(o, s, err);
  // What the drain touches, shown for a preview and for a refusal alike.
  auto print_impact = [&](std::ostream& to) {
    if (response.capacity_size() > 0) {
      to << "capacity check (uplink capacity each rack keeps):\n";
      Table t({"  RACK SWITCH", "KEEPS", "POLICY MINIMUM", "CHECK"});
      for (const auto& rack : response.capacity())
        t.AddRow({StrCat("  ", rack.rtsw()), StrCat(static_cast<int>(rack.remaining_share() * 100 + 0.5), "%"),
                  StrCat(static_cast<int>(rack.minimum_share() * 100 + 0.5), "%"),
                  rack.remaining_share() + 1e-9 < rack.minimum_share() ? "below" : "ok"});
      t.Print(to);
    }
    if (!response.jobs_note().empty()) to << "jobs: " << response.jobs_note() << "\n";
    else if (!undrain) {
      to << "jobs whose traffic crosses it: ";
      if (response.jobs_size() == 0) to << "none running";
      for (int i = 0; i < response.jobs_size(); ++i) to << (i ? ", " : "") << response.jobs(i);
      to << "\n";
    }
  };
  if (g.output == "json") {
    PrintJson(response, out);
  } else if (response.ok() && o.dry_run) {
    out << "dry run: " << (undrain ? "undraining " : "draining ") << o.kind << " " << o.name << "\n";
    print_impact(out);
    out << "it would push " << response.pushed_size() << " switch(es):";
    for (const auto& name : response.pushed()) out << " " << name;
    out << "\nnothing changed\n";
  } else if (response.ok()) {
    out << (undrain ? "undrained " : "drained ") << o.kind << " " << o.name << " (generation "
        << response.generation() << ", pushed to " << response.pushed_size() << " switch(es))\n";
    if (!undrain) out << "remember: rocefab undrain " << o.kind << " " << o.name << "\n";
  } else {
    err << "rocefab: " << response.error() << "\n";
    print_impact(err);
  }
  return response.ok() ? 0 : 1;
}

int RunConfigAbort(const GlobalOptions& g, const ControlOptions& o, std::ostream& out, std::ostream& err) {
  auto stub = ConnectOrSay(g, o, err);
  if (!stub) return 2;
  grpc::ClientContext context;
  Deadline(&context, 30);
  v1::AbortRequest request;
  request.set_why(o.why);
  v1::AbortResponse response;
  if (auto s = stub->Abort(&context, request, &response); !s.ok()) return Failed(o, s, err);
  if (g.output == "json") {
    PrintJson(response, out);
    return 0;
  }
  if (!response.aborting()) {
    out << "no rollout is running\n";
    return 1;
  }
  out << "rollout of generation " << response.generation()
      << " stops before its next wave and rolls back what it touched (see rocefab config history)\n";
  return 0;
}

int RunCheckRoce(const GlobalOptions& g, const ControlOptions& o, const RoceCheckOptions& r, std::ostream& out,
                 std::ostream& err) {
  if (r.topology.empty()) {
    err << "rocefab: check roce needs --topology (or ROCEFAB_TOPOLOGY): which switch port each NIC faces\n";
    return 2;
  }
  auto topology = Topology::Load(r.topology);
  if (!topology.ok()) {
    err << "rocefab: " << topology.status().message() << "\n";
    return 2;
  }
  // The hosts' side: the settings gauges, from every collector shard.
  std::map<std::string, NicRoce> nics;
  for (const std::string& name : RoceSettingNames()) {
    v1::GetCountersRequest request;
    request.set_scope(v1::SCOPE_NIC);
    request.set_counter(name);
    request.set_host(r.host);
    request.set_since_us(SystemClock::Instance().NowUs() - 300'000'000);
    std::vector<v1::GetCountersResponse> parts(CollectorShards(g).size());
    if (int code = WithShards(g, err, [&](auto& stub, auto* ctx, size_t i) {
          return stub.GetCounters(ctx, request, &parts[i]);
        });
        code != 0)
      return code;
    for (const auto& part : parts)
      for (const auto& row : part.rows()) {
        NicRoce& nic = nics[row.entity()];
        if (row.has_prio()) nic.per_prio[row.counter()][row.prio()] = row.value();
        else nic.values[row.counter()] = row.value();
      }
  }
  // The switches' side: what each reports applied.
  auto stub = ConnectOrSay(g, o, err);
  if (!stub) return 2;
  grpc::ClientContext context;
  Deadline(&context, 60);
  v1::StatusResponse status;
  if (auto s = stub->Status(&context, {}, &status); !s.ok()) return Failed(o, s, err);
  std::map<std::string, v1::QosPolicy> qos;
  for (const auto& sw : status.switches())
    if (sw.has_applied_qos()) qos[sw.switch_name()] = sw.applied_qos();
  const RoceCheck check = CheckRoce(**topology, nics, qos);
  if (g.output == "json") {
    v1::RoceCheckReport report;
    report.set_nics_checked(check.nics_checked);
    for (const auto& m : check.mismatches) {
      v1::RoceMismatch* row = report.add_mismatches();
      row->set_nic(m.nic);
      row->set_switch_port(m.switch_port);
      row->set_setting(m.setting);
      row->set_nic_value(m.nic_value);
      row->set_switch_value(m.switch_value);
      row->set_why(m.why);
    }
    for (const auto& [setting, count] : check.unknown) (*report.mutable_unknown())[setting] = count;
    for (const auto& note : check.notes) report.add_notes(note);
    PrintJson(report, out);
    return check.mismatches.empty() ? 0 : 1;
  }
  if (!check.mismatches.empty()) {
    Table table({"NIC", "SWITCH PORT", "SETTING", "NIC", "SWITCH", "WHY IT MATTERS"});
    for (const auto& m : check.mismatches)
      table.AddRow({m.nic, m.switch_port, m.setting, m.nic_value, m.switch_value, m.why});
    table.Print(out);
  }
  out << check.nics_checked << " NIC(s) checked against their switch ports: " << check.mismatches.size()
      << " mismatch(es)\n";
  if (!check.unknown.empty()) {
    out << "not reported, so not checked:";
    for (const auto& [name, count] : check.unknown) out << " " << name << " (" << count << " NICs)";
    out << "\n";
  }
  for (const auto& note : check.notes) out << "note: " << note << "\n";
  return check.mismatches.empty() ? 0 : 1;
}

}  // namespace rocefab::cli
