// Exact sums over shards for fit_distributed: each value becomes an integer in fixed point
// (fixed_point.hpp) with a scale that depends only on the global maximum, so the sum of the ranks'
// integer sums is the same number for any split of the rows. Used for the inertia (every iteration and
// at the end) and for the mean feature variance that scales tol.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace skinny::kmeans::detail {

/// *max_bits = max(*max_bits, the bits of max_i w_i v_i) for n non-negative values v (weights w: null
/// for 1). The bits of non-negative doubles order as the doubles do (an integer max across ranks).
template <class T>
void max_weighted_bits(const T* v, const double* w, std::int64_t n, unsigned long long* max_bits, cudaStream_t stream);

/// hi_lo[0], hi_lo[1] += the (high, low) words of the sum of w_i v_i in fixed point, its scale that of
/// the maximum whose bits are at *max_bits (device memory; read on the device, no wait).
template <class T>
void fixed_sum(const T* v, const double* w, std::int64_t n, const unsigned long long* max_bits,
               unsigned long long* hi_lo, cudaStream_t stream);

/// The sum fixed_sum formed, for the maximum `max_value` (host).
double fixed_sum_value(unsigned long long hi, unsigned long long lo, double max_value);

/// Column sums of the n x d row-major x in fixed point: hi (d) and lo (d) += each column's sum of
/// (x_ij - center_j)^2 when center is non-null, of x_ij otherwise; column j's scale at scale[j] (device).
template <class T>
void column_fixed_sums(const T* x, std::int64_t n, std::int64_t d, const double* center, const double* scale,
                       unsigned long long* hi, unsigned long long* lo, cudaStream_t stream);

}  // namespace skinny::kmeans::detail
