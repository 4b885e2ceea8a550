// The threshold of one checksum comparison, from the magnitudes the rounding depends on: one formula for
// the host (the CPU simulations that calibrate it, docs/abft-threshold.md) and the GPU (ProtectedGemm
// computes its thresholds where its checksums are).
#pragma once

#include <skinny/abft/abft.hpp>
#include <skinny/gemm/host_device.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>

namespace skinny::abft::detail {

/// What the rounding of one comparison (a checksum of C = A B over h terms, inner dimension k) depends
/// on. For the weighted checksum, `squares` and `result_squares` carry the squared weights (bounded by
/// h times the weights, see the derivation) and the others the weighted values.
struct CheckMagnitudes {
  double squares = 0;          ///< Q: the checksum of (A o A)(B o B): sum of the squared products a_il^2 b_lj^2
  double carried_squares = 0;  ///< Q_K: sum_l (checksum of A's column l)^2 b_lj^2: the carried GEMM's terms
  double result_squares = 0;   ///< P: the checksum of C o C
  double checksum = 0;         ///< R: the carried checksum itself (drift of sums whose terms share a sign)
  double l1 = 0;               ///< S: the checksum of |A| |B| (the l1_bound model)
};

/// The threshold for T (float or double) with gamma already resolved (> 0): threshold.override_value
/// when > 0, else the model's.
template <class T>
SKINNY_HOST_DEVICE inline double resolved_threshold(const Threshold& threshold, std::int64_t k, std::int64_t h,
                                                    const CheckMagnitudes& m) {
  if (threshold.override_value > 0) return threshold.override_value;
  const double u = (sizeof(T) == 8 ? DBL_EPSILON : double(FLT_EPSILON)) / 2;
  const double smallest = sizeof(T) == 8 ? DBL_TRUE_MIN : double(FLT_TRUE_MIN);
  const double terms = double(k + h);
  if (threshold.model == ThresholdModel::l1_bound) return threshold.gamma * u * sqrt(terms) * m.l1;
  // sigma = u sqrt(k + h) sqrt(Q + Q_K + P + R^2), summed without squaring R (a double R^2 can overflow),
  // plus the absolute error of results below T's normal range, which the squares cannot see.
  const double spread = hypot(hypot(sqrt(m.squares), sqrt(m.carried_squares)), hypot(sqrt(m.result_squares), m.checksum));
  return threshold.gamma * (u * sqrt(terms) * spread + terms * smallest);
}

/// The threshold for T: as resolved_threshold, with gamma = default_gamma<T>(model) when threshold.gamma is 0.
template <class T>
double check_threshold(const Threshold& threshold, std::int64_t k, std::int64_t h, const CheckMagnitudes& m);

}  // namespace skinny::abft::detail
