#pragma once
// /metrics for what the detectors concluded (docs/metrics.md), bounded by the
// number of jobs, open anomalies and switches:
//   rocefab_anomalies_active{kind,severity}
//   rocefab_anomaly{kind,entity,severity,zone}            1 per open root anomaly
//   rocefab_job_busbw_gbs{job_id,op,size}, rocefab_job_baseline_busbw_gbs{...}
//   rocefab_job_state{job_id,state}                       healthy|degraded|stalled
//   rocefab_job_anomalies{job_id}                         open root anomalies on its paths
//   rocefab_job_ranks{job_id}, rocefab_job_affected_ranks{job_id}   ranks on hosts anomalies name
//   rocefab_controller_reachable, rocefab_controller_drained_links,
//   rocefab_controller_switch_generation{switch,state}, rocefab_controller_switch_drift{switch}
// Set after each detector evaluation; read by scrapes. Thread-safe.

#include <prometheus/collectable.h>

#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "collector/detectors.h"
#include "collector/diagnosis.h"

namespace rocefab::collector {

class DiagnosisMetrics final : public prometheus::Collectable {
 public:
  void Set(const std::vector<v1::Anomaly>& active, const std::vector<JobSummary>& jobs,
           const FabricContext& context, const std::set<std::string>& drained);
  std::vector<prometheus::MetricFamily> Collect() const override;
  // Entities the open anomalies name (for the per-port export).
  std::set<std::string> Highlighted() const;

 private:
  mutable std::mutex mu_;
  std::vector<v1::Anomaly> active_;
  std::vector<JobSummary> jobs_;
  std::map<std::string, int> job_anomalies_;
  std::map<std::string, std::pair<int, int>> job_ranks_;  // (ranks, ranks on hosts open anomalies name)
  std::set<std::string> running_;
  FabricContext context_;
  size_t drained_ = 0;
  // Footprints by job id, computed once per registered job.
  std::map<std::string, std::pair<int, Footprint>> footprints_;
};

}  // namespace rocefab::collector
