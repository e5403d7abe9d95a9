#include "common/findings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "common/clock.h"
#include "common/counters.h"
#include "common/strings.h"

namespace rocefab {

const char* SeverityName(v1::Severity severity, const char* unset) {
  switch (severity) {
    case v1::SEVERITY_CRITICAL: return "critical";
    case v1::SEVERITY_WARNING: return "warning";
    case v1::SEVERITY_INFO: return "info";
    default: return unset;
  }
}

bool IsConsequenceKind(const std::string& kind) {
  return kind == "pfc_pause" || kind == "silent_loss" || kind == "busbw_regression" || kind == "job_stalled" ||
         kind == "buffer_high";
}

namespace {

// 0: a root cause; 1: a consequence kind nothing explains (a weak root);
// 2: a consequence of another finding.
int RankClass(const v1::Finding& f) {
  if (f.role() == "symptom") return 2;
  return IsConsequenceKind(f.kind()) ? 1 : 0;
}

}  // namespace

void RankFindings(std::vector<v1::Finding>& findings, int64_t news_from_us) {
  std::stable_sort(findings.begin(), findings.end(), [&](const v1::Finding& a, const v1::Finding& b) {
    if (RankClass(a) != RankClass(b)) return RankClass(a) < RankClass(b);
    if (a.confidence() != b.confidence()) return a.confidence() > b.confidence();
    const bool a_new = a.start_us() >= news_from_us, b_new = b.start_us() >= news_from_us;
    if (a_new != b_new) return a_new;
    return a.start_us() < b.start_us();
  });
}

const v1::Finding* TopFinding(const v1::DiagnoseJobResponse& diagnosis) {
  for (const auto& f : diagnosis.findings())
    if (f.role() == "cause") return &f;
  return diagnosis.findings_size() > 0 ? &diagnosis.findings(0) : nullptr;
}

namespace {

std::string Percent(double confidence) { return StrCat(static_cast<int>(confidence * 100 + 0.5), "%"); }

// "pfc_storm on z1-r02-h1/mlx5_0 (confidence 92%)", and when it began
// before the window and still lasts, says so: a short window must not make
// an old cause look absent or new.
std::string Cause(const v1::Finding& f, int64_t window_start_us) {
  // A neighbour is a job, not an element of the fabric.
  std::string text = StrCat(f.kind(), f.kind() == "job_contention" ? " from job " : " on ", f.entity(),
                            " (confidence ", Percent(f.confidence()));
  if (f.start_us() < window_start_us && f.end_us() == 0)
    StrAppend(&text, ", ongoing since ", FormatUtcTimeOfDay(f.start_us()), ", before the window");
  return StrCat(text, ")");
}

std::string Busbw(const v1::DiagnoseJobResponse& d) {
  char buf[200];
  const std::string op = d.busbw_op().empty() ? "" : StrCat(d.busbw_op(), " ");
  if (d.baseline_busbw_gbs() > 0 && d.recent_busbw_gbs() > 0)
    std::snprintf(buf, sizeof buf, "%sbusbw %.1f GB/s vs %.1f GB/s baseline (%.2fx, baseline from %s)", op.c_str(),
                  d.recent_busbw_gbs(), d.baseline_busbw_gbs(), d.busbw_ratio(), d.baseline_from().c_str());
  else if (d.recent_busbw_gbs() > 0)
    std::snprintf(buf, sizeof buf, "%sbusbw %.1f GB/s; no baseline before the window to compare with", op.c_str(),
                  d.recent_busbw_gbs());
  else
    return "";
  return buf;
}

// 1234567 -> "1.23M", with `unit` after a space.
std::string Si(double v, const char* unit) {
  char buf[64];
  const double m = std::fabs(v);
  if (m >= 1e9) std::snprintf(buf, sizeof buf, "%.2fG%s", v / 1e9, unit);
  else if (m >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM%s", v / 1e6, unit);
  else if (m >= 1e3) std::snprintf(buf, sizeof buf, "%.2fk%s", v / 1e3, unit);
  else std::snprintf(buf, sizeof buf, "%.4g%s", v, unit);
  return buf;
}

// Microseconds as the largest sensible unit: "812.4 ms", "3.20 s".
std::string Micros(double us) {
  char buf[48];
  if (std::fabs(us) >= 1e6) std::snprintf(buf, sizeof buf, "%.2f s", us / 1e6);
  else if (std::fabs(us) >= 1e3) std::snprintf(buf, sizeof buf, "%.1f ms", us / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f us", us);
  return buf;
}

}  // namespace

bool IsLevelEvidence(const std::string& counter) {
  return counter == "busbw_gbs" || counter == "coll_busbw_gbs" || counter == "coll_exec_time_us" ||
         counter == "seconds_since_last_collective" || counter == "applied_generation" || counter == "job_arrival_s" ||
         counter == "component_change" || counter == "path_ecn_marks_per_s" || counter == "busbw_step";
}

std::string FormatEvidence(const v1::Evidence& ev) {
  const std::string& c = ev.counter();
  std::string line = StrCat(ev.entity(), " ", c, " ");
  char buf[160];
  if (c == "busbw_gbs" || c == "coll_busbw_gbs") {
    std::snprintf(buf, sizeof buf, "%.1f GB/s vs baseline %.1f GB/s", ev.peak_rate(), ev.total());
    line += buf;
  } else if (c == "busbw_step") {
    std::snprintf(buf, sizeof buf, "fell again at %s: %.1f GB/s since, from the %.1f GB/s it had regressed to",
                  FormatUtcTimeOfDay(ev.at_us()).c_str(), ev.peak_rate(), ev.total());
    line += buf;
  } else if (c == "coll_exec_time_us") {
    StrAppend(&line, Micros(ev.peak_rate()), " kernel time vs median ", Micros(ev.total()));
  } else if (c == "seconds_since_last_collective") {
    std::snprintf(buf, sizeof buf, "%.0f s without a completed collective", ev.peak_rate());
    line += buf;
  } else if (c == "job_arrival_s") {
    std::snprintf(buf, sizeof buf, "arrived %.1f s %s the slowdown began", std::fabs(ev.peak_rate()),
                  ev.peak_rate() >= 0 ? "before" : "after");
    line += buf;
  } else if (c == "component_change") {
    std::snprintf(buf, sizeof buf, " (%.0f s %s the slowdown began)", std::fabs(ev.peak_rate()),
                  ev.peak_rate() >= 0 ? "before" : "after");
    return StrCat(ev.entity(), " changed ", ev.note(), buf);
  } else if (c == "path_ecn_marks_per_s") {
    StrAppend(&line, Si(ev.peak_rate(), " marks/s"), " on its paths in the 10 s after the slowdown began vs ",
              Si(ev.total(), " marks/s"), " before it: congestion did not rise");
  } else if (c == "controller_audit") {
    return StrCat(ev.entity(), " changed by an operator", ev.note().empty() ? "" : StrCat(" (", ev.note(), ")"));
  } else if (c == "applied_generation") {
    std::snprintf(buf, sizeof buf, "applied %.0f, desired %.0f", ev.peak_rate(), ev.total());
    line += buf;
  } else {
    const CounterDef* def = nullptr;
    for (const CounterDef& d : AllCounters())
      if (d.name == c) def = &d;
    const bool gauge = def != nullptr && def->kind == v1::VALUE_KIND_GAUGE;
    const bool micros = c.ends_with("_us");
    const bool bytes = c.ends_with("_bytes") || c.ends_with("bytes_per_second");
    const char* unit = bytes ? "B" : c.ends_with("_frames") ? " frames" : c.find("packets") != std::string::npos ? " packets" : "";
    auto amount = [&](double v) { return micros ? Micros(v) : Si(v, unit); };
    if (gauge) {
      StrAppend(&line, "level ", amount(ev.peak_rate() != 0 ? ev.peak_rate() : ev.total()));
    } else {
      std::string parts;
      if (ev.total() != 0) StrAppend(&parts, amount(ev.total()), " in the interval");
      if (ev.peak_rate() != 0) {
        StrAppend(&parts, parts.empty() ? "" : ", ", "peak ", amount(ev.peak_rate()), "/s");
        // Pause time per second is the share of time a port was paused.
        if (micros && c.find("pause") != std::string::npos && ev.note().empty())
          StrAppend(&parts, " (", static_cast<int>(std::min(ev.peak_rate() / 1e4, 100.0) + 0.5), "% of the time)");
      }
      // Nothing new in the latest reading: the counter is named, its note says why.
      if (parts.empty()) line.pop_back();
      line += parts;
    }
  }
  if (!ev.note().empty()) StrAppend(&line, " (", ev.note(), ")");
  return line;
}

namespace {
const std::string& VersionOrNone(const std::string& version) {
  static const std::string none = "(none)";
  return version.empty() ? none : version;
}
}  // namespace

std::string ChangeArrow(const v1::ComponentChange& c) {
  return StrCat(c.component(), " ", VersionOrNone(c.from()), " -> ", VersionOrNone(c.to()));
}

std::string ChangeSentence(const v1::ComponentChange& c) {
  return StrCat(c.device(), " changed ", c.component(), " from ", VersionOrNone(c.from()), " to ",
                VersionOrNone(c.to()), " at ", FormatUtcTimeOfDay(c.at_us()));
}

namespace {
// With no finding to blame a slowdown that began at `onset_us`: the version
// change on its paths closest to the onset, inside the latency regression
// detector's window, is the lead, named before the generic advice. The
// detector itself names it only once the slowdown has lasted 20 s with
// nothing else found, and a fault that begins meanwhile keeps it from
// judging; "no fabric cause: check GPUs" beside a switch that changed its
// image a second before the drop would send the operator the wrong way.
std::string NoCause(const v1::DiagnoseJobResponse& d, int64_t onset_us) {
  const std::string generic = "no fabric cause on its paths: check GPUs, hosts and software";
  if (onset_us <= 0) return generic;
  const v1::ComponentChange* lead = nullptr;
  for (const auto& c : d.changes())
    if (c.at_us() >= onset_us - kChangeLeadUs && c.at_us() <= onset_us + kChangeLagUs &&
        (lead == nullptr || std::llabs(c.at_us() - onset_us) < std::llabs(lead->at_us() - onset_us)))
      lead = &c;
  if (lead == nullptr) return generic;
  // Whole seconds, as the times are printed: within one, at the onset.
  const int64_t before_s = (onset_us - lead->at_us()) / 1'000'000;
  const std::string when = before_s >= 120  ? StrCat(before_s / 60, " min before the slowdown")
                           : before_s > 0   ? StrCat(before_s, " s before the slowdown")
                           : before_s == 0  ? std::string("at the slowdown's onset")
                                            : StrCat(-before_s, " s after its onset");
  return StrCat("no fault found on its paths, but ", ChangeSentence(*lead), ", ", when,
                ": suspect that change first (a latency regression), then GPUs, hosts and software");
}
}  // namespace

std::string ComposeVerdict(const v1::DiagnoseJobResponse& d) {
  const v1::Finding* top = TopFinding(d);
  const std::string busbw = Busbw(d);
  const int64_t from = d.window_start_us();
  const std::string cause = top ? Cause(*top, from) : "";
  const std::string no_cause = "no fabric cause on its paths: check GPUs, hosts and software";
  auto since = [&](int64_t t) {
    return StrCat(FormatUtcTimeOfDay(t), t < from ? " (before the window)" : "");
  };
  if (d.state() == "stalled") {
    int64_t start = 0;
    for (const auto& i : d.degraded())
      if (i.kind() == "job_stalled" && i.end_us() == 0) start = i.start_us();
    return StrCat("STALLED", start ? StrCat(" since ", since(start)) : "", ": no collective completes; ",
                  top ? StrCat("most likely cause: ", cause) : no_cause);
  }
  if (d.state() == "degraded") {
    const v1::DegradedInterval* latest = nullptr;
    for (const auto& i : d.degraded())
      if (latest == nullptr || i.start_us() >= latest->start_us()) latest = &i;
    // A further drop continues the regression before it: the slowdown
    // began with that one, and got worse at the drop.
    int64_t began = latest != nullptr ? latest->start_us() : 0;
    if (latest != nullptr && latest->kind() == "busbw_further_drop")
      for (const auto& i : d.degraded())
        if (i.kind() == "busbw_regression" && i.end_us() == latest->start_us()) began = i.start_us();
    std::string when;
    if (latest == nullptr) when = "";
    else if (latest->end_us() == 0) when = StrCat(" since ", since(began));
    else when = StrCat(" from ", since(began), " to ", FormatUtcTimeOfDay(latest->end_us()));
    if (latest != nullptr && began != latest->start_us())
      StrAppend(&when, latest->end_us() == 0 ? ", worse since " : ", worse from ", since(latest->start_us()));
    // A stall that ended: busbw while the job ran may be its baseline, so it
    // is not what the verdict is about ("DEGRADED ...: busbw 1.00x" misleads).
    std::string what = busbw.empty() ? "" : StrCat(": ", busbw);
    if (latest != nullptr && latest->kind() == "job_stalled")
      what = StrCat(": no collective completed", busbw.empty() ? "" : StrCat(" (while it ran, ", busbw, ")"));
    return StrCat("DEGRADED", when, what, "; ",
                  top ? StrCat("most likely cause: ", cause) : NoCause(d, latest ? latest->start_us() : 0));
  }
  if (d.state() == "unknown") {
    std::string text = "UNKNOWN: no NCCL data ";
    if (d.last_record_us() > 0) StrAppend(&text, "since ", FormatUtcTimeOfDay(d.last_record_us()), " (its last collective record)");
    else if (d.job().start_us() > 0 && d.job().start_us() >= from)
      StrAppend(&text, "since the job started at ", FormatUtcTimeOfDay(d.job().start_us()));
    else text += "in the window or the hour before it";
    StrAppend(&text, "; check that NCCL Inspector writes on its hosts (NCCL_PROFILER_PLUGIN=inspector, "
                     "NCCL_INSPECTOR_DUMP_DIR) and that their rocefab-hostd ship it (rocefab agents)");
    if (top) StrAppend(&text, "; ", d.findings_size(), " finding(s) on its paths, top: ", cause);
    return text;
  }
  return StrCat("HEALTHY", busbw.empty() ? "" : StrCat(": ", busbw), "; ",
                top ? StrCat(d.findings_size(), " finding(s) on its paths did not slow it; top: ", cause)
                    : "no anomaly on its paths");
}

void TagWithShard(v1::Anomaly& anomaly, size_t shard) {
  const uint64_t tag = static_cast<uint64_t>(shard) << 48;
  anomaly.set_id(anomaly.id() | tag);
  if (anomaly.caused_by() != 0) anomaly.set_caused_by(anomaly.caused_by() | tag);
}

google::protobuf::RepeatedPtrField<v1::Evidence> StrongestFirst(
    const google::protobuf::RepeatedPtrField<v1::Evidence>& evidence) {
  std::vector<const v1::Evidence*> order;
  order.reserve(evidence.size());
  std::map<std::string, int> first_seen;
  for (const v1::Evidence& ev : evidence) {
    first_seen.try_emplace(ev.counter(), static_cast<int>(first_seen.size()));
    order.push_back(&ev);
  }
  std::stable_sort(order.begin(), order.end(), [&](const v1::Evidence* a, const v1::Evidence* b) {
    const int ca = first_seen.at(a->counter()), cb = first_seen.at(b->counter());
    if (ca != cb) return ca < cb;
    return a->peak_rate() > b->peak_rate();
  });
  google::protobuf::RepeatedPtrField<v1::Evidence> out;
  out.Reserve(static_cast<int>(order.size()));
  for (const v1::Evidence* ev : order) *out.Add() = *ev;
  return out;
}

}  // namespace rocefab
