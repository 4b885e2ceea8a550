// Norm-wise comparison of two host vectors (centroid sets, results): ||a - b||_2 / ||b||_2 in double.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace skinny::testing {

template <class T>
double relative_difference(const std::vector<T>& a, const std::vector<T>& b) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    ref += double(b[i]) * double(b[i]);
  }
  return std::sqrt(diff / ref);
}

}  // namespace skinny::testing
