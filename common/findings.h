#pragma once
// How a diagnosis ranks its findings, shared by the collector (one shard's
// diagnosis) and the CLI (merging shards), so both rank the same way.

#include <vector>

#include "rocefab/v1/diagnosis.pb.h"

namespace rocefab {

// Highest confidence first; ties by earlier start. Stable.
void RankFindings(std::vector<v1::Finding>& findings);
// The first cause among ranked findings, else the first finding, else null.
const v1::Finding* TopFinding(const v1::DiagnoseJobResponse& diagnosis);

}  // namespace rocefab
