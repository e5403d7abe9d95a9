#include "common/findings.h"

#include <algorithm>

namespace rocefab {

void RankFindings(std::vector<v1::Finding>& findings) {
  std::stable_sort(findings.begin(), findings.end(), [](const v1::Finding& a, const v1::Finding& b) {
    if (a.confidence() != b.confidence()) return a.confidence() > b.confidence();
    return a.start_us() < b.start_us();
  });
}

const v1::Finding* TopFinding(const v1::DiagnoseJobResponse& diagnosis) {
  for (const auto& f : diagnosis.findings())
    if (f.role() == "cause") return &f;
  return diagnosis.findings_size() > 0 ? &diagnosis.findings(0) : nullptr;
}

void TagWithShard(v1::Anomaly& anomaly, size_t shard) {
  const uint64_t tag = static_cast<uint64_t>(shard) << 48;
  anomaly.set_id(anomaly.id() | tag);
  if (anomaly.caused_by() != 0) anomaly.set_caused_by(anomaly.caused_by() | tag);
}

}  // namespace rocefab
