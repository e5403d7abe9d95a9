#include "lab/score.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "collector/detectors.h"
#include "collector/diagnosis.h"
#include "collector/store.h"
#include "common/findings.h"
#include "common/strings.h"
#include "common/topology.h"
#include "lab/generate.h"

namespace rocefab::lab {
namespace {

// Whether an anomaly's entity is the fault's target: the same port, the
// other end of the same link, a port of the target switch, or the target.
bool NamesTarget(const Topology& topo, const std::string& target, const std::string& entity) {
  if (entity == target) return true;
  if (target.find('/') == std::string::npos) return EntityDevice(entity) == target;
  if (entity.find('/') == std::string::npos) return false;
  return collector::CanonicalLinkEnd(&topo, target) == collector::CanonicalLinkEnd(&topo, entity);
}

bool JobCrosses(const collector::Footprint& fp, const std::string& target) {
  const std::string device = EntityDevice(target);
  if (target.find("/gpu") != std::string::npos) return fp.hosts.count(device) > 0;
  if (target.find('/') == std::string::npos) return fp.devices.count(target) > 0;
  return fp.ports.count(target) > 0;
}

// What congestion alone makes: pauses, full queues, a slower job. Not
// loss (the fabric is lossless) and not a hang.
bool IsCongestionConsequence(const std::string& kind) {
  return kind == "pfc_pause" || kind == "buffer_high" || kind == "busbw_regression";
}

}  // namespace

bool FindingFitsFault(const std::string& fault_kind, const std::string& finding_kind) {
  // The fault's own playbook, or one that sends the operator to the same
  // place (a flap first shows as a link going down; a NIC that is down is a
  // link down).
  static const std::map<std::string, std::set<std::string>> kFits = {
      {"pfc_storm", {"pfc_storm"}},
      {"link_flap", {"link_flap", "link_down"}},
      {"lossy_link", {"link_errors"}},
      {"degraded_link", {"link_degraded"}},
      {"ecn_misconfig", {"ecn_misconfig"}},
      {"pfc_misconfig", {"pfc_misconfig"}},
      {"straggler", {"straggler"}},
      {"nic_down", {"link_down"}},
      {"buffer_threshold", {"buffer_threshold_drops"}},
      {"ecmp_skew", {"ecmp_imbalance"}},
      {"job_contention", {"job_contention"}},
      {"latency_regression", {"latency_regression"}},
  };
  auto it = kFits.find(fault_kind);
  return it != kFits.end() && it->second.count(finding_kind) > 0;
}

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest rank.
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace

nlohmann::json RunScore::ToJson() const {
  nlohmann::json faults_json = nlohmann::json::array();
  for (const FaultScore& f : faults)
    faults_json.push_back({{"kind", f.kind},
                           {"target", f.target},
                           {"start_s", f.start_s},
                           {"detected", f.detected},
                           {"already_named", f.already_named},
                           {"detection_latency_s", f.latency_s >= 0 ? nlohmann::json(f.latency_s) : nlohmann::json(nullptr)},
                           {"lab_slip_s", f.lab_slip_s},
                           {"top1", f.top1},
                           {"top1_kind", f.top1_kind},
                           {"top1_entity", f.top1_entity},
                           {"tier", f.tier},
                           {"jobs", f.jobs}});
  nlohmann::json out = Summarize({*this});
  out["scenario"] = scenario;
  out["faults"] = faults_json;
  out["false_positive_list"] = false_positives;
  out["lab_late_s"] = lab_late_s;
  return out;
}

absl::StatusOr<RunScore> ScoreRun(const std::string& run_dir, const ScoreOptions& options) {
  std::ifstream truth_in(run_dir + "/truth.json");
  if (!truth_in) return absl::NotFoundError(StrCat(run_dir, "/truth.json: not found (is this a lab run directory?)"));
  nlohmann::json truth;
  try {
    truth = nlohmann::json::parse(truth_in);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(StrCat(run_dir, "/truth.json: ", e.what()));
  }
  auto topology = Topology::Load(run_dir + "/topology.yaml");
  if (!topology.ok()) return topology.status();
  if (!std::filesystem::exists(run_dir + "/collector.db"))
    return absl::NotFoundError(StrCat(run_dir, "/collector.db: not found (was the run made with --no-daemons?)"));
  auto store = collector::Store::Open({.path = run_dir + "/collector.db", .relaxed_durability = true});
  if (!store.ok()) return store.status();
  auto anomalies = (*store)->anomalies().List(0, 0, false);
  if (!anomalies.ok()) return anomalies.status();
  // A sharded run: every shard's findings count (collector-1.db, ...).
  for (int shard = 1;; ++shard) {
    const std::string path = StrCat(run_dir, "/collector-", shard, ".db");
    if (!std::filesystem::exists(path)) break;
    auto other = collector::Store::Open({.path = path, .relaxed_durability = true});
    if (!other.ok()) return other.status();
    auto more = (*other)->anomalies().List(0, 0, false);
    if (!more.ok()) return more.status();
    for (auto& a : *more) {
      TagWithShard(a, static_cast<size_t>(shard));
      anomalies->push_back(std::move(a));
    }
  }
  auto jobs = (*store)->jobs().List(true);
  if (!jobs.ok()) return jobs.status();
  std::vector<collector::Footprint> footprints;
  for (const auto& job : *jobs) footprints.push_back(collector::JobFootprint(topology->get(), job, {}));

  RunScore score;
  score.scenario = truth.value("scenario", std::string());
  const int64_t run_start = truth.value("start_unix_us", int64_t{0});
  const double run_end_s = truth.value("duration_s", 0.0);
  struct Window {
    int64_t start = 0, end = 0;
    std::string target = {};
    std::string victim = {};  // job_contention: the job it slows
    // A fault that acts only on the traffic through its target: the jobs
    // the lab saw it act on (truth's touched_jobs). A job whose paths could
    // cross the target but whose flows never met it was not touched, and
    // its diagnosis is right not to name it.
    bool by_traffic = false;
    std::set<std::string> touched = {};
  };
  // Whether a fault is on a job's paths: a fabric element the job crosses,
  // or the neighbour of a contention that names the job its victim.
  auto on_paths = [](const Window& w, const std::string& job, const collector::Footprint& fp) {
    if (!w.victim.empty()) return w.victim == job;
    if (w.by_traffic) return w.touched.count(job) > 0;
    return JobCrosses(fp, w.target);
  };
  std::vector<Window> windows;
  const int64_t grace = static_cast<int64_t>(options.clear_grace_s * 1e6);
  // A fault that could not show at all while it lasted (a straggler on a
  // job another fault kept stalled) is counted apart, neither found nor
  // missed.
  auto counted = [](const nlohmann::json& f) { return f.value("happened", false) && f.value("observable", true); };
  for (const auto& f : truth["faults"]) {
    if (f.value("happened", false) && !counted(f)) ++score.unobservable;
    if (!counted(f)) continue;
    // From when it could first show: a fault injected while the jobs
    // through it hung on another one starts when their traffic resumes.
    int64_t start = f.value("start_unix_us", int64_t{0});
    if (f.contains("observable_from_unix_us") && f["observable_from_unix_us"].is_number_integer())
      start = std::max(start, f["observable_from_unix_us"].get<int64_t>());
    const int64_t end = f["end_unix_us"].is_null() ? run_start + static_cast<int64_t>(run_end_s * 1e6)
                                                   : f["end_unix_us"].get<int64_t>();
    Window w{.start = start,
             .end = end + grace,
             .target = f.value("target", ""),
             .victim = f.value("kind", "") == "job_contention" ? f.value("victim", "") : ""};
    if (f.contains("touched_jobs") && f["touched_jobs"].is_array()) {
      w.by_traffic = true;
      for (const auto& id : f["touched_jobs"])
        if (id.is_string()) w.touched.insert(id.get<std::string>());
    }
    windows.push_back(std::move(w));
  }
  // Collisions on a switch's uplinks explain the finding that names them,
  // while they last (and clear_grace_s after: a finding clears a little
  // after its cause).
  std::vector<Window> collisions;
  // And more offered to a switch's group of links than it carries explains
  // the finding that says so, the same way.
  std::vector<Window> oversubscribed;
  // The lab fell behind the wall clock (runner.cc, "lab_late"): a job
  // whose last collective came in it, or within a poll interval before or
  // after it, stalled on the lab, not on the fabric. After: what the lab
  // wrote while it caught up reaches the collector at the agents' next
  // poll, and a lab that catches up for a moment and falls behind again
  // leaves its records that much later (the shipped clean run, four at a
  // time on 2 cores: a stall whose last collective came 0.4 ms after one
  // late stretch ended and 1.3 s before the next began).
  constexpr int64_t kPollUs = 1'000'000;
  std::vector<Window> lab_late;
  // Every stretch the lab slipped ("lab_slip"), however short: slips that
  // add up to a poll interval inside the silence a stall was called on
  // made that silence, as one long slip does.
  std::vector<Window> lab_slips;
  if (truth.contains("conditions") && truth["conditions"].is_array())
    for (const auto& c : truth["conditions"]) {
      const std::string kind = c.value("kind", "");
      const Window w{.start = c.value("start_unix_us", int64_t{0}),
                     .end = c.value("end_unix_us", int64_t{0}) + grace,
                     .target = c.value("target", "")};
      if (kind == "ecmp_collision") collisions.push_back(w);
      if (kind == "oversubscription") oversubscribed.push_back(w);
      if (kind == "lab_late") {
        const int64_t from = c.value("start_unix_us", int64_t{0}), to = c.value("end_unix_us", int64_t{0});
        lab_late.push_back({from - kPollUs, to + kPollUs, ""});
        score.lab_late_s += static_cast<double>(to - from) / 1e6;
      }
      if (kind == "lab_slip") lab_slips.push_back({w.start, c.value("end_unix_us", int64_t{0}), ""});
    }
  // How much of [from, to) the lab spent slipping.
  auto slipped = [&](int64_t from, int64_t to) {
    int64_t us = 0;
    for (const Window& w : lab_slips) us += std::max<int64_t>(0, std::min(w.end, to) - std::max(w.start, from));
    return us;
  };
  size_t fault_index = 0;
  for (const auto& f : truth["faults"]) {
    if (!counted(f)) continue;
    const Window& self = windows[fault_index++];
    FaultScore fs;
    fs.kind = f.value("kind", "");
    fs.target = f.value("target", "");
    fs.tier = fs.kind == "job_contention" ? "job" : TargetTier(**topology, fs.target);
    fs.start_s = f.value("start_s", 0.0);
    const int64_t start = self.start;
    const int64_t end = self.end - grace;
    for (const auto& a : *anomalies) {
      if (collector::IsJobSymptomKind(a.kind())) continue;
      if (a.detected_us() < start - 2'000'000 || a.detected_us() > end + grace) continue;
      if (!NamesTarget(**topology, fs.target, a.entity())) continue;
      const double latency = std::max(0.0, static_cast<double>(a.detected_us() - start) / 1e6);
      if (!fs.detected || latency < fs.latency_s) fs.latency_s = latency;
      fs.detected = true;
    }
    // The same condition already in place, and reported, when this fault
    // began (another fault of its kind on the same element, or on the other
    // end of the same link): nothing new could be raised, and what the
    // operator sees names it with the right playbook. Found, with no
    // latency to count.
    if (!fs.detected)
      for (const auto& a : *anomalies) {
        if (a.detected_us() >= start - 2'000'000 || (a.end_us() != 0 && a.end_us() < start)) continue;
        if (!FindingFitsFault(fs.kind, a.kind()) || !NamesTarget(**topology, fs.target, a.entity())) continue;
        fs.detected = fs.already_named = true;
        break;
      }
    // Top-1 through the diagnoses of the jobs this fault touches.
    collector::DiagnoseInput in;
    in.window_start_us = start - 2'000'000;
    // Judged at the horizon, or when the fault was first named if that came
    // later (a latency regression is called only after its settling time):
    // once rocefab names the fault, is it first?
    int64_t judge_until = start + static_cast<int64_t>(options.top1_horizon_s * 1e6);
    const int64_t named_at = fs.latency_s >= 0 ? start + static_cast<int64_t>(fs.latency_s * 1e6) + 1 : 0;
    if (fs.latency_s >= 0) judge_until = std::max(judge_until, named_at);
    in.window_end_us = std::min(end, judge_until);
    // First named only in the grace after its end (a fault that could
    // first show in the run's last seconds, named from what the agents
    // flushed as it stopped): judged when it was named, as it was found.
    if (fs.latency_s >= 0 && named_at > end) in.window_end_us = named_at;
    in.onset_only = true;
    // As the collector knew them then: an anomaly raised later was not in
    // that diagnosis, however early its start is stamped (a start is the
    // poll before the one that saw the change).
    for (const auto& a : *anomalies)
      if (a.start_us() <= in.window_end_us && (a.end_us() == 0 || a.end_us() >= in.window_start_us) &&
          (a.detected_us() == 0 || a.detected_us() <= in.window_end_us))
        in.anomalies.push_back(a);
    std::vector<std::pair<std::string, const collector::Footprint*>> judged;
    for (size_t j = 0; j < jobs->size(); ++j)
      if (on_paths(self, (*jobs)[j].id(), footprints[j])) judged.push_back({(*jobs)[j].id(), &footprints[j]});
    collector::Footprint everything;  // no topology: nothing is ruled out
    if (judged.empty()) judged.push_back({"", &everything});
    fs.top1 = true;
    for (const auto& [id, fp] : judged) {
      in.footprint = *fp;
      in.job = v1::Job();
      for (const auto& job : *jobs)
        if (job.id() == id) in.job = job;
      const v1::DiagnoseJobResponse d = collector::Diagnose(in);
      if (!id.empty()) fs.jobs.push_back(id);
      // With k faults on this job's paths at once, each must be among the
      // first k findings: every root cause before any consequence.
      size_t overlapping = 0;
      for (const Window& w : windows)
        if (w.start < in.window_end_us && w.end > start && (id.empty() || on_paths(w, id, *fp))) ++overlapping;
      overlapping = std::max<size_t>(1, overlapping);
      bool found = false;
      for (int i = 0; i < d.findings_size() && static_cast<size_t>(i) < overlapping && !found; ++i) {
        const v1::Finding& top = d.findings(i);
        if (i == 0 || NamesTarget(**topology, fs.target, top.entity())) {
          fs.top1_kind = top.kind();
          fs.top1_entity = top.entity();
        }
        found = NamesTarget(**topology, fs.target, top.entity()) && FindingFitsFault(fs.kind, top.kind());
      }
      if (!found) fs.top1 = false;
    }
    if (fs.latency_s >= 0)
      fs.lab_slip_s = static_cast<double>(slipped(0, start + static_cast<int64_t>(fs.latency_s * 1e6))) / 1e6;
    score.faults.push_back(std::move(fs));
  }
  for (const auto& a : *anomalies) {
    if (a.caused_by() != 0) continue;
    bool explained = false;
    if (a.kind() == "job_stalled") {
      for (const Window& w : lab_late) explained |= a.start_us() >= w.start && a.start_us() <= w.end;
      // The silence: from the last collective to when it was called a stall.
      const int64_t called = a.detected_us() != 0 ? a.detected_us() : a.end_us();
      explained |= slipped(a.start_us(), called) >= kPollUs;
    }
    // Whether the finding overlaps one of the conditions, on its target or
    // (anywhere) on any entity.
    auto during = [&](const std::vector<Window>& conditions, bool anywhere) {
      for (const Window& w : conditions)
        if ((anywhere || NamesTarget(**topology, w.target, a.entity())) && a.start_us() <= w.end &&
            (a.end_us() == 0 || a.end_us() >= w.start - grace))
          return true;
      return false;
    };
    if (a.kind() == "ecmp_imbalance") explained |= during(collisions, false);
    if (a.kind() == "oversubscription") explained |= during(oversubscribed, false);
    // Congestion the model made without a fault (flows colliding on an
    // uplink, uplinks offered more than they carry) pauses and fills
    // queues, and slows the jobs it lands on: those consequences are
    // explained while it lasts, as a fault's are, whether or not the
    // finding that names it came first (a lab running late names it late).
    if (IsCongestionConsequence(a.kind()))
      explained |= during(collisions, true) || during(oversubscribed, true);
    for (const Window& w : windows) {
      if (NamesTarget(**topology, w.target, a.entity())) explained = true;
      if (IsConsequenceKind(a.kind()) && a.start_us() <= w.end && (a.end_us() == 0 || a.end_us() >= w.start))
        explained = true;
    }
    if (!explained) score.false_positives.push_back(StrCat(a.kind(), " ", a.entity()));
  }
  return score;
}

nlohmann::json Summarize(const std::vector<RunScore>& runs) {
  int faults = 0, detected = 0, already_named = 0, top1 = 0, fps = 0, unobservable = 0, late_runs = 0;
  std::vector<double> latencies;
  for (const RunScore& r : runs) {
    late_runs += r.lab_late_s > 0;
    fps += static_cast<int>(r.false_positives.size());
    unobservable += r.unobservable;
    for (const FaultScore& f : r.faults) {
      ++faults;
      detected += f.detected;
      already_named += f.already_named;
      top1 += f.top1;
      if (f.latency_s >= 0) latencies.push_back(f.latency_s);
    }
  }
  auto ratio = [&](int n) { return faults ? static_cast<double>(n) / faults : 1.0; };
  struct Tally {
    int faults = 0, detected = 0, top1 = 0;
  };
  std::map<std::string, Tally> by_kind, by_tier;
  for (const RunScore& r : runs)
    for (const FaultScore& f : r.faults)
      for (Tally* t : {&by_kind[f.kind], &by_tier[f.tier.empty() ? "other" : f.tier]}) {
        ++t->faults;
        t->detected += f.detected;
        t->top1 += f.top1;
      }
  auto tallies = [](const std::map<std::string, Tally>& m) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [name, t] : m)
      out[name] = {{"faults", t.faults},
                   {"recall", static_cast<double>(t.detected) / t.faults},
                   {"top1_accuracy", static_cast<double>(t.top1) / t.faults}};
    return out;
  };
  return {{"runs", runs.size()},
          {"by_kind", tallies(by_kind)},
          {"by_tier", tallies(by_tier)},
          {"faults", faults},
          {"top1_accuracy", ratio(top1)},
          {"recall", ratio(detected)},
          {"false_positives", fps},
          {"unobservable_faults", unobservable},
          {"found_already_named", already_named},
          {"runs_with_the_lab_late", late_runs},
          {"detection_latency_s", {{"p50", Percentile(latencies, 0.5)}, {"p95", Percentile(latencies, 0.95)}}}};
}

