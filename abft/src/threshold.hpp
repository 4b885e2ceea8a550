// The threshold of one checksum comparison, from the magnitudes the rounding depends on: pure host code,
// shared by ProtectedGemm and the CPU simulations that calibrate it (docs/abft-threshold.md).
#pragma once

#include <skinny/abft/abft.hpp>

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

/// The threshold for T (float or double): threshold.override_value when > 0, else the model's, with
/// gamma = default_gamma<T>(model) when threshold.gamma is 0.
template <class T>
double check_threshold(const Threshold& threshold, std::int64_t k, std::int64_t h, const CheckMagnitudes& m);

}  // namespace skinny::abft::detail
