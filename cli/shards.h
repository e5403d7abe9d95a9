#pragma once
// Merging what several collector shards answer (one collector per AI Zone;
// docs/architecture.md, "Sharded collectors"). Each shard diagnoses a job
// from its own agents' data: the anomalies it detected and the collective
// records of its hosts. The merged answer is what one collector holding
// everything would say, as far as each shard's part of it allows. Pure.

#include <vector>

#include "rocefab/v1/diagnosis.pb.h"

namespace rocefab::cli {

// The worst state wins (stalled, then degraded, then healthy; unknown only
// when every shard knows nothing); findings are pooled and ranked by
// confidence, causes first in the verdict; degraded intervals are pooled.
v1::DiagnoseJobResponse MergeDiagnoses(std::vector<v1::DiagnoseJobResponse> parts);

// Every shard's anomalies, with ids (and caused_by links) made unique by
// putting the shard's index in the top 16 bits.
v1::ListAnomaliesResponse MergeAnomalies(const std::vector<v1::ListAnomaliesResponse>& parts);

}  // namespace rocefab::cli
