// Exact sums over shards (exact_sums.hpp): fixed-point integers added in 64-bit partial sums of at most
// kFlushRows values, then into (high, low) words with integer atomics, as the cluster sums are.
#include "exact_sums.hpp"
#include "fixed_point.hpp"

#include <skinny/gemm/errors.hpp>

#include <algorithm>

namespace skinny::kmeans::detail {
namespace {

using u64 = unsigned long long;
constexpr int kThreads = 256;

/// fixed_scale (fixed_point.hpp) on the device: the same power of two for the same maximum.
__device__ double device_fixed_scale(double max_value) {
  if (!(max_value > 0) || isinf(max_value)) return 1.0;
  const int e = ilogb(max_value);
  return ldexp(1.0, max(-1000, min(1000, kFixedBits - 1 - e)));
}

template <class T>
__global__ void max_bits_kernel(const T* __restrict__ v, const double* __restrict__ w, std::int64_t n,
                                u64* __restrict__ out) {
  double m = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    m = fmax(m, static_cast<double>(v[i]) * (w ? w[i] : 1.0));
  for (int offset = 16; offset > 0; offset /= 2) m = fmax(m, __shfl_down_sync(0xffffffffu, m, offset));
  if ((threadIdx.x & 31) == 0) atomicMax(out, static_cast<u64>(__double_as_longlong(m)));
}

/// Block b adds values [b kFlushRows, (b + 1) kFlushRows): thread sums, then the block's sum in shared memory.
template <class T>
__global__ void fixed_sum_kernel(const T* __restrict__ v, const double* __restrict__ w, std::int64_t n,
                                 const u64* __restrict__ max_bits, u64* __restrict__ hi_lo) {
  __shared__ long long warp_sums[kThreads / 32];
  const double scale = device_fixed_scale(__longlong_as_double(static_cast<long long>(*max_bits)));
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * kFlushRows;
  const std::int64_t end = min(n, begin + kFlushRows);
  long long s = 0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    s += to_fixed(static_cast<double>(v[i]) * (w ? w[i] : 1.0), scale);
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    long long block = 0;
    for (int i = 0; i < kThreads / 32; ++i) block += warp_sums[i];
    add_fixed(hi_lo, hi_lo + 1, block);
  }
}

/// Thread (column j, row block b): its column over rows [b kFlushRows, (b + 1) kFlushRows).
template <class T>
__global__ void column_sums_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d,
                                   const double* __restrict__ center, const double* __restrict__ scale,
                                   u64* __restrict__ hi, u64* __restrict__ lo) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const double f = scale[j], c = center ? center[j] : 0.0;
  for (std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kFlushRows; r0 < n;
       r0 += static_cast<std::int64_t>(gridDim.y) * kFlushRows) {  // grid y is capped at 65535
    const std::int64_t r1 = min(n, r0 + kFlushRows);
    long long s = 0;
    for (std::int64_t i = r0; i < r1; ++i) {
      const double v = static_cast<double>(x[i * d + j]);
      s += to_fixed(center ? (v - c) * (v - c) : v, f);
    }
    add_fixed(hi + j, lo + j, s);
  }
}

}  // namespace

template <class T>
void max_weighted_bits(const T* v, const double* w, std::int64_t n, unsigned long long* max_bits, cudaStream_t stream) {
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 1024));
  max_bits_kernel<T><<<blocks, kThreads, 0, stream>>>(v, w, n, max_bits);
  SKINNY_CHECK_LAUNCH();
}

template <class T>
void fixed_sum(const T* v, const double* w, std::int64_t n, const unsigned long long* max_bits,
               unsigned long long* hi_lo, cudaStream_t stream) {
  if (n == 0) return;
  fixed_sum_kernel<T><<<static_cast<unsigned>((n + kFlushRows - 1) / kFlushRows), kThreads, 0, stream>>>(v, w, n, max_bits,
                                                                                                         hi_lo);
  SKINNY_CHECK_LAUNCH();
}

double fixed_sum_value(unsigned long long hi, unsigned long long lo, double max_value) {
  return from_fixed(hi, lo, 1.0 / fixed_scale(max_value));
}

template <class T>
void column_fixed_sums(const T* x, std::int64_t n, std::int64_t d, const double* center, const double* scale,
                       unsigned long long* hi, unsigned long long* lo, cudaStream_t stream) {
  if (n == 0) return;
  const dim3 grid(static_cast<unsigned>((d + 127) / 128),
                  static_cast<unsigned>(std::min<std::int64_t>((n + kFlushRows - 1) / kFlushRows, 65535)));
  column_sums_kernel<T><<<grid, 128, 0, stream>>>(x, n, d, center, scale, hi, lo);
  SKINNY_CHECK_LAUNCH();
}

#define SKINNY_EXACT_SUMS(T)                                                                                        \
  template void max_weighted_bits(const T*, const double*, std::int64_t, unsigned long long*, cudaStream_t);        \
  template void fixed_sum(const T*, const double*, std::int64_t, const unsigned long long*, unsigned long long*,     \
                          cudaStream_t);                                                                            \
  template void column_fixed_sums(const T*, std::int64_t, std::int64_t, const double*, const double*,               \
                                  unsigned long long*, unsigned long long*, cudaStream_t);
SKINNY_EXACT_SUMS(float)
SKINNY_EXACT_SUMS(double)

}  // namespace skinny::kmeans::detail
