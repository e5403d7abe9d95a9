#include "cli/shards.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "common/findings.h"
#include "common/strings.h"

namespace rocefab::cli {
namespace {

int StateRank(const std::string& state) {
  if (state == "stalled") return 3;
  if (state == "degraded") return 2;
  if (state == "healthy") return 1;
  return 0;  // unknown
}

}  // namespace

v1::DiagnoseJobResponse MergeDiagnoses(std::vector<v1::DiagnoseJobResponse> parts) {
  if (parts.empty()) return {};
  if (parts.size() == 1) return std::move(parts[0]);
  // The base: the shard in the worst state (its busbw figures and verdict),
  // and of those the one with the most findings.
  size_t base = 0;
  for (size_t i = 1; i < parts.size(); ++i) {
    const int rank = StateRank(parts[i].state()), best = StateRank(parts[base].state());
    if (rank > best || (rank == best && parts[i].findings_size() > parts[base].findings_size())) base = i;
  }
  v1::DiagnoseJobResponse out = parts[base];
  out.clear_findings();
  out.clear_degraded();
  out.clear_changes();
  out.set_footprint_ports(0);
  out.set_footprint_switches(0);
  std::vector<v1::Finding> findings;
  std::set<std::tuple<std::string, std::string, int64_t>> seen;
  for (const auto& part : parts) {
    if (out.job().ranks_size() == 0 && part.job().ranks_size() > 0) *out.mutable_job() = part.job();
    out.set_footprint_ports(std::max(out.footprint_ports(), part.footprint_ports()));
    out.set_footprint_switches(std::max(out.footprint_switches(), part.footprint_switches()));
    for (const auto& d : part.degraded()) {
      // Every shard sees a job-wide slowdown: one interval, at its worst.
      bool merged = false;
      for (auto& have : *out.mutable_degraded()) {
        if (have.kind() == d.kind() && have.start_us() == d.start_us()) {
          have.set_busbw_ratio(std::min(have.busbw_ratio(), d.busbw_ratio()));
          merged = true;
        }
      }
      if (!merged) *out.add_degraded() = d;
    }
    for (const auto& f : part.findings())
      if (seen.emplace(f.kind(), f.entity(), f.start_us()).second) findings.push_back(f);
    // Each shard's own agents' changes.
    for (const auto& c : part.changes()) *out.add_changes() = c;
  }
  std::sort(out.mutable_changes()->begin(), out.mutable_changes()->end(),
            [](const v1::ComponentChange& a, const v1::ComponentChange& b) { return a.at_us() < b.at_us(); });
  std::sort(out.mutable_degraded()->begin(), out.mutable_degraded()->end(),
            [](const v1::DegradedInterval& a, const v1::DegradedInterval& b) { return a.start_us() < b.start_us(); });
  RankFindings(findings, out.window_start_us());
  for (auto& f : findings) *out.add_findings() = std::move(f);
  const v1::Finding* top = TopFinding(out);
  out.set_playbook(top ? top->playbook() : "");
  // The verdict names the pooled top cause, whichever shard found it.
  out.set_verdict(ComposeVerdict(out));
  out.set_verdict(StrCat(out.verdict(), " [", parts.size(), " collector shards]"));
  return out;
}

v1::ListAnomaliesResponse MergeAnomalies(const std::vector<v1::ListAnomaliesResponse>& parts) {
  v1::ListAnomaliesResponse out;
  for (size_t shard = 0; shard < parts.size(); ++shard) {
    for (v1::Anomaly a : parts[shard].anomalies()) {
      if (parts.size() > 1) TagWithShard(a, shard);
      *out.add_anomalies() = std::move(a);
    }
    out.set_now_us(std::max(out.now_us(), parts[shard].now_us()));
  }
  // Every shard reads the same controller's audit log: one copy of each.
  std::set<std::tuple<int64_t, std::string, std::string>> changes;
  for (const auto& part : parts)
    for (const auto& c : part.operator_changes())
      if (changes.emplace(c.at_us(), c.action(), c.target()).second) *out.add_operator_changes() = c;
  std::stable_sort(out.mutable_anomalies()->begin(), out.mutable_anomalies()->end(),
                   [](const v1::Anomaly& a, const v1::Anomaly& b) { return a.start_us() < b.start_us(); });
  return out;
}

}  // namespace rocefab::cli
