#include "cli/diagnose_commands.h"

#include "cli/shards.h"
#include "cli/playbook_commands.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "cli/table.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/findings.h"
#include "common/strings.h"
#include "common/traffic_matrix_merge.h"
#include "rocefab/v1/query.grpc.pb.h"

namespace rocefab::cli {
namespace {


std::string Fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}



}  // namespace

void PrintDiagnosis(const v1::DiagnoseJobResponse& d, int64_t now_us, int limit, std::ostream& out) {
  std::set<std::string> hosts;
  for (const auto& r : d.job().ranks()) hosts.insert(r.host());
  out << "job " << d.job().id() << (d.job().name().empty() ? "" : StrCat(" (", d.job().name(), ")")) << ": "
      << d.job().ranks_size() << " ranks on " << hosts.size() << " hosts; paths cross "
      << d.footprint_ports() << " fabric ports on " << d.footprint_switches() << " switches\n";
  out << "window " << FormatUtcTimeOfDay(d.window_start_us()) << " - " << FormatUtcTimeOfDay(d.window_end_us()) << "\n";
  out << "verdict: " << d.verdict() << "\n";
  if (d.degraded_size() > 0) {
    out << "\ndegraded intervals:\n";
    Table t({"  START", "END", "KIND", "BUSBW / BASELINE"});
    for (const auto& i : d.degraded())
      t.AddRow({StrCat("  ", FormatUtcTimeOfDay(i.start_us())), i.end_us() ? FormatUtcTimeOfDay(i.end_us()) : "ongoing", i.kind(),
                i.kind() == "job_stalled" ? "0 (nothing completes)" : Fixed(i.busbw_ratio(), 2)});
    t.Print(out);
  }
  for (const auto& hint : d.hints()) out << "hint: " << hint << "\n";
  // What changed on its paths: the versions its hosts and switches
  // reported, and the operators' drains and rollouts (operator_change).
  std::vector<std::tuple<int64_t, std::string, std::string, std::string>> changed;  // at, where, what, source
  for (const auto& c : d.changes())
    changed.emplace_back(c.at_us(), c.device(), ChangeArrow(c), "agent");
  for (const auto& f : d.findings())
    if (f.kind() == "operator_change") changed.emplace_back(f.start_us(), f.entity(), f.summary(), "controller");
  std::sort(changed.begin(), changed.end());
  if (!changed.empty()) {
    out << "\nwhat changed on its paths (from 30 min before the slowdown):\n";
    Table t({"  AT", "WHERE", "WHAT", "FROM"});
    for (const auto& [at, where, what, source] : changed)
      t.AddRow({StrCat("  ", FormatUtcTimeOfDay(at)), where, what, source});
    t.Print(out);
  }
  if (d.findings_size() == 0) {
    out << "\nno anomaly on the job's paths in the window\n";
    return;
  }
  out << "\nfindings (most likely cause first):\n";
  Table t({"  #", "CONFIDENCE", "KIND", "ENTITY", "ROLE", "STARTED", "STATE"});
  int shown = 0;
  for (const auto& f : d.findings()) {
    if (shown++ >= limit) break;
    t.AddRow({StrCat("  ", shown), StrCat(static_cast<int>(f.confidence() * 100 + 0.5), "%"), f.kind(),
              f.entity(), f.role(), Ago(now_us, f.start_us()), f.end_us() ? StrCat("ended ", Ago(now_us, f.end_us())) : "active"});
  }
  t.Print(out);
  if (d.findings_size() > limit)
    out << "  (" << d.findings_size() - limit << " more; --limit or -o json for all)\n";
  const v1::Finding* top = nullptr;
  for (const auto& f : d.findings())
    if (f.role() == "cause") {
      top = &f;
      break;
    }
  if (top == nullptr) top = &d.findings(0);
  out << "\ntop finding: " << top->summary() << "\nevidence:\n";
  for (const auto& ev : top->evidence()) out << "  " << FormatEvidence(ev) << "\n";
  out << "playbook: " << d.playbook() << "\n";
}

