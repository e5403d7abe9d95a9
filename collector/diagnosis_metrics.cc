#include "collector/diagnosis_metrics.h"

#include "common/findings.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>

namespace rocefab::collector {
namespace {

prometheus::MetricFamily Gauge(const char* name, const char* help) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = prometheus::MetricType::Gauge;
  return f;
}

void Add(prometheus::MetricFamily* f, std::vector<prometheus::ClientMetric::Label> labels, double value) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  f->metric.push_back(std::move(m));
}

}  // namespace

void DiagnosisMetrics::Set(const std::vector<v1::Anomaly>& active, const std::vector<JobSummary>& jobs,
                           const FabricContext& context, const std::set<std::string>& drained) {
  std::lock_guard lock(mu_);
  active_ = active;
  jobs_ = jobs;
  context_ = context;
  drained_ = drained.size();
  running_.clear();
  job_anomalies_.clear();
  job_ranks_.clear();
  std::set<std::string> named_hosts;
  for (const v1::Anomaly& a : active_)
    if (a.caused_by() == 0) named_hosts.insert(a.entity().substr(0, a.entity().find('/')));
  for (const v1::Job& job : context.running_jobs) {
    int affected = 0;
    for (const auto& r : job.ranks()) affected += named_hosts.count(r.host()) > 0;
    job_ranks_[job.id()] = {job.ranks_size(), affected};
    running_.insert(job.id());
    auto& [ranks, fp] = footprints_[job.id()];
    if (ranks != job.ranks_size()) {
      fp = JobFootprint(context.topology.get(), job, drained);
      ranks = job.ranks_size();
    }
    int n = 0;
    for (const v1::Anomaly& a : active_)
      if (a.caused_by() == 0 && !IsJobSymptomKind(a.kind()) && Touches(fp, a, job.id())) ++n;
    job_anomalies_[job.id()] = n;
  }
  for (auto it = footprints_.begin(); it != footprints_.end();)
    it = running_.count(it->first) ? std::next(it) : footprints_.erase(it);
}

std::set<std::string> DiagnosisMetrics::Highlighted() const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  for (const v1::Anomaly& a : active_) {
    out.insert(a.entity());
    for (const auto& ev : a.evidence()) out.insert(ev.entity());
  }
  return out;
}

std::vector<prometheus::MetricFamily> DiagnosisMetrics::Collect() const {
  std::lock_guard lock(mu_);
  std::vector<prometheus::MetricFamily> out;
  auto counts = Gauge("rocefab_anomalies_active", "Open anomalies by kind and severity");
  std::map<std::pair<std::string, std::string>, int> by_kind;
  for (const v1::Anomaly& a : active_) ++by_kind[{a.kind(), SeverityName(a.severity())}];
  for (const auto& [ks, n] : by_kind) Add(&counts, {{"kind", ks.first}, {"severity", ks.second}}, n);
  out.push_back(std::move(counts));

  auto roots = Gauge("rocefab_anomaly", "1 for each open root-cause anomaly (consequences are counted in "
                                        "rocefab_anomalies_active)");
  for (const v1::Anomaly& a : active_) {
    if (a.caused_by() != 0) continue;
    std::string zone = "unknown";
    if (context_.topology != nullptr) {
      const std::string device = a.entity().substr(0, a.entity().find('/'));
      if (const auto* h = context_.topology->FindHost(device)) zone = h->zone();
      else if (const auto* s = context_.topology->FindSwitch(device)) zone = s->zone();
    }
    Add(&roots, {{"kind", a.kind()}, {"entity", a.entity()}, {"severity", SeverityName(a.severity())}, {"zone", zone}},
        1);
  }
  if (!roots.metric.empty()) out.push_back(std::move(roots));

  auto busbw = Gauge("rocefab_job_busbw_gbs", "Mean bus bandwidth of a job's newest collectives, per op and size");
  auto baseline = Gauge("rocefab_job_baseline_busbw_gbs", "The job's own healthy bus bandwidth, per op and size");
  auto state = Gauge("rocefab_job_state", "1 for the job's current state: healthy, degraded or stalled");
  std::map<std::string, std::string> job_state;
  for (const JobSummary& j : jobs_) {
    if (!running_.empty() && !running_.count(j.job)) continue;
    Add(&busbw, {{"job_id", j.job}, {"op", j.op}, {"size", j.size}}, j.recent_busbw_gbs);
    if (j.baseline_busbw_gbs > 0)
      Add(&baseline, {{"job_id", j.job}, {"op", j.op}, {"size", j.size}}, j.baseline_busbw_gbs);
    std::string& s = job_state[j.job];
    const std::string mine = j.stalled ? "stalled" : j.regressed ? "degraded" : "healthy";
    if (s.empty() || mine == "stalled" || (mine == "degraded" && s == "healthy")) s = mine;
  }
  for (const auto& [job, s] : job_state)
    for (const char* name : {"healthy", "degraded", "stalled"})
      Add(&state, {{"job_id", job}, {"state", name}}, s == name ? 1 : 0);
  auto job_anomalies = Gauge("rocefab_job_anomalies", "Open root-cause anomalies on the job's paths");
  for (const auto& [job, n] : job_anomalies_) Add(&job_anomalies, {{"job_id", job}}, n);
  auto ranks = Gauge("rocefab_job_ranks", "Ranks of a running job");
  auto affected = Gauge("rocefab_job_affected_ranks", "Ranks on hosts that an open root anomaly names");
  for (const auto& [job, ra] : job_ranks_) {
    Add(&ranks, {{"job_id", job}}, ra.first);
    Add(&affected, {{"job_id", job}}, ra.second);
  }
  for (auto* f : {&busbw, &baseline, &state, &job_anomalies, &ranks, &affected})
    if (!f->metric.empty()) out.push_back(std::move(*f));

  auto reachable = Gauge("rocefab_controller_reachable", "1 when rocefab-controllerd answered its last poll");
  Add(&reachable, {}, context_.controller_reachable ? 1 : 0);
  out.push_back(std::move(reachable));
  if (context_.controller_reachable) {
    auto drained = Gauge("rocefab_controller_drained_links", "Links drained through the controller");
    Add(&drained, {}, static_cast<double>(drained_));
    auto generation = Gauge("rocefab_controller_switch_generation", "Desired and applied config generation");
    auto drift = Gauge("rocefab_controller_switch_drift", "1 when a switch's applied config differs from the desired");
    for (const v1::SwitchStatus& s : context_.switch_status) {
      Add(&generation, {{"switch", s.switch_name()}, {"state", "desired"}}, static_cast<double>(s.desired_generation()));
      Add(&generation, {{"switch", s.switch_name()}, {"state", "applied"}}, static_cast<double>(s.applied_generation()));
      Add(&drift, {{"switch", s.switch_name()}}, s.drift() ? 1 : 0);
    }
    for (auto* f : {&drained, &generation, &drift})
      if (!f->metric.empty()) out.push_back(std::move(*f));
  }
  return out;
}

}  // namespace rocefab::collector
