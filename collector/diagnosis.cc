#include "collector/diagnosis.h"

#include "common/findings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>

#include "common/clock.h"
#include "common/stats.h"
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
      {"link_degraded", 0.88}, {"ecn_misconfig", 0.88}, {"pfc_misconfig", 0.88}, {"lossless_drops", 0.85}, {"straggler", 0.85},
      {"buffer_threshold_drops", 0.88}, {"ecmp_imbalance", 0.6}, {"oversubscription", 0.6}, {"job_contention", 0.8}, {"latency_regression", 0.8},
      {"ecn_hotspot", 0.7},  {"silent_loss", 0.55},   {"config_drift", 0.45}, {"pfc_pause", 0.4},
      {"buffer_high", 0.3},
  };
  auto it = kBase.find(kind);
  return it == kBase.end() ? 0.3 : it->second;
}

// The most likely single change of level in `v` (least squares over every
// split), when it is a drop: at least 5%, with a two-sample t statistic of
// at least 4 (stricter than a fixed split's 2, since the split is chosen
// as the best of many).
struct Drop {
  bool found = false;
  size_t at = 0;  // first index after the change
};
Drop FindDrop(const std::vector<double>& v) {
  const size_t n = v.size();
  constexpr size_t kMinSide = 3;
  if (n < 2 * kMinSide) return {};
  std::vector<double> sum(n + 1, 0), sq(n + 1, 0);
  for (size_t i = 0; i < n; ++i) sum[i + 1] = sum[i] + v[i], sq[i + 1] = sq[i] + v[i] * v[i];
  auto sse = [&](size_t from, size_t to) {
    const double k = static_cast<double>(to - from), s = sum[to] - sum[from];
    return (sq[to] - sq[from]) - s * s / k;
  };
  size_t best = 0;
  double best_cost = 0;
  for (size_t k = kMinSide; k + kMinSide <= n; ++k) {
    const double cost = sse(0, k) + sse(k, n);
    if (best == 0 || cost < best_cost) best = k, best_cost = cost;
  }
  const double k = static_cast<double>(best), rest = static_cast<double>(n - best);
  const double m1 = sum[best] / k, m2 = (sum[n] - sum[best]) / rest;
  if (m1 <= 0 || m1 - m2 < 0.05 * m1) return {};
  const double variance = std::max(best_cost, 0.0) / static_cast<double>(n - 2);
  const double t = variance > 0 ? (m1 - m2) / std::sqrt(variance * (1 / k + 1 / rest)) : INFINITY;
  if (t < 4) return {};
  return {true, best};
}

// Timing: a cause starts when the job's trouble starts. 1 when [start,
// end) began from 5 s after to `lead_us` before a degraded interval, 0.85
// when it only overlaps one, 0.6 otherwise. With no degraded interval the
// window is the trouble asked about: 1 when it began from `lead_us` before
// the window on, 0.85 when it was already there (the news ranks first among
// equals; an old condition is still listed).
double TimingFactor(const v1::DiagnoseJobResponse& out, int64_t start_us, int64_t end_us, int64_t window_start_us,
                    int64_t window_end_us, int64_t lead_us) {
  if (out.degraded_size() == 0) return start_us >= window_start_us - lead_us ? 1.0 : 0.85;
  double best = 0.6;
  for (const auto& d : out.degraded()) {
    const int64_t lead = d.start_us() - start_us;
    const bool overlaps = start_us <= (d.end_us() ? d.end_us() : window_end_us) && (end_us == 0 || end_us >= d.start_us());
    if (lead >= -5'000'000 && lead <= lead_us) best = 1.0;
    else if (overlaps) best = std::max(best, 0.85);
  }
  return best;
}

double SeverityFactor(v1::Severity s) {
  switch (s) {
    case v1::SEVERITY_CRITICAL: return 1.0;
    case v1::SEVERITY_WARNING: return 0.92;
    default: return 0.85;
  }
}