int RunJobDiagnose(const GlobalOptions& g, const DiagnoseOptions& o, std::ostream& out, std::ostream& err) {
  auto window = ParseDurationUs(o.window);
  if (!window.ok() || *window < 1'000'000) {
    err << "rocefab: --window: a duration of at least 1s, e.g. 10m or 1h\n";
    return 2;
  }
  if (o.limit <= 0) {
    err << "rocefab: --limit must be positive\n";
    return 2;
  }
  v1::DiagnoseJobRequest request;
  request.set_job(o.id);
  request.set_window_us(*window);
  if (!o.at.empty()) {
    auto at = ParseTimeUs(o.at, SystemClock::Instance().NowUs());
    if (!at.ok()) {
      err << "rocefab: --at: " << at.status().message() << "\n";
      return 2;
    }
    request.set_at_us(*at);
  }
  request.set_onset_only(o.onset_only);
  // Every shard diagnoses from its own agents' data; the answers merge.
  std::vector<v1::DiagnoseJobResponse> parts(CollectorShards(g).size());
  if (int code = WithShards(g, err, [&](auto& stub, auto* ctx, size_t i) {
        return stub.DiagnoseJob(ctx, request, &parts[i]);
      });
      code != 0)
    return code;
  v1::DiagnoseJobResponse response = MergeDiagnoses(std::move(parts));
  // The collector names playbooks relative to where they ship; the operator
  // needs a path to open.
  if (!response.playbook().empty()) response.set_playbook(ShippedPath(response.playbook()));
  for (auto& f : *response.mutable_findings())
    if (!f.playbook().empty()) f.set_playbook(ShippedPath(f.playbook()));
  if (g.output == "json") PrintJson(response, out);
  else PrintDiagnosis(response, SystemClock::Instance().NowUs(), o.limit, out);
  return 0;
}

int RunFabricHealth(const GlobalOptions& g, const HealthOptions& o, std::ostream& out, std::ostream& err) {
  v1::ListAnomaliesRequest request;
  request.set_include_operator_changes(true);
  const int64_t now = SystemClock::Instance().NowUs();
  if (o.since.empty()) {
    request.set_active_only(true);
  } else {
    auto since = ParseDurationUs(o.since);
    if (!since.ok()) {
      err << "rocefab: --since: " << since.status().message() << "\n";
      return 2;
    }
    request.set_since_us(now - *since);
  }
  std::vector<v1::ListAnomaliesResponse> parts(CollectorShards(g).size());
  if (int code = WithShards(g, err, [&](auto& stub, auto* ctx, size_t i) {
        return stub.ListAnomalies(ctx, request, &parts[i]);
      });
      code != 0)
    return code;
  const v1::ListAnomaliesResponse response = MergeAnomalies(parts);
  if (g.output == "json") {
    PrintJson(response, out);
    return 0;
  }
  std::map<uint64_t, int> consequences;
  for (const auto& a : response.anomalies())
    if (a.caused_by() != 0) ++consequences[a.caused_by()];
  // Root causes first, across faults; then consequences nothing explains;
  // within each the worst first: by severity, then active before ended,
  // then the longest-lasting first. A consequence of a listed cause goes
  // under it (with --all) or is counted on its row.
  std::set<uint64_t> listed;
  for (const auto& a : response.anomalies()) listed.insert(a.id());
  std::vector<v1::Anomaly> rows(response.anomalies().begin(), response.anomalies().end());
  std::stable_sort(rows.begin(), rows.end(), [](const v1::Anomaly& a, const v1::Anomaly& b) {
    if (IsConsequenceKind(a.kind()) != IsConsequenceKind(b.kind())) return !IsConsequenceKind(a.kind());
    if (a.severity() != b.severity()) return a.severity() > b.severity();
    if ((a.end_us() == 0) != (b.end_us() == 0)) return a.end_us() == 0;
    return a.start_us() < b.start_us();
  });
  Table t({"SEVERITY", "KIND", "ENTITY", "SINCE", "STATE", "JOBS", "CONSEQUENCES", "SUMMARY"});
  int hidden = 0;
  auto add_row = [&](const v1::Anomaly& a, bool under) {
    std::string jobs;
    for (const auto& j : a.jobs()) StrAppend(&jobs, jobs.empty() ? "" : ",", j);
    if (!a.job().empty() && jobs.empty()) jobs = a.job();
    t.AddRow({SeverityName(a.severity(), "-"), under ? StrCat("  <- ", a.kind()) : a.kind(), a.entity(),
              Ago(response.now_us(), a.start_us()), a.end_us() ? "ended" : "active", jobs.empty() ? "-" : jobs,
              consequences.count(a.id()) ? StrCat(consequences[a.id()]) : "-", a.summary()});
  };
  for (const auto& a : rows) {
    const bool explained = a.caused_by() != 0 && listed.count(a.caused_by());
    if (explained) {
      ++hidden;
      continue;
    }
    add_row(a, false);
    if (o.all)
      for (const auto& c : rows)
        if (c.caused_by() == a.id()) add_row(c, true);
  }
  if (o.all) hidden = 0;
  // The operators' changes of the period, and drains still in effect:
  // what someone did is part of what the fabric is.
  auto print_changes = [&] {
    if (response.operator_changes_size() == 0) return;
    out << "\noperator changes (rocefab config history), newest last:\n";
    Table c({"  WHEN", "WHO", "ACTION", "TARGET", "STATE", "WHY"});
    for (const auto& ch : response.operator_changes())
      c.AddRow({StrCat("  ", Ago(response.now_us(), ch.at_us())), ch.who(), ch.action(), ch.target(),
                ch.in_effect() ? "in effect" : "-", ch.why().empty() ? "-" : ch.why()});
    c.Print(out);
  };
  if (t.rows() == 0 && hidden == 0) {
    out << (o.since.empty() ? "fabric healthy: no active anomalies\n"
                            : StrCat("no anomalies in the last ", o.since, "\n"));
    print_changes();
    return 0;
  }
  t.Print(out);
  if (hidden > 0)
    out << hidden << " consequence(s) (pause-tree victims, loss seen behind a bad link) are attributed to the "
        << "rows above; --all lists each under its cause\n";
  print_changes();
  return 0;
}

