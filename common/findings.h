#pragma once
// How a diagnosis ranks its findings and pools shards' anomalies, shared by the collector (one shard's
// diagnosis) and the CLI (merging shards), so both rank the same way.

#include <vector>

#include "rocefab/v1/diagnosis.pb.h"

namespace rocefab {

// Highest confidence first; ties by earlier start. Stable.
void RankFindings(std::vector<v1::Finding>& findings);
// The first cause among ranked findings, else the first finding, else null.
const v1::Finding* TopFinding(const v1::DiagnoseJobResponse& diagnosis);

// Anomaly ids are per collector: pooling several shards' anomalies, each
// shard's ids (and caused_by links) get its index in the top 16 bits.
void TagWithShard(v1::Anomaly& anomaly, size_t shard);

}  // namespace rocefab