// A symptom's confidence, as a share of what it would have as a cause.
constexpr double kSymptomShare = 0.35;

// A finding first judged a cause is the sign of another; `whose` says
// which, appended to its summary.
void MakeSign(v1::Finding& f, std::string_view whose) {
  f.set_role("symptom");
  f.set_confidence(f.confidence() * kSymptomShare);
  f.set_summary(StrCat(f.summary(), "; ", whose));
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
    fp.nic_links.insert(StrCat(r.host(), "/", r.nic()));
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
    fp.nic_links.insert(peer);
    rtsws.insert(EntityDevice(peer));
  }
  for (const auto& h : fp.hosts)
    if (const v1::TopoHost* host = topology->FindHost(h)) zones.insert(host->zone());
  std::set<std::string> ctsws;
  for (const std::string& rtsw : rtsws) {
    fp.devices.insert(rtsw);
    // Every NIC of the job on one RTSW: its traffic turns there and never
    // crosses the tiers above.
    if (rtsws.size() < 2) continue;
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
  // A host of the job: its NICs, its GPUs, or the whole host.
  if (fp.hosts.count(device)) return fp.ports.count(e) > 0 || e.find("/gpu") != std::string::npos || e == device;
  if (fp.ports.count(e)) return true;
  // A whole switch, or one of its buffer pools.
  if (fp.devices.count(device) && (e == device || a.kind() == "buffer_high")) return true;
  // Without a topology nothing rules a switch out.
  return !fp.topology_known && fp.hosts.count(device) == 0 && !e.empty();
}

bool Touches(const Footprint& fp, const v1::OperatorChange& change) {
  const std::string& a = change.action();
  if (!a.starts_with("drain") && a != "undrain") return true;  // a rollout reaches every switch
  const std::string& target = change.target();
  return fp.ports.count(target) > 0 || fp.devices.count(target) > 0 || fp.devices.count(EntityDevice(target)) > 0;
}

