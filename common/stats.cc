#include "common/stats.h"

#include <algorithm>
#include <cmath>

namespace rocefab {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2) return upper;
  return (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
}

double RobustSpread(const std::vector<double>& v) {
  const double median = Median(v);
  std::vector<double> deviations;
  deviations.reserve(v.size());
  for (double x : v) deviations.push_back(std::fabs(x - median));
  return 1.4826 * Median(deviations);
}

double Choose(uint64_t n, uint64_t k) {
  if (k > n) return 0;
  k = std::min(k, n - k);
  double c = 1;
  for (uint64_t i = 1; i <= k; ++i) c = c * static_cast<double>(n - k + i) / static_cast<double>(i);
  return c;
}

}  // namespace rocefab
