#pragma once
// Robust statistics the detectors and diagnoses share.

#include <vector>

namespace rocefab {

// The median; the mean of the middle two for an even count; 0 when empty.
double Median(std::vector<double> v);

// 1.4826 x the median absolute deviation: a standard deviation that a few
// outliers do not inflate (equal to it for normal data).
double RobustSpread(const std::vector<double>& v);

}  // namespace rocefab
