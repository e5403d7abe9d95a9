#pragma once
// Slurm hostlists ("z1-r01-h[1-2],z1-r02-h[01-03,7]"): the form schedulers
// hand prolog scripts in SLURM_JOB_NODELIST.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace rocefab {

// Expands a hostlist in order. Ranges keep their zero padding (h[01-03]:
// h01 h02 h03). Errors name what is wrong; at most `limit` hosts.
absl::StatusOr<std::vector<std::string>> ExpandHostlist(std::string_view hostlist,
                                                        size_t limit = 100000);

}  // namespace rocefab
