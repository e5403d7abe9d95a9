#include "collector/diagnosis.h"

#include "common/findings.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "common/clock.h"
#include "common/strings.h"
#include "common/topology.h"

namespace rocefab::collector {
namespace {

// How likely each kind is to be the cause of what a job suffers, before
// timing and strength: a dead or storming element stops a ring outright; a
// pause victim or a buffer level is usually a consequence.
double BaseConfidence(const std::string& kind) {
  static const std::map<std::string, double> kBase = {
      {"link_down", 0.95},   {"pfc_storm", 0.92},     {"link_flap", 0.9},   {"link_errors", 0.88},
      {"link_degraded", 0.88}, {"ecn_misconfig", 0.88}, {"lossless_drops", 0.85}, {"straggler", 0.85},
      {"ecn_hotspot", 0.7},  {"silent_loss", 0.55},   {"config_drift", 0.45}, {"pfc_pause", 0.4},
      {"buffer_high", 0.3},
  };
  auto it = kBase.find(kind);
  return it == kBase.end() ? 0.3 : it->second;
}

double SeverityFactor(v1::Severity s) {
  switch (s) {
    case v1::SEVERITY_CRITICAL: return 1.0;
    case v1::SEVERITY_WARNING: return 0.92;
    default: return 0.85;
  }
}

}  // namespace

std::string PlaybookFor(const std::string& kind) { return StrCat("playbooks/", kind, ".md"); }

bool IsJobSymptomKind(const std::string& kind) {
  return kind == "busbw_regression" || kind == "job_stalled";
}

Footprint JobFootprint(const Topology* topology, const v1::Job& job, const std::set<std::string>& drained) {
  Footprint fp;
  for (const auto& r : job.ranks()) {
    fp.hosts.insert(r.host());
    fp.ports.insert(StrCat(r.host(), "/", r.nic()));
  }
  if (topology == nullptr) return fp;
  fp.topology_known = true;
  auto role = [&](const std::string& device) {
    const v1::TopoSwitch* sw = topology->FindSwitch(device);
    return sw ? sw->role() : v1::SWITCH_ROLE_UNSPECIFIED;
  };
  auto add_link = [&](const std::string& port, int link) {
    fp.ports.insert(port);
    fp.ports.insert(topology->PeerOf(link, port));
  };
  std::set<std::string> rtsws, zones;
  for (const std::string& nic : std::vector<std::string>(fp.ports.begin(), fp.ports.end())) {
    const int link = topology->LinkOfPort(nic);
    if (link < 0) continue;
    const std::string& peer = topology->PeerOf(link, nic);
    fp.ports.insert(peer);
    rtsws.insert(EntityDevice(peer));
  }
  for (const auto& h : fp.hosts)
    if (const v1::TopoHost* host = topology->FindHost(h)) zones.insert(host->zone());
  std::set<std::string> ctsws;
  for (const std::string& rtsw : rtsws) {
    fp.devices.insert(rtsw);
    for (const std::string& port : topology->PortsOf(rtsw)) {
      const std::string full = StrCat(rtsw, "/", port);
      const int link = topology->LinkOfPort(full);
      if (link < 0 || drained.count(full)) continue;
      const std::string& peer = topology->PeerOf(link, full);
      if (drained.count(peer) || role(EntityDevice(peer)) == v1::SWITCH_ROLE_UNSPECIFIED) continue;
      add_link(full, link);
      ctsws.insert(EntityDevice(peer));
    }
  }
  for (const std::string& ctsw : ctsws) {
    fp.devices.insert(ctsw);
    if (zones.size() < 2) continue;
    for (const std::string& port : topology->PortsOf(ctsw)) {
      const std::string full = StrCat(ctsw, "/", port);
      const int link = topology->LinkOfPort(full);
      if (link < 0 || drained.count(full)) continue;
      const std::string& peer = topology->PeerOf(link, full);
      if (role(EntityDevice(peer)) != v1::SWITCH_ROLE_ATSW) continue;
      add_link(full, link);
      fp.devices.insert(EntityDevice(peer));
    }
  }
  return fp;
}

bool Touches(const Footprint& fp, const v1::Anomaly& a, const std::string& job_id) {
  if (!a.job().empty()) return a.job() == job_id;
  const std::string& e = a.entity();
  const std::string device = EntityDevice(e);
  if (fp.hosts.count(device)) return fp.ports.count(e) > 0 || e.find("/gpu") != std::string::npos;
  if (fp.ports.count(e)) return true;
  // A whole switch, or one of its buffer pools.
  if (fp.devices.count(device) && (e == device || a.kind() == "buffer_high")) return true;
  // Without a topology nothing rules a switch out.
  return !fp.topology_known && fp.hosts.count(device) == 0 && !e.empty();
}

v1::DiagnoseJobResponse Diagnose(const DiagnoseInput& in) {
  v1::DiagnoseJobResponse out;
  *out.mutable_job() = in.job;
  out.set_window_start_us(in.window_start_us);
  out.set_window_end_us(in.window_end_us);
  out.set_footprint_ports(static_cast<uint32_t>(in.footprint.ports.size()));
  out.set_footprint_switches(static_cast<uint32_t>(in.footprint.devices.size()));

  // Busbw over the window, for the verdict line: the busiest collective's
  // healthy level (90th percentile of its buckets) and its latest bucket.
  std::map<std::string, uint64_t> per_op;
  for (const auto& p : in.timeline) per_op[p.op()] += p.records();
  std::string op;
  for (const auto& [name, n] : per_op)
    if (op.empty() || n > per_op[op]) op = name;
  std::vector<double> levels;
  for (const auto& p : in.timeline)
    if (p.op() == op) {
      levels.push_back(p.mean_busbw_gbs());
      out.set_recent_busbw_gbs(p.mean_busbw_gbs());
    }
  if (!levels.empty()) {
    std::sort(levels.begin(), levels.end());
    out.set_baseline_busbw_gbs(levels[static_cast<size_t>(0.9 * static_cast<double>(levels.size() - 1))]);
  }

  // Degraded intervals: the job's own regression and stall anomalies.
  bool stalled_now = false;
  for (const v1::Anomaly& a : in.anomalies) {
    if (!IsJobSymptomKind(a.kind()) || a.job() != in.job.id()) continue;
    v1::DegradedInterval* d = out.add_degraded();
    d->set_start_us(a.start_us());
    d->set_end_us(a.end_us());
    d->set_kind(a.kind());
    d->set_busbw_ratio(a.kind() == "job_stalled" ? 0 : 1 - a.magnitude());
    if (a.kind() == "job_stalled" && a.end_us() == 0) stalled_now = true;
  }
  std::sort(out.mutable_degraded()->begin(), out.mutable_degraded()->end(),
            [](const auto& a, const auto& b) { return a.start_us() < b.start_us(); });

  // Findings: anomalies on the job's footprint, ranked.
  std::map<uint64_t, const v1::Anomaly*> by_id;
  for (const v1::Anomaly& a : in.anomalies) by_id[a.id()] = &a;
  std::vector<v1::Finding> findings;
  for (const v1::Anomaly& a : in.anomalies) {
    if (IsJobSymptomKind(a.kind()) || !Touches(in.footprint, a, in.job.id())) continue;
    if (in.onset_only && a.start_us() < in.window_start_us) continue;
    v1::Finding f;
    f.set_kind(a.kind());
    f.set_entity(a.entity());
    f.set_start_us(a.start_us());
    f.set_end_us(a.end_us());
    *f.mutable_evidence() = a.evidence();
    f.set_summary(a.summary());
    f.set_playbook(PlaybookFor(a.kind()));
    f.set_anomaly_id(a.id());
    double c = BaseConfidence(a.kind()) * SeverityFactor(a.severity()) *
               (0.8 + 0.2 * std::clamp(a.magnitude(), 0.0, 1.0));
    const bool symptom = a.caused_by() != 0 && by_id.count(a.caused_by());
    if (symptom) c *= 0.35;
    f.set_role(symptom ? "symptom" : "cause");
    // Timing: a cause starts when the job's trouble starts.
    if (out.degraded_size() > 0) {
      double best = 0.6;
      for (const auto& d : out.degraded()) {
        const int64_t lead = d.start_us() - a.start_us();
        const bool overlaps = a.start_us() <= (d.end_us() ? d.end_us() : in.window_end_us) &&
                              (a.end_us() == 0 || a.end_us() >= d.start_us());
        if (lead >= -5'000'000 && lead <= 10'000'000) best = 1.0;
        else if (overlaps) best = std::max(best, 0.85);
      }
      c *= best;
    }
    f.set_confidence(std::clamp(c, 0.0, 0.99));
    findings.push_back(std::move(f));
  }
  RankFindings(findings);
  for (auto& f : findings) *out.add_findings() = std::move(f);

  const v1::Finding* top = TopFinding(out);
  if (top) out.set_playbook(top->playbook());

  char busbw[160] = "";
  if (out.baseline_busbw_gbs() > 0)
    std::snprintf(busbw, sizeof busbw, "busbw %.1f GB/s now vs %.1f GB/s baseline", out.recent_busbw_gbs(),
                  out.baseline_busbw_gbs());
  std::string cause = top ? StrCat(top->kind(), " on ", top->entity(), " (confidence ",
                                   static_cast<int>(top->confidence() * 100 + 0.5), "%)")
                          : "";
  if (stalled_now) {
    out.set_state("stalled");
    out.set_verdict(StrCat("STALLED: no collective completes",
                           top ? StrCat("; most likely cause: ", cause) : "; no fabric cause found"));
  } else if (out.degraded_size() > 0) {
    out.set_state("degraded");
    out.set_verdict(StrCat("DEGRADED since ", FormatUtcTimeOfDay(out.degraded(0).start_us()), *busbw ? StrCat(" (", busbw, ")") : "",
                           top ? StrCat("; most likely cause: ", cause)
                               : "; no fabric cause on its paths: check GPUs, hosts and software"));
  } else if (top) {
    out.set_state("healthy");
    out.set_verdict(StrCat("healthy busbw", *busbw ? StrCat(" (", busbw, ")") : "", "; ",
                           out.findings_size(), " anomaly(ies) on its paths did not slow it; top: ", cause));
  } else if (in.timeline.empty() && in.anomalies.empty()) {
    out.set_state("unknown");
    out.set_verdict("no collective records and no anomalies in the window");
  } else {
    out.set_state("healthy");
    out.set_verdict(StrCat("healthy", *busbw ? StrCat(": ", busbw) : "", "; no anomaly on its paths"));
  }
  return out;
}

}  // namespace rocefab::collector