v1::DiagnoseJobResponse Diagnose(const DiagnoseInput& in) {
  v1::DiagnoseJobResponse out;
  *out.mutable_job() = in.job;
  out.set_window_start_us(in.window_start_us);
  out.set_window_end_us(in.window_end_us);
  out.set_footprint_ports(static_cast<uint32_t>(in.footprint.ports.size()));
  out.set_footprint_switches(static_cast<uint32_t>(in.footprint.devices.size()));

  // The collective the busbw figures are of: the one with the most records.
  std::map<std::string, uint64_t> per_op;
  for (const auto& p : in.timeline) per_op[p.op()] += p.records();
  if (per_op.empty())
    for (const auto& p : in.history) per_op[p.op()] += p.records();
  std::string op;
  for (const auto& [name, n] : per_op)
    if (op.empty() || n > per_op[op]) op = name;
  out.set_busbw_op(op);
  out.set_last_record_us(in.last_record_us);

  // The job's own regression and stall intervals, in and before the window.
  std::vector<const v1::Anomaly*> symptoms;
  for (const auto* list : {&in.anomalies, &in.history_symptoms})
    for (const v1::Anomaly& a : *list)
      if (IsJobSymptomKind(a.kind()) && a.job() == in.job.id()) symptoms.push_back(&a);
  auto degraded_at = [&](int64_t start_us) {
    const int64_t end_us = start_us + std::max<int64_t>(in.bucket_us, 1);
    for (const v1::Anomaly* a : symptoms)
      if (a->start_us() < end_us && (a->end_us() == 0 || a->end_us() > start_us)) return true;
    return false;
  };

  // The baseline is the job's level before what is judged, never the
  // judged period itself, so a short window cannot make a slowdown its norm:
  //  1. the level before a drop in its series (history, then the window);
  //  2. else its healthy buckets before the window;
  //  3. else the regression detector's healthy level.
  std::vector<double> series;
  std::vector<int64_t> series_us;
  for (const auto* points : {&in.history, &in.timeline})
    for (const auto& p : *points)
      if (p.op() == op && p.records() > 0) series.push_back(p.mean_busbw_gbs()), series_us.push_back(p.start_us());
  const Drop drop = FindDrop(series);
  int64_t drop_us = 0;
  std::vector<double> before;
  int64_t before_from_us = 0;
  for (const auto& p : in.history)
    if (p.op() == op && p.records() > 0 && !degraded_at(p.start_us())) {
      before.push_back(p.mean_busbw_gbs());
      if (before_from_us == 0) before_from_us = p.start_us();
    }
  double spread = -1;  // robust standard deviation of the baseline; <0 unknown
  constexpr size_t kMinBaselineBuckets = 3;
  if (drop.found) {
    const std::vector<double> pre(series.begin(), series.begin() + static_cast<std::ptrdiff_t>(drop.at));
    drop_us = series_us[drop.at];
    spread = RobustSpread(pre);
    out.set_baseline_busbw_gbs(Median(pre));
    out.set_baseline_from(StrCat("its ", pre.size(), " buckets before a drop at ", FormatUtcTimeOfDay(drop_us)));
  } else if (before.size() >= kMinBaselineBuckets) {
    spread = RobustSpread(before);
    out.set_baseline_busbw_gbs(Median(before));
    out.set_baseline_from(StrCat("its ", before.size(), " healthy buckets since ", FormatUtcTimeOfDay(before_from_us)));
  } else {
    // A job younger than the window: the regression detector's healthy
    // level, which it learned from the job's collectives before the slowdown.
    for (const v1::Anomaly* a : symptoms)
      for (const auto& ev : a->evidence())
        if (a->kind() == "busbw_regression" && ev.counter() == "busbw_gbs" && ev.total() > 0 &&
            (ev.note().empty() || ev.note().starts_with(op + "/")))
          out.set_baseline_busbw_gbs(ev.total()), out.set_baseline_from("the regression detector's healthy level");
  }
  const double baseline = out.baseline_busbw_gbs();

  // Busbw of `op` over [from, to) of the window: the median bucket.
  auto level = [&](int64_t from_us, int64_t to_us) {
    std::vector<double> v;
    for (const auto& p : in.timeline)
      if (p.op() == op && p.records() > 0 && p.start_us() + in.bucket_us > from_us && p.start_us() < to_us)
        v.push_back(p.mean_busbw_gbs());
    return v.empty() ? 0.0 : Median(v);
  };
  // The latest level: the newest few buckets with records.
  std::vector<double> latest;
  for (auto it = in.timeline.rbegin(); it != in.timeline.rend() && latest.size() < 3; ++it)
    if (it->op() == op && it->records() > 0) latest.push_back(it->mean_busbw_gbs());
  if (!latest.empty()) out.set_recent_busbw_gbs(Median(latest));

  // Degraded intervals: the job's own regression and stall anomalies.
  bool stalled_now = false;
  for (const v1::Anomaly& a : in.anomalies) {
    if (!IsJobSymptomKind(a.kind()) || a.job() != in.job.id()) continue;
    // A regression that fell again is two intervals: each change is an
    // onset that a cause may have begun.
    const v1::Evidence* step = nullptr;
    if (a.kind() == "busbw_regression")
      for (const auto& ev : a.evidence())
        if (ev.counter() == "busbw_step" && ev.at_us() > a.start_us() && (a.end_us() == 0 || ev.at_us() < a.end_us()))
          step = &ev;
    if (step != nullptr) {
      v1::DegradedInterval* d = out.add_degraded();
      d->set_start_us(step->at_us());
      d->set_end_us(a.end_us());
      d->set_kind("busbw_further_drop");
      const double now = baseline > 0 ? level(step->at_us(), a.end_us() ? a.end_us() : in.window_end_us + 1) : 0;
      d->set_busbw_ratio(now > 0 ? now / baseline : baseline > 0 ? step->peak_rate() / baseline : 1 - a.magnitude());
    }
    v1::DegradedInterval* d = out.add_degraded();
    d->set_start_us(a.start_us());
    d->set_end_us(step != nullptr ? step->at_us() : a.end_us());
    d->set_kind(a.kind());
    if (a.kind() == "job_stalled") {
      if (a.end_us() == 0) stalled_now = true;
    } else if (baseline > 0) {
      d->set_busbw_ratio(level(a.start_us(), d->end_us() ? d->end_us() : in.window_end_us + 1) / baseline);
    } else {
      d->set_busbw_ratio(1 - a.magnitude());
    }
  }
  // A slowdown the detectors have not (yet) called: the newest run of
  // buckets below the baseline's range, by at least 5% and by three of its
  // robust standard deviations. A slowdown is never called healthy.
  if (out.degraded_size() == 0 && baseline > 0 && spread >= 0) {
    const double floor = std::min(baseline * 0.95, baseline - 3 * spread);
    int64_t run_start_us = 0;
    for (const auto& p : in.timeline) {
      if (p.op() != op || p.records() == 0) continue;
      if (p.mean_busbw_gbs() < floor) {
        if (run_start_us == 0) run_start_us = p.start_us();
      } else {
        run_start_us = 0;
      }
    }
    // A drop found in the series began the slowdown, maybe before the window.
    if (drop_us != 0 && run_start_us != 0) run_start_us = std::min(run_start_us, drop_us);
    if (run_start_us != 0 && out.recent_busbw_gbs() < floor) {
      v1::DegradedInterval* d = out.add_degraded();
      d->set_start_us(run_start_us);
      d->set_kind("busbw_below_baseline");
      d->set_busbw_ratio(level(run_start_us, in.window_end_us + 1) / baseline);
    }
  }
  std::sort(out.mutable_degraded()->begin(), out.mutable_degraded()->end(),
            [](const auto& a, const auto& b) { return a.start_us() < b.start_us(); });
  // The verdict quotes the newest interval's figures, as its table row does.
  const v1::DegradedInterval* newest = nullptr;
  for (const auto& d : out.degraded())
    if (d.kind() != "job_stalled") newest = &d;
  if (newest != nullptr && baseline > 0 && newest->busbw_ratio() > 0)
    out.set_recent_busbw_gbs(newest->busbw_ratio() * baseline);
  if (baseline > 0 && out.recent_busbw_gbs() > 0) out.set_busbw_ratio(out.recent_busbw_gbs() / baseline);

  // Findings: anomalies on the job's footprint, ranked.
  std::map<uint64_t, const v1::Anomaly*> by_id;
  for (const v1::Anomaly& a : in.anomalies) by_id[a.id()] = &a;
  std::vector<v1::Finding> findings;
  // --onset-only keeps what began in the window, and what began before it
  // and still lasts (reported as ongoing): an old storm is still a cause.
  // Judged on each entity's condition of one kind as a whole, as the
  // findings are merged below: one there before the window that cleared
  // inside it and came back (a collision on a switch whose link went down
  // for two seconds) did not begin in the window.
  std::vector<const v1::Anomaly*> touching;
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> condition;  // first start, last end
  for (const v1::Anomaly& a : in.anomalies) {
    if (IsJobSymptomKind(a.kind()) || !Touches(in.footprint, a, in.job.id())) continue;
    touching.push_back(&a);
    const auto [it, fresh] = condition.try_emplace({a.kind(), a.entity()}, a.start_us(), a.end_us());
    if (fresh) continue;
    it->second.first = std::min(it->second.first, a.start_us());
    it->second.second = it->second.second == 0 || a.end_us() == 0 ? 0 : std::max(it->second.second, a.end_us());
  }
  for (const v1::Anomaly* anomaly : touching) {
    const v1::Anomaly& a = *anomaly;
    const auto [began, ended] = condition.at({a.kind(), a.entity()});
    const bool lasting = ended == 0 || ended >= in.window_end_us;
    if (in.onset_only && began < in.window_start_us && !lasting) continue;
    v1::Finding f;
    f.set_kind(a.kind());
    f.set_entity(a.entity());
    f.set_start_us(a.start_us());
    f.set_end_us(a.end_us());
    *f.mutable_evidence() = StrongestFirst(a.evidence());
    f.set_summary(a.summary());
    f.set_playbook(PlaybookFor(a.kind()));
    f.set_anomaly_id(a.id());
    double c = BaseConfidence(a.kind()) * SeverityFactor(a.severity()) *
               (0.8 + 0.2 * std::clamp(a.magnitude(), 0.0, 1.0));
    const bool symptom = a.caused_by() != 0 && by_id.count(a.caused_by());
    if (symptom) c *= kSymptomShare;
    f.set_role(symptom ? "symptom" : "cause");
    c *= TimingFactor(out, a.start_us(), a.end_us(), in.window_start_us, in.window_end_us, 10'000'000);
    f.set_confidence(std::clamp(c, 0.0, 0.99));
    findings.push_back(std::move(f));
  }
  // The operators' own changes on the job's paths: who, when, why. A drain
  // of a port its NIC needs stops the job as surely as a dead link.
  for (const v1::OperatorChange& c : in.changes) {
    if (!c.in_effect() && (c.at_us() < in.window_start_us - 600'000'000 || c.at_us() > in.window_end_us)) continue;
    v1::Finding f;
    f.set_kind("operator_change");
    f.set_entity(c.target());
    f.set_start_us(c.at_us());
    f.set_end_us(c.in_effect() ? 0 : c.at_us());
    f.set_role("cause");
    f.set_playbook(PlaybookFor("operator_change"));
    if (!Touches(in.footprint, c)) continue;
    const bool nic_link = in.footprint.nic_links.count(c.target()) > 0;
    const bool drain = c.action().starts_with("drain");
    // A drain that cuts one of the job's NICs off is near certain; a
    // capacity or config change on its paths is a suspect.
    double base = drain && nic_link && c.in_effect() ? 0.97 : drain ? 0.5 : c.action() == "undrain" ? 0.3 : 0.45;
    // A change lasts as long as it is in effect, and one in effect is news
    // whenever it was made (window start 0).
    base *= TimingFactor(out, c.at_us(), c.in_effect() ? 0 : c.at_us(), 0, in.window_end_us, 30'000'000);
    f.set_confidence(std::clamp(base, 0.0, 0.99));
    f.set_summary(StrCat(c.action(), " of ", c.target(), " by ", c.who(), " at ", FormatUtcTimeOfDay(c.at_us()),
                         c.why().empty() ? "" : StrCat(": ", c.why()),
                         c.generation() ? StrCat(" (generation ", c.generation(), ")") : "",
                         c.in_effect() ? "; still in effect" : ""));
    v1::Evidence* ev = f.add_evidence();
    ev->set_entity(c.target());
    ev->set_counter("controller_audit");
    ev->set_note(StrCat("rocefab config history: ", c.action(), " by ", c.who()));
    findings.push_back(std::move(f));
  }
  // A link that went down as part of a flap is one fault: the flap is the
  // cause, its down a sign of it, never a second root cause.
  std::set<std::string> flapping;
  for (const v1::Finding& f : findings)
    if (f.kind() == "link_flap" && f.role() == "cause") flapping.insert(f.entity());
  for (v1::Finding& f : findings)
    if (f.kind() == "link_down" && f.role() == "cause" && flapping.count(f.entity()))
      MakeSign(f, StrCat("part of the link_flap on ", f.entity()));
  // An uneven spread on a switch that began while one of its links toward
  // another switch was down or flapping is that link's doing: a link going
  // down moves its load onto the switch's other links, and one coming back
  // moves it again. (The imbalance detector does not judge such a switch
  // while it knows of the link's fault, but it knows of a flap only from
  // its second down, and the readings between a first down and a second
  // show the moves.) The link's fault is the cause, the spread a sign of
  // it. A link's finding names its end nearest the hosts, so a switch's
  // links toward the tier above and a host's links (which move no load)
  // never name a switch of the tier above.
  std::vector<std::pair<std::string, const v1::Finding*>> moved;  // the link's device, its finding
  for (const v1::Finding& f : findings)
    if (f.kind() == "link_flap" || f.kind() == "link_down") moved.push_back({EntityDevice(f.entity()), &f});
  for (v1::Finding& f : findings) {
    if (f.kind() != "ecmp_imbalance" || f.role() != "cause") continue;
    for (const auto& [device, link] : moved)
      if (device == f.entity() && f.start_us() >= link->start_us() &&
          (link->end_us() == 0 || f.start_us() <= link->end_us())) {
        MakeSign(f, StrCat("began while its link ", link->entity(), " was ",
                           link->kind() == "link_flap" ? "flapping" : "down", ", which moves load"));
        break;
      }
  }
  // One entity's finding of one kind that cleared and came back is one
  // fault: one finding, from its first start to its last end (its
  // condition, above), with the evidence of its likeliest stretch.
  {
    std::map<std::pair<std::string, std::string>, size_t> first;
    std::vector<v1::Finding> merged;
    for (v1::Finding& f : findings) {
      const auto [it, fresh] = f.kind() == "operator_change"
                                   ? std::make_pair(first.end(), true)
                                   : first.try_emplace({f.kind(), f.entity()}, merged.size());
      if (fresh) {
        merged.push_back(std::move(f));
        continue;
      }
      v1::Finding& kept = merged[it->second];
      if (f.confidence() > kept.confidence()) kept = std::move(f);
      const auto [began, ended] = condition.at({kept.kind(), kept.entity()});
      kept.set_start_us(began);
      kept.set_end_us(ended);
    }
    findings = std::move(merged);
  }
  // A switch's fault named by one of its ports at one time and by the whole
  // switch at another (its threshold drops or ECN profile, as more of its
  // ports showed it) is one fault: the switch's finding is the cause, the
  // port's a sign of it.
  std::set<std::pair<std::string, std::string>> switch_wide;  // (kind, switch)
  for (const v1::Finding& f : findings)
    if (f.role() == "cause" && f.kind() != "operator_change" && f.entity().find('/') == std::string::npos)
      switch_wide.insert({f.kind(), f.entity()});
  for (v1::Finding& f : findings) {
    const size_t slash = f.entity().find('/');
    if (f.role() != "cause" || slash == std::string::npos) continue;
    const std::string device = f.entity().substr(0, slash);
    if (!switch_wide.count({f.kind(), device})) continue;
    MakeSign(f, StrCat("part of the switch-wide ", f.kind(), " on ", device));
  }
  RankFindings(findings, in.window_start_us);
  for (auto& f : findings) *out.add_findings() = std::move(f);

  // What changed: versions changed from 30 minutes before the window's
  // start or its first degraded interval, whichever is earlier, to the
  // window's end.
  const int64_t changes_from_us =
      (out.degraded_size() > 0 ? std::min(out.degraded(0).start_us(), in.window_start_us) : in.window_start_us) -
      kChangeLeadUs;
  for (const v1::ComponentChange& c : in.component_changes)
    if (c.at_us() >= changes_from_us && c.at_us() <= in.window_end_us) *out.add_changes() = c;

  const v1::Finding* top = TopFinding(out);
  if (top) out.set_playbook(top->playbook());

  if (stalled_now) out.set_state("stalled");
  else if (out.degraded_size() > 0) out.set_state("degraded");
  else if (in.timeline.empty() || per_op.empty() || out.recent_busbw_gbs() <= 0) out.set_state("unknown");
  else out.set_state("healthy");
  out.set_verdict(ComposeVerdict(out));
  return out;
}

}  // namespace rocefab::collector
