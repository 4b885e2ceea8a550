// Exact, order-free sums of floating-point values: each value v of a column becomes the integer
// q = round(v * 2^s), with the column's s fixed per fit so that |q| <= 2^kFixedBits; a block adds at most
// kFlushRows of them in 64 bits, and block sums go into a (high, low) pair of 64-bit integers per
// element with integer atomics. Integer addition is associative, so the sums do not depend on how the
// points are split among blocks, chunks of a stream or GPUs, nor on the order blocks finish: the
// centroids are the same bits however the work was divided. Each value is rounded by at most 2^-50 of
// its column's largest magnitude (9e-16 of it), about a double's own rounding.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <skinny/gemm/host_device.hpp>

namespace skinny::kmeans::detail {

constexpr int kFixedBits = 50;                              ///< |q| <= 2^50 for every value
constexpr std::int64_t kFlushRows = std::int64_t(1) << 12;  ///< values per 64-bit partial sum: <= 2^62

/// The power of two that maps values of magnitude <= max_abs below 2^kFixedBits (1 for a zero column).
inline double fixed_scale(double max_abs) {
  if (!(max_abs > 0) || !std::isfinite(max_abs)) return 1.0;
  const int e = std::ilogb(max_abs);  // max_abs in [2^e, 2^(e + 1))
  return std::ldexp(1.0, std::max(-1000, std::min(1000, kFixedBits - 1 - e)));
}

/// The accumulated sum as a double: (signed high) * 2^32 + low, divided by the scale. The low word's carries
/// go up first, so that both words convert exactly and the sum rounds once: every (high, low) pair of one
/// sum (however it was split into partial sums, or moved point by point) gives the same bits.
SKINNY_HOST_DEVICE inline double from_fixed(unsigned long long hi, unsigned long long lo, double inv_scale) {
  const auto high = static_cast<long long>(hi + (lo >> 32));
  return (static_cast<double>(high) * 4294967296.0 + static_cast<double>(lo & 0xffffffffull)) * inv_scale;
}

/// The (high, low) words a 64-bit partial sum adds: the signed bits from 32 up (two's complement wraps
/// correctly in an unsigned add) and the low 32 bits. Up to 2^32 partial sums fit either word.
SKINNY_HOST_DEVICE inline unsigned long long fixed_high(long long s) { return static_cast<unsigned long long>(s >> 32); }
SKINNY_HOST_DEVICE inline unsigned long long fixed_low(long long s) {
  return static_cast<unsigned long long>(s) & 0xffffffffull;
}

#if defined(__CUDACC__)
/// q = round(v * scale), scale a power of two (an exact product), for |v * scale| < 2^51: adding 1.5 x 2^52
/// leaves the rounded integer in the low bits of the double (one FMA and one integer subtraction instead
/// of a conversion, which runs at a quarter of the FMA rate).
__device__ __forceinline__ long long to_fixed(double v, double scale) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 x 2^52
  return __double_as_longlong(__fma_rn(v, scale, kMagic)) - __double_as_longlong(kMagic);
}

/// Adds a 64-bit partial sum into an element's (high, low) accumulators.
__device__ __forceinline__ void add_fixed(unsigned long long* hi, unsigned long long* lo, long long s) {
  if (s == 0) return;
  atomicAdd(hi, fixed_high(s));
  atomicAdd(lo, fixed_low(s));
}
#endif

}  // namespace skinny::kmeans::detail

