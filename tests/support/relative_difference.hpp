// Norm-wise comparison of two host vectors (centroid sets, results against a double reference):
// ||a - b||_2 / ||b||_2 in double; NaN when a holds a NaN (a poisoned output left unwritten), so that
// every bound fails.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace skinny::testing {

template <class TA, class TB>
double relative_difference(const std::vector<TA>& a, const std::vector<TB>& b) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    ref += double(b[i]) * double(b[i]);
  }
  return std::sqrt(diff / ref);
}

}  // namespace skinny::testing
