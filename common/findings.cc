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

}  // namespace rocefab