int RunAlertList(const GlobalOptions& g, const AlertOptions& o, std::ostream& out, std::ostream& err) {
  v1::ListAlertsRequest request;
  request.set_include_resolved(o.all);
  v1::ListAlertsResponse response;
  if (int code = WithCollector(g, err, [&](auto& stub, auto* ctx) { return stub.ListAlerts(ctx, request, &response); });
      code != 0)
    return code;
  if (g.output == "json") {
    PrintJson(response, out);
    return 0;
  }
  Table t({"STATUS", "ALERT", "SEVERITY", "ENTITY", "JOB", "SINCE", "SILENCED", "SUMMARY"});
  auto label = [](const v1::Alert& a, const char* k) {
    auto it = a.labels().find(k);
    return it == a.labels().end() ? std::string("-") : it->second;
  };
  for (const auto& a : response.alerts()) {
    auto summary = a.annotations().find("summary");
    t.AddRow({a.status(), label(a, "alertname"), label(a, "severity"), label(a, "entity"), label(a, "job"),
              Ago(response.now_us(), a.starts_at_us()), a.silenced_by() ? StrCat("by ", a.silenced_by()) : "-",
              summary == a.annotations().end() ? "" : summary->second});
  }
  if (t.rows() == 0) out << (o.all ? "no alerts\n" : "no alerts firing\n");
  else t.Print(out);
  if (response.silences_size() > 0) {
    out << "\nactive silences:\n";
    Table s({"  ID", "KIND", "ENTITY", "JOB", "ENDS", "BY", "COMMENT"});
    for (const auto& si : response.silences())
      s.AddRow({StrCat("  ", si.id()), si.kind().empty() ? "*" : si.kind(), si.entity().empty() ? "*" : si.entity(),
                si.job().empty() ? "*" : si.job(), StrCat("in ", FormatDurationUs((si.ends_at_us() - response.now_us()) / 60'000'000 * 60'000'000)),
                si.created_by(), si.comment()});
    s.Print(out);
  }
  if (response.outbox_pending() > 0)
    out << response.outbox_pending() << " notification(s) waiting for delivery (rocefab_collector_outbox_pending)\n";
  return 0;
}