std::string FormatScores(const std::vector<RunScore>& runs) {
  std::string out;
  char line[320];
  std::snprintf(line, sizeof line, "%-26s %-15s %-24s %-8s %-8s %-5s %s\n", "SCENARIO", "FAULT", "TARGET",
                "FOUND", "LATENCY", "TOP1", "TOP FINDING");
  out += line;
  for (const RunScore& r : runs) {
    if (r.faults.empty()) {
      std::snprintf(line, sizeof line, "%-26s %-15s %-24s %-8s %-8s %-5s %s\n", r.scenario.c_str(), "(none)",
                    "-", "-", "-", "-", r.false_positives.empty() ? "no anomalies: clean" : "");
      out += line;
    }
    for (const FaultScore& f : r.faults) {
      char latency[16] = "-";
      if (f.latency_s >= 0) std::snprintf(latency, sizeof latency, "%.1fs", f.latency_s);
      else if (f.already_named) std::snprintf(latency, sizeof latency, "before");
      std::snprintf(line, sizeof line, "%-26s %-15s %-24s %-8s %-8s %-5s %s\n", r.scenario.c_str(),
                    f.kind.c_str(), f.target.c_str(), f.detected ? "yes" : "NO", latency,
                    f.top1 ? "yes" : "NO", (f.top1_kind + " " + f.top1_entity).c_str());
      out += line;
    }
    for (const std::string& fp : r.false_positives) StrAppend(&out, "  false positive in ", r.scenario, ": ", fp, "\n");
  }
  const nlohmann::json s = Summarize(runs);
  char summary[320];
  std::snprintf(summary, sizeof summary,
                "\nruns %d  faults %d  top1_accuracy %.2f  recall %.2f  false_positives %d  "
                "detection_latency_s p50 %.1f p95 %.1f\n",
                s["runs"].get<int>(), s["faults"].get<int>(), s["top1_accuracy"].get<double>(),
                s["recall"].get<double>(), s["false_positives"].get<int>(),
                s["detection_latency_s"]["p50"].get<double>(), s["detection_latency_s"]["p95"].get<double>());
  out += summary;
  if (const int n = s["unobservable_faults"].get<int>(); n > 0)
    StrAppend(&out, "unobservable faults ", n, " (could not show while they lasted; not counted)\n");
  if (const int n = s["found_already_named"].get<int>(); n > 0)
    StrAppend(&out, "faults found already named ", n,
              " (their condition was in place and reported when they began; no latency counted)\n");
  if (const int n = s["runs_with_the_lab_late"].get<int>(); n > 0)
    StrAppend(&out, "runs in which the lab ran a second or more behind the wall clock: ", n,
              " (a job stalled then is not counted against the detectors)\n");
  for (const char* group : {"by_kind", "by_tier"}) {
    if (s[group].empty()) continue;
    std::snprintf(line, sizeof line, "\n%-16s %7s %7s %7s\n", group[3] == 'k' ? "FAULT KIND" : "TIER", "FAULTS",
                  "RECALL", "TOP1");
    out += line;
    for (const auto& [name, t] : s[group].items()) {
      std::snprintf(line, sizeof line, "%-16s %7d %7.2f %7.2f\n", name.c_str(), t["faults"].get<int>(),
                    t["recall"].get<double>(), t["top1_accuracy"].get<double>());
      out += line;
    }
  }
  return out;
}

}  // namespace rocefab::lab
