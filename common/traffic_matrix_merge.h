#pragma once
// One fabric's traffic matrix from the collector shards' parts (query.proto
// TrafficMatrix): each shard measures the agents it holds, so demands and
// rack pairs add up, and counts and down ports are the union. For the TE
// loop and `rocefab fabric traffic`.

#include <vector>

#include "rocefab/v1/query.pb.h"

namespace rocefab {

v1::TrafficMatrixResponse MergeTrafficMatrices(const std::vector<v1::TrafficMatrixResponse>& parts);

}  // namespace rocefab
