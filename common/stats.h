#pragma once
// Robust statistics the detectors and diagnoses share.

#include <cstdint>
#include <vector>

namespace rocefab {

// The median; the mean of the middle two for an even count; 0 when empty.
double Median(std::vector<double> v);

// 1.4826 x the median absolute deviation: a standard deviation that a few
// outliers do not inflate (equal to it for normal data).
double RobustSpread(const std::vector<double>& v);

// The binomial coefficient C(n, k) as a double (exact up to 2^53); 0 when
// k > n.
double Choose(uint64_t n, uint64_t k);

// The SplitMix64 finaliser: a cheap, well-mixed 64-bit hash, for ECMP
// decisions and for independent random streams from (seed, index).
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace rocefab