int RunAlertSilence(const GlobalOptions& g, const AlertOptions& o, std::ostream& out, std::ostream& err) {
  if (o.kind.empty() && o.entity.empty() && o.job.empty()) {
    err << "rocefab: alert silence needs at least one of --kind, --entity, --job\n";
    return 2;
  }
  if (o.comment.empty()) {
    err << "rocefab: alert silence needs --comment: say why, for the next on-call\n";
    return 2;
  }
  auto duration = ParseDurationUs(o.duration);
  if (!duration.ok() || *duration <= 0) {
    err << "rocefab: --for: a positive duration, e.g. 30m or 2h\n";
    return 2;
  }
  v1::SilenceRequest request;
  request.set_allow_unknown(o.allow_unknown);
  auto* s = request.mutable_silence();
  s->set_kind(o.kind);
  s->set_entity(o.entity);
  s->set_job(o.job);
  s->set_comment(o.comment);
  s->set_created_by(ClaimedUser());
  s->set_ends_at_us(SystemClock::Instance().NowUs() + *duration);
  v1::SilenceResponse response;
  if (int code = WithCollector(g, err, [&](auto& stub, auto* ctx) { return stub.Silence(ctx, request, &response); });
      code != 0)
    return code;
  if (g.output == "json") PrintJson(response, out);
  else
    out << "silence " << response.silence().id() << " for " << o.duration << ": mutes "
        << response.matching_alerts() << " alert(s) firing now\n";
  return 0;
}

int RunAlertUnsilence(const GlobalOptions& g, const AlertOptions& o, std::ostream& out, std::ostream& err) {
  v1::UnsilenceRequest request;
  request.set_id(o.id);
  v1::UnsilenceResponse response;
  if (int code = WithCollector(g, err, [&](auto& stub, auto* ctx) { return stub.Unsilence(ctx, request, &response); });
      code != 0)
    return code;
  out << "silence " << o.id << " ended\n";
  return 0;
}

int RunFabricTraffic(const GlobalOptions& g, const TrafficOptions& o, std::ostream& out, std::ostream& err) {
  v1::TrafficMatrixRequest request;
  request.set_window_seconds(o.window_s);
  std::vector<v1::TrafficMatrixResponse> parts(CollectorShards(g).size());
  if (int code = WithShards(g, err, [&](auto& stub, auto* ctx, size_t i) {
        return stub.TrafficMatrix(ctx, request, &parts[i]);
      });
      code != 0)
    return code;
  const v1::TrafficMatrixResponse m = MergeTrafficMatrices(parts);
  if (g.output == "json") {
    PrintJson(m, out);
    return 0;
  }
  std::vector<const v1::RackTraffic*> rows;
  double total = 0;
  for (const auto& r : m.racks()) {
    rows.push_back(&r);
    total += r.bytes_per_s();
  }
  std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->bytes_per_s() > b->bytes_per_s(); });
  out << "traffic over the last " << m.window_seconds() << " s: " << Fixed(total * 8 / 1e9, 1) << " Gb/s between "
      << rows.size() << " rack pair(s); send rates of " << m.nics_from_nic_counters() << " NIC(s) from their counters, "
      << m.nics_from_port_counters() << " from their RTSW port";
  if (m.nics_unattributed() > 0)
    out << "; " << m.nics_unattributed() << " NIC(s) sent " << Fixed(m.unattributed_bytes_per_s() * 8 / 1e9, 1)
        << " Gb/s outside any running job (not in the matrix)";
  out << "\n";
  Table t({"FROM RACK", "TO RACK", "GB/S", "SHARE"});
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < o.top; ++i)
    t.AddRow({rows[i]->src_prefix(), rows[i]->dst_prefix(), Fixed(rows[i]->bytes_per_s() / 1e9, 2),
              total > 0 ? StrCat(Fixed(100 * rows[i]->bytes_per_s() / total, 1), "%") : "-"});
  if (!rows.empty()) t.Print(out);
  if (static_cast<int>(rows.size()) > o.top) out << "(" << rows.size() - o.top << " more; --top to list them)\n";
  if (!m.job_patterns().empty()) {
    out << "destinations by job:";
    for (const auto& [job, pattern] : std::map<std::string, std::string>(m.job_patterns().begin(), m.job_patterns().end()))
      out << " " << job << "=" << pattern;
    out << "  (ring: rank order, rail to rail; all_to_all and spread: over the job's racks)\n";
  }
  for (const auto& port : m.down_ports()) out << "down: " << port << "\n";
  for (const auto& note : m.notes()) out << "note: " << note << "\n";
  return 0;
}

}  // namespace rocefab::cli
