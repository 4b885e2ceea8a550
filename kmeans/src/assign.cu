// Norms, the fused argmin + inertia + counts of the assignment step, and small reductions.
#include "detail.hpp"
#include "block_sum.cuh"
#include "column_pieces.cuh"
#include "element.cuh"
#include "protect.hpp"

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/tf32.hpp>

#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform_reduce.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

namespace skinny::kmeans::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;

unsigned blocks_for_warps(std::int64_t warps) {
  return static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

/// Sum over the warp in a fixed butterfly order: every lane gets the same, reproducible total.
__device__ double warp_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

template <class T, class C>
__global__ void row_sq_norms_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d, C* __restrict__ out) {
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;
  const T* r = x + row * d;
  double s = 0;
  for (std::int64_t j = lane; j < d; j += 32) {
    const double v = to_double(r[j]);
    s += v * v;
  }
  s = warp_sum(s);
  if (lane == 0) out[row] = static_cast<C>(s);
}

template <class T>
__global__ void widen_rows_kernel(const T* __restrict__ x, std::int64_t m, std::int64_t d, float* __restrict__ out,
                                  std::int64_t ldo) {
  const std::int64_t total = m * d, stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const std::int64_t i = idx / d, j = idx - i * d;
    out[i * ldo + j] = to_float(x[idx]);
  }
}

template <class T, class C>
__global__ void label_sq_distances_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d,
                                          const C* __restrict__ c, const std::int32_t* __restrict__ labels,
                                          C* __restrict__ out) {
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;
  const T* r = x + row * d;
  const C* cr = c + static_cast<std::int64_t>(labels[row]) * d;
  double s = 0;
  for (std::int64_t j = lane; j < d; j += 32) {
    const double v = to_double(r[j]) - static_cast<double>(cr[j]);
    s += v * v;
  }
  s = warp_sum(s);
  if (lane == 0) out[row] = static_cast<C>(s);
}

/// The warp's minimum of the lanes' (best, best_j) (the lowest column among equal values; INT_MAX: the
/// lane saw no column), written for point `row` by lane 0; counts += 1 for it unless counts is null.
template <class T>
__device__ __forceinline__ void finish_argmin_row(T best, int best_j, std::int64_t row,
                                                  std::int32_t* __restrict__ labels, T* __restrict__ mindist,
                                                  int* counts, int lane) {
  for (int off = 16; off > 0; off >>= 1) {
    const T other = __shfl_xor_sync(0xffffffffu, best, off);
    const int other_j = __shfl_xor_sync(0xffffffffu, best_j, off);
    if (other_j != INT_MAX && (best_j == INT_MAX || other < best || (other == best && other_j < best_j))) {
      best = other;
      best_j = other_j;
    }
  }
  if (lane == 0) {
    labels[row] = best_j;
    mindist[row] = best > T(0) ? best : T(0);
    if (counts) atomicAdd(counts + best_j, 1);
  }
}

/// One warp: the nearest centroid of point `row`, whose k cross terms start at g + row * ldg; counts
/// += 1 for it unless counts is null.
template <class T>
__device__ __forceinline__ void argmin_row(const T* __restrict__ g, std::int64_t ldg, std::int64_t row, std::int64_t k,
                                           const T* __restrict__ xnorm, const T* __restrict__ cnorm,
                                           std::int32_t* __restrict__ labels, T* __restrict__ mindist, int* counts,
                                           int lane) {
  const T xn = xnorm[row];
  const T* gr = g + row * ldg;
  T best = T(0);
  int best_j = INT_MAX;
  for (std::int64_t j = lane; j < k; j += 32) {  // each lane sees increasing j: keeps its first minimum
    const T dist = xn + cnorm[j] - T(2) * gr[j];
    if (best_j == INT_MAX || dist < best) {
      best = dist;
      best_j = static_cast<int>(j);
    }
  }
  finish_argmin_row(best, best_j, row, labels, mindist, counts, lane);
}

/// argmin_row for rows of whole 16-byte vectors (k sizeof(T) a multiple of 16, g and cnorm 16-byte
/// aligned): each lane reads a vector of consecutive terms at a time, two in flight, so that a warp keeps
/// 1 KB of loads in flight instead of 128 bytes (the scalar loop read 1M x 8192 float terms at 2.1 TB/s
/// on an H200).
/// Each lane still sees its columns in increasing order, and the warp takes the lowest column among equal
/// minima: the same label and distance.
template <class T>
__device__ __forceinline__ void argmin_row_vectors(const T* __restrict__ g, std::int64_t row, std::int64_t k,
                                                   const T* __restrict__ xnorm, const T* __restrict__ cnorm,
                                                   std::int32_t* __restrict__ labels, T* __restrict__ mindist,
                                                   int* counts, int lane) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "16-byte vectors of float or double");
  using V = std::conditional_t<std::is_same_v<T, float>, float4, double2>;
  constexpr int kPer = sizeof(V) / sizeof(T);
  const T xn = xnorm[row];
  const V* gr = reinterpret_cast<const V*>(g + row * k);
  const V* cn = reinterpret_cast<const V*>(cnorm);
  const std::int64_t vectors = k / kPer;
  T best = T(0);
  int best_j = INT_MAX;
  const auto consider = [&](const V& gv, const V& cv, std::int64_t v) {
    const T* gs = reinterpret_cast<const T*>(&gv);
    const T* cs = reinterpret_cast<const T*>(&cv);
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const T dist = xn + cs[e] - T(2) * gs[e];
      if (best_j == INT_MAX || dist < best) {
        best = dist;
        best_j = static_cast<int>(v * kPer + e);
      }
    }
  };
  std::int64_t v = lane;
  for (; v + 32 < vectors; v += 64) {
    const V g0 = gr[v], g1 = gr[v + 32], c0 = cn[v], c1 = cn[v + 32];
    consider(g0, c0, v);
    consider(g1, c1, v + 32);
  }
  if (v < vectors) consider(gr[v], cn[v], v);
  finish_argmin_row(best, best_j, row, labels, mindist, counts, lane);
}

/// A checksum test's outcome, |difference| / bound: a failure adds 1 to *failures, a pass raises *max_ratio
/// (float bits of the ratio, >= 0, so an integer max orders them and is deterministic).
__device__ __forceinline__ void record_check(double ratio, int* failures, unsigned* max_ratio) {
  if (!(ratio <= 1)) {  // NaN and infinity fail too
    atomicAdd(failures, 1);
  } else {
    atomicMax(max_ratio, __float_as_uint(static_cast<float>(ratio)));
  }
}
/// The checksum test of one point (protect.hpp): its cross terms' sum against the carried x.s, within its
/// bound.
__device__ __forceinline__ void check_point(double sum, double carried, double x_sq_norm, double scale, double factor,
                                            int* failures, unsigned* max_ratio) {
  record_check(fabs(sum - carried) / distance_bound(x_sq_norm, scale, factor), failures, max_ratio);
}

/// Counts per block in shared memory when they fit (one global atomic per cluster and block instead of
/// one per point: 16 counters hit by 262144 points serialise otherwise).
constexpr int kSharedCounts = 8192;

/// Per-block counts in shared memory (when k <= kSharedCounts): zeroed, then added to the global ones.
__device__ __forceinline__ void zero_block_counts(int* block_counts, std::int64_t k) {
  if (k <= kSharedCounts)
    for (std::int64_t j = threadIdx.x; j < k; j += blockDim.x) block_counts[j] = 0;
  __syncthreads();
}
__device__ __forceinline__ void flush_block_counts(const int* block_counts, std::int64_t k, int* counts) {
  if (k > kSharedCounts) return;
  __syncthreads();
  for (std::int64_t j = threadIdx.x; j < k; j += blockDim.x)
    if (block_counts[j] != 0) atomicAdd(counts + j, block_counts[j]);
}

template <class T>
__global__ void __launch_bounds__(kThreads) argmin_kernel(const T* __restrict__ g, std::int64_t rows, std::int64_t k,
                                                          const T* __restrict__ xnorm, const T* __restrict__ cnorm,
                                                          std::int32_t* __restrict__ labels, T* __restrict__ mindist,
                                                          int* __restrict__ counts) {
  extern __shared__ int block_counts[];  // k of them when k <= kSharedCounts
  zero_block_counts(block_counts, k);
  const int lane = threadIdx.x % 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  int* to = k <= kSharedCounts ? block_counts : counts;
  const bool vectors = k * std::int64_t(sizeof(T)) % 16 == 0 && reinterpret_cast<std::uintptr_t>(g) % 16 == 0 &&
                       reinterpret_cast<std::uintptr_t>(cnorm) % 16 == 0;
  for (std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows;
       row += warps) {
    if (vectors)
      argmin_row_vectors(g, row, k, xnorm, cnorm, labels, mindist, to, lane);
    else
      argmin_row(g, k, row, k, xnorm, cnorm, labels, mindist, to, lane);
  }
  flush_block_counts(block_counts, k, counts);
}

/// r . s (d values) in double by one warp, the lanes' shares added in a fixed order.
template <class T>
__device__ __forceinline__ double warp_row_dot(const T* __restrict__ r, std::int64_t d, const double* __restrict__ s,
                                               int lane) {
  double v = 0;
  for (std::int64_t j = lane; j < d; j += 32) v += to_double(r[j]) * s[j];
  return warp_sum(v);
}

/// out[i] = x_i . s in double (one warp per row): the carried checksum term of the fused assignment.
template <class T>
__global__ void row_dots_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d, const double* __restrict__ s,
                                double* __restrict__ out) {
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;
  const double v = warp_row_dot(x + row * d, d, s, lane);
  if (lane == 0) out[row] = v;
}

template <class C>
__global__ void check_points_kernel(const double* __restrict__ sums, const double* __restrict__ carried,
                                    const C* __restrict__ xnorm, std::int64_t rows, const double* __restrict__ scale,
                                    double factor, int* __restrict__ failures, unsigned* __restrict__ max_ratio) {
  const double m = *scale;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    check_point(sums[i], carried[i], static_cast<double>(xnorm[i]), m, factor, failures, max_ratio);
}

/// One warp per block of kOneProductBlockRows points: the sum of their one-product row sums (in a fixed
/// order) against the block's carried term, within one_product_block_bound.
__global__ void check_one_product_blocks_kernel(const double* __restrict__ sums, std::int64_t rows,
                                                const double* __restrict__ carried, const double* __restrict__ norms,
                                                const double* __restrict__ scale, double factor, double bias,
                                                int* __restrict__ failures, unsigned* __restrict__ max_ratio) {
  const std::int64_t b = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const std::int64_t r0 = b * kOneProductBlockRows;
  if (r0 >= rows) return;
  const std::int64_t r1 = min(r0 + kOneProductBlockRows, rows);
  double v = 0;
  for (std::int64_t i = r0 + lane; i < r1; i += 32) v += sums[i];
  v = warp_sum(v);
  if (lane == 0) {
    const double ratio = fabs(v - carried[b]) / one_product_block_bound(norms[b], carried[b], *scale, factor, bias);
    record_check(ratio, failures, max_ratio);
  }
}

/// One warp per listed point (rows[i] of x): sums[i] against x_row . s (in double), within the point's bound.
template <class T>
__global__ void check_listed_points_kernel(const T* __restrict__ x, std::int64_t d,
                                           const std::int32_t* __restrict__ rows, std::int64_t count,
                                           const double* __restrict__ sums, const double* __restrict__ s,
                                           const compute_t<T>* __restrict__ xnorm, const double* __restrict__ scale,
                                           double factor, int* __restrict__ failures,
                                           unsigned* __restrict__ max_ratio) {
  const std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (i >= count) return;
  const std::int64_t row = rows[i];
  const double v = warp_row_dot(x + row * d, d, s, lane);
  if (lane == 0) check_point(sums[i], v, static_cast<double>(xnorm[row]), *scale, factor, failures, max_ratio);
}

/// Protected assignment: one warp per point checks its k cross terms against the checksum term g[k] (x.s,
/// s the sum of the centroids, from the same GEMM) within the point's bound, then finds its nearest
/// centroid. A failed check adds 1 to *failures; passing checks raise *max_ratio (float bits of
/// |difference| / bound, >= 0, so an integer max orders them and is deterministic).
template <class T>
__global__ void __launch_bounds__(kThreads) checked_argmin_kernel(const T* __restrict__ g, std::int64_t rows,
                                                                  std::int64_t k, const T* __restrict__ xnorm,
                                                                  const T* __restrict__ cnorm,
                                                                  const double* __restrict__ centroid_scale,
                                                                  double bound_factor, std::int32_t* __restrict__ labels,
                                                                  T* __restrict__ mindist, int* __restrict__ failures,
                                                                  unsigned* __restrict__ max_ratio) {
  const int lane = threadIdx.x % 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  const double scale = *centroid_scale;
  for (std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows;
       row += warps) {
    const T* gr = g + row * (k + 1);
    double s = 0;
    for (std::int64_t j = lane; j < k; j += 32) s += static_cast<double>(gr[j]);
    s = warp_sum(s);
    if (lane == 0)
      check_point(s, static_cast<double>(gr[k]), static_cast<double>(xnorm[row]), scale, bound_factor, failures,
                  max_ratio);
    argmin_row(g, k + 1, row, k, xnorm, cnorm, labels, mindist, static_cast<int*>(nullptr), lane);
  }
}

/// A float point element as the TF32 tensor cores read it: its low 13 bits dropped (16-bit values are
/// read exactly).
template <class T>
__device__ __forceinline__ double as_tf32_operand(T v) {
  if constexpr (std::is_same_v<T, float>) return __uint_as_float(gemm::tf32_truncated_bits(__float_as_uint(v)));
  else return to_double(v);
}

/// One block per block check: its column sums (of the values as the TF32 tensor cores read them with
/// kTf32) and its squared norms, the threads over columns (each row read whole by the block, coalesced).
template <class T, bool kTf32>
__global__ void __launch_bounds__(kThreads) block_column_totals_kernel(const T* __restrict__ x, std::int64_t n,
                                                                       std::int64_t d, std::int64_t chunk,
                                                                       std::int64_t block_rows,
                                                                       std::int64_t blocks_per_chunk,
                                                                       double* __restrict__ totals,
                                                                       double* __restrict__ norms) {
  __shared__ double part[kThreads];
  const std::int64_t b = blockIdx.x, ci = b / blocks_per_chunk;
  const std::int64_t r0 = ci * chunk + (b % blocks_per_chunk) * block_rows;
  const std::int64_t r1 = min(min(r0 + block_rows, (ci + 1) * chunk), n);
  double sq = 0;
  for (std::int64_t j = threadIdx.x; j < d; j += kThreads) {
    double s = 0;
    for (std::int64_t i = r0; i < r1; ++i) {
      const double v = to_double(x[i * d + j]);
      s += kTf32 ? as_tf32_operand(x[i * d + j]) : v;
      sq += v * v;
    }
    totals[b * d + j] = s;
  }
  const double norm = block_tree_sum<kThreads>(sq, part);
  if (threadIdx.x == 0) norms[b] = norm;
}

/// Few centroids: one thread per point reads its k cross terms itself (no shuffles, no idle lanes).
constexpr int kThreadPerPointMaxK = 32;

/// One thread: the nearest of k centroids from a point's cross terms gr (ties: the lowest index); its
/// distance in `best`.
template <class T>
__device__ __forceinline__ int nearest_in_row(const T* __restrict__ gr, int k, T xn, const T* c_norms, T& best) {
  best = xn + c_norms[0] - T(2) * gr[0];
  int best_j = 0;
  for (int j = 1; j < k; ++j) {
    const T dist = xn + c_norms[j] - T(2) * gr[j];
    if (dist < best) {  // strict: ties keep the lowest index
      best = dist;
      best_j = j;
    }
  }
  return best_j;
}

/// block_checked_argmin: a block of kThreads (= kCheckBlockRows) points, a thread each. Each column's sum
/// over the block in a fixed order (warps by shuffles, then the warps' sums), checked by thread j; then
/// each thread labels its point.
template <class T>
__global__ void __launch_bounds__(kThreads) block_checked_argmin_kernel(
    const T* __restrict__ g, std::int64_t rows, int k, const T* __restrict__ xnorm, const T* __restrict__ cnorm,
    const double* __restrict__ carried, const double* __restrict__ norms, std::int64_t block0, double factor,
    std::int32_t* __restrict__ labels, T* __restrict__ mindist, int* __restrict__ failures,
    unsigned* __restrict__ max_ratio) {
  static_assert(kThreads == kCheckBlockRows, "a thread per point of a block check");
  __shared__ T c_norms[kThreadPerPointMaxK];
  __shared__ double warp_sums[kWarpsPerBlock][kThreadPerPointMaxK];
  if (threadIdx.x < k) c_norms[threadIdx.x] = cnorm[threadIdx.x];
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool valid = row < rows;
  const T* gr = g + row * k;
  for (int j = 0; j < k; ++j) {
    const double v = warp_sum(valid ? static_cast<double>(gr[j]) : 0.0);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32][j] = v;
  }
  __syncthreads();
  if (threadIdx.x < k) {
    double s = 0;
    for (int w = 0; w < kWarpsPerBlock; ++w) s += warp_sums[w][threadIdx.x];
    const std::int64_t b = block0 + blockIdx.x;
    check_point(s, carried[b * k + threadIdx.x], norms[b], sqrt(static_cast<double>(c_norms[threadIdx.x])), factor,
                failures, max_ratio);
  }
  if (!valid) return;
  T best;
  labels[row] = nearest_in_row(gr, k, xnorm[row], c_norms, best);
  mindist[row] = best > T(0) ? best : T(0);
}

/// checked_argmin for few centroids: one thread per point (as argmin_small_k_kernel), its k + 1 terms.
template <class T>
__global__ void __launch_bounds__(kThreads) checked_argmin_small_k_kernel(
    const T* __restrict__ g, std::int64_t rows, int k, const T* __restrict__ xnorm, const T* __restrict__ cnorm,
    const double* __restrict__ centroid_scale, double bound_factor, std::int32_t* __restrict__ labels,
    T* __restrict__ mindist, int* __restrict__ failures, unsigned* __restrict__ max_ratio) {
  __shared__ T c_norms[kThreadPerPointMaxK];
  if (threadIdx.x < k) c_norms[threadIdx.x] = cnorm[threadIdx.x];
  __syncthreads();
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const T* gr = g + row * (k + 1);
  double s = 0;
  for (int j = 0; j < k; ++j) s += static_cast<double>(gr[j]);
  const T xn = xnorm[row];
  check_point(s, static_cast<double>(gr[k]), static_cast<double>(xn), *centroid_scale, bound_factor, failures, max_ratio);
  T best;
  labels[row] = nearest_in_row(gr, k, xn, c_norms, best);
  mindist[row] = best > T(0) ? best : T(0);
}

template <class T>
__global__ void __launch_bounds__(kThreads) argmin_small_k_kernel(const T* __restrict__ g, std::int64_t rows, int k,
                                                                  const T* __restrict__ xnorm,
                                                                  const T* __restrict__ cnorm,
                                                                  std::int32_t* __restrict__ labels,
                                                                  T* __restrict__ mindist, int* __restrict__ counts) {
  __shared__ T c_norms[kThreadPerPointMaxK];
  __shared__ int block_counts[kThreadPerPointMaxK];
  if (threadIdx.x < k) {
    c_norms[threadIdx.x] = cnorm[threadIdx.x];
    block_counts[threadIdx.x] = 0;
  }
  __syncthreads();
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row < rows) {
    T best;
    const int best_j = nearest_in_row(g + row * k, k, xnorm[row], c_norms, best);
    labels[row] = best_j;
    mindist[row] = best > T(0) ? best : T(0);
    atomicAdd(block_counts + best_j, 1);
  }
  __syncthreads();
  if (threadIdx.x < k && block_counts[threadIdx.x] != 0) atomicAdd(counts + threadIdx.x, block_counts[threadIdx.x]);
}

__global__ void __launch_bounds__(kThreads) count_labels_kernel(const std::int32_t* __restrict__ labels,
                                                                std::int64_t n, std::int64_t k,
                                                                int* __restrict__ counts) {
  extern __shared__ int block_counts[];  // k of them when k <= kSharedCounts
  zero_block_counts(block_counts, k);
  int* to = k <= kSharedCounts ? block_counts : counts;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // kCountBatch labels' loads in flight before their atomics: one at a time, each atomic waited for its
  // load (1M labels: 10 us, 0.4 TB/s).
  constexpr int kCountBatch = 8;
  for (; i + (kCountBatch - 1) * stride < n; i += kCountBatch * stride) {
    std::int32_t batch[kCountBatch];
#pragma unroll
    for (int u = 0; u < kCountBatch; ++u) batch[u] = labels[i + u * stride];
#pragma unroll
    for (int u = 0; u < kCountBatch; ++u) atomicAdd(to + batch[u], 1);
  }
  for (; i < n; i += stride) atomicAdd(to + labels[i], 1);
  flush_block_counts(block_counts, k, counts);
}

constexpr int kSumThreads = 1024;
/// Values per block of the first pass: eight a thread, so that the sums of an iteration (1M distances,
/// k x d shifts) spread over many blocks instead of waiting on 64 dependent loads a thread.
constexpr std::int64_t kSumPerBlock = 1 << 13;

/// Block b: out[b] = the sum of values [b * share, (b + 1) * share), each thread over a fixed stride,
/// then a fixed tree. With labels `now` and `before` (else null), also out[gridDim.x + b] = how many of
/// those points changed label: the iteration's two statistics in one pass and one copy back.
template <class T>
__global__ void __launch_bounds__(kSumThreads) block_sums_kernel(const T* __restrict__ values, std::int64_t count,
                                                                 std::int64_t share, const double* __restrict__ weights,
                                                                 double* __restrict__ out,
                                                                 const std::int32_t* __restrict__ now = nullptr,
                                                                 const std::int32_t* __restrict__ before = nullptr) {
  __shared__ double part[kSumThreads];
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * share;
  const std::int64_t end = min(count, begin + share);
  double s = 0;
  int changed = 0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += kSumThreads) {
    s += weights ? static_cast<double>(values[i]) * weights[i] : static_cast<double>(values[i]);
    if (now) changed += now[i] != before[i];
  }
  const double total = block_tree_sum<kSumThreads>(s, part);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
  if (now) {
    const double changes = block_tree_sum<kSumThreads>(static_cast<double>(changed), part);  // below 2^53: exact
    if (threadIdx.x == 0) out[gridDim.x + blockIdx.x] = changes;
  }
}

template <class T>
__global__ void min_distance_kernel(double* __restrict__ d2, const T* __restrict__ g, std::int64_t ldg,
                                    const T* __restrict__ xnorm, T cnorm, std::int64_t n, bool first) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double v = static_cast<double>(xnorm[i] + cnorm - T(2) * g[i * ldg]);
  v = v > 0 ? v : 0;
  d2[i] = first || v < d2[i] ? v : d2[i];
}

__global__ void count_changes_kernel(const std::int32_t* __restrict__ a, const std::int32_t* __restrict__ b,
                                     std::int64_t n, unsigned long long* __restrict__ out) {
  unsigned long long changed = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    changed += a[i] != b[i];
  for (int off = 16; off > 0; off >>= 1) changed += __shfl_xor_sync(0xffffffffu, changed, off);
  if (threadIdx.x % 32 == 0 && changed != 0) atomicAdd(out, changed);
}

}  // namespace

void count_changes(const std::int32_t* a, const std::int32_t* b, std::int64_t n, unsigned long long* out,
                   cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 4LL * multiprocessors()));
  count_changes_kernel<<<blocks, kThreads, 0, stream>>>(a, b, n, out);
  SKINNY_CHECK_LAUNCH();
}

std::int64_t chunk_rows(std::int64_t n, std::int64_t k, int elem_bytes, std::int64_t budget) {
  return std::max<std::int64_t>(1, std::min<std::int64_t>(n, budget / (k * elem_bytes)));
}

std::size_t available_device_memory() {
  std::size_t free = 0, total = 0;
  SKINNY_CUDA_TRY(cudaMemGetInfo(&free, &total));
  const std::size_t headroom = std::max<std::size_t>(std::size_t(512) << 20, total / 20);
  return free > headroom ? free - headroom : 0;
}

template <class T>
void row_sq_norms(const T* x, std::int64_t n, std::int64_t d, compute_t<T>* out, cudaStream_t stream) {
  row_sq_norms_kernel<<<blocks_for_warps(n), kThreads, 0, stream>>>(x, n, d, out);
  SKINNY_CHECK_LAUNCH();
}

template <class T>
void widen_rows(const T* x, std::int64_t m, std::int64_t d, float* out, std::int64_t ldo, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((m * d + kThreads - 1) / kThreads, 8LL * multiprocessors()));
  widen_rows_kernel<<<blocks, kThreads, 0, stream>>>(x, m, d, out, ldo);
  SKINNY_CHECK_LAUNCH();
}

template <class T>
void label_sq_distances(const T* x, std::int64_t n, std::int64_t d, const compute_t<T>* c, const std::int32_t* labels,
                        compute_t<T>* out, cudaStream_t stream) {
  label_sq_distances_kernel<<<blocks_for_warps(n), kThreads, 0, stream>>>(x, n, d, c, labels, out);
  SKINNY_CHECK_LAUNCH();
}

template <class T>
double mean_feature_variance(const T* x, std::int64_t n, std::int64_t d, cudaStream_t stream) {
  const std::int64_t pieces = std::min<std::int64_t>(n, 256);
  const std::int64_t rows_per_piece = (n + pieces - 1) / pieces;
  DeviceBuffer<double> part(static_cast<std::size_t>(pieces * d)), mean(static_cast<std::size_t>(d)),
      var(static_cast<std::size_t>(d));
  const dim3 grid(static_cast<unsigned>((d + kThreads - 1) / kThreads), static_cast<unsigned>(pieces));
  const unsigned cols = static_cast<unsigned>((d + kThreads - 1) / kThreads);
  column_sums_kernel<<<grid, kThreads, 0, stream>>>(x, n, d, rows_per_piece, nullptr, part.data());
  SKINNY_CHECK_LAUNCH();
  add_pieces_kernel<<<cols, kThreads, 0, stream>>>(part.data(), pieces, d, 1.0 / double(n), mean.data());
  SKINNY_CHECK_LAUNCH();
  column_sums_kernel<<<grid, kThreads, 0, stream>>>(x, n, d, rows_per_piece, mean.data(), part.data());
  SKINNY_CHECK_LAUNCH();
  add_pieces_kernel<<<cols, kThreads, 0, stream>>>(part.data(), pieces, d, 1.0 / double(n), var.data());
  SKINNY_CHECK_LAUNCH();
  return sum(var.data(), d, stream) / double(d);
}

template <class T>
void argmin(const T* g, std::int64_t rows, std::int64_t k, const T* xnorm, const T* cnorm, std::int32_t* labels,
            T* mindist, int* counts, cudaStream_t stream) {
  if (k <= kThreadPerPointMaxK) {
    argmin_small_k_kernel<<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        g, rows, static_cast<int>(k), xnorm, cnorm, labels, mindist, counts);
    SKINNY_CHECK_LAUNCH();
    return;
  }
  const int sms = multiprocessors();
  const unsigned blocks = std::min<unsigned>(blocks_for_warps(rows), static_cast<unsigned>(8 * sms));
  const std::size_t smem = k <= kSharedCounts ? static_cast<std::size_t>(k) * sizeof(int) : 0;
  argmin_kernel<<<blocks, kThreads, smem, stream>>>(g, rows, k, xnorm, cnorm, labels, mindist, counts);
  SKINNY_CHECK_LAUNCH();
}

template <class T>
void checked_argmin(const T* g, std::int64_t rows, std::int64_t k, const T* xnorm, const T* cnorm,
                    const double* centroid_scale, double bound_factor, std::int32_t* labels, T* mindist, int* failures,
                    unsigned* max_ratio, cudaStream_t stream) {
  if (k <= kThreadPerPointMaxK) {
    checked_argmin_small_k_kernel<<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        g, rows, static_cast<int>(k), xnorm, cnorm, centroid_scale, bound_factor, labels, mindist, failures, max_ratio);
    SKINNY_CHECK_LAUNCH();
    return;
  }
  const unsigned blocks = std::min<unsigned>(blocks_for_warps(rows), static_cast<unsigned>(8 * multiprocessors()));
  checked_argmin_kernel<<<blocks, kThreads, 0, stream>>>(g, rows, k, xnorm, cnorm, centroid_scale, bound_factor, labels,
                                                         mindist, failures, max_ratio);
  SKINNY_CHECK_LAUNCH();
}

template <class T>
void row_dots(const T* x, std::int64_t n, std::int64_t d, const double* s, double* out, cudaStream_t stream) {
  row_dots_kernel<<<blocks_for_warps(n), kThreads, 0, stream>>>(x, n, d, s, out);
  SKINNY_CHECK_LAUNCH();
}

template <class C>
void check_points(const double* sums, const double* carried, const C* xnorm, std::int64_t rows,
                  const double* centroid_scale, double bound_factor, int* failures, unsigned* max_ratio,
                  cudaStream_t stream) {
  const unsigned blocks =
      static_cast<unsigned>(std::min<std::int64_t>((rows + kThreads - 1) / kThreads, 8LL * multiprocessors()));
  check_points_kernel<<<blocks, kThreads, 0, stream>>>(sums, carried, xnorm, rows, centroid_scale, bound_factor,
                                                       failures, max_ratio);
  SKINNY_CHECK_LAUNCH();
}

template <class T>
void block_column_totals(const T* x, std::int64_t n, std::int64_t d, std::int64_t chunk, std::int64_t block_rows,
                         bool as_tf32, double* totals, double* norms, cudaStream_t stream) {
  const std::int64_t per_chunk = (chunk + block_rows - 1) / block_rows;
  const unsigned blocks = static_cast<unsigned>((n + chunk - 1) / chunk * per_chunk);
  const auto kernel = as_tf32 ? block_column_totals_kernel<T, true> : block_column_totals_kernel<T, false>;
  kernel<<<blocks, kThreads, 0, stream>>>(x, n, d, chunk, block_rows, per_chunk, totals, norms);
  SKINNY_CHECK_LAUNCH();
}

void check_one_product_blocks(const double* sums, std::int64_t rows, const double* carried, const double* norms,
                              const double* centroid_scale, double factor, double bias, int* failures,
                              unsigned* max_ratio, cudaStream_t stream) {
  const std::int64_t blocks = (rows + kOneProductBlockRows - 1) / kOneProductBlockRows;
  check_one_product_blocks_kernel<<<blocks_for_warps(blocks), kThreads, 0, stream>>>(
      sums, rows, carried, norms, centroid_scale, factor, bias, failures, max_ratio);
  SKINNY_CHECK_LAUNCH();
}

template <class T>
void check_listed_points(const T* x, std::int64_t d, const std::int32_t* rows, std::int64_t count, const double* sums,
                         const double* s, const compute_t<T>* xnorm, const double* centroid_scale, double factor,
                         int* failures, unsigned* max_ratio, cudaStream_t stream) {
  if (count == 0) return;
  check_listed_points_kernel<<<blocks_for_warps(count), kThreads, 0, stream>>>(
      x, d, rows, count, sums, s, xnorm, centroid_scale, factor, failures, max_ratio);
  SKINNY_CHECK_LAUNCH();
}

template <class T>
void block_checked_argmin(const T* g, std::int64_t rows, std::int64_t k, const T* xnorm, const T* cnorm,
                          const double* carried, const double* norms, std::int64_t block0, double factor,
                          std::int32_t* labels, T* mindist, int* failures, unsigned* max_ratio, cudaStream_t stream) {
  if (k > kThreadPerPointMaxK) throw std::logic_error("block_checked_argmin: k > 32");
  block_checked_argmin_kernel<<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      g, rows, static_cast<int>(k), xnorm, cnorm, carried, norms, block0, factor, labels, mindist, failures, max_ratio);
  SKINNY_CHECK_LAUNCH();
}

void count_labels(const std::int32_t* labels, std::int64_t n, std::int64_t k, int* counts, cudaStream_t stream) {
  const int sms = multiprocessors();
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 2LL * sms));
  const std::size_t smem = k <= kSharedCounts ? static_cast<std::size_t>(k) * sizeof(int) : 0;
  count_labels_kernel<<<blocks, kThreads, smem, stream>>>(labels, n, k, counts);
  SKINNY_CHECK_LAUNCH();
}

template <class T>
double candidate_potential(const double* d2, const T* g, std::int64_t ldg, const T* xnorm, T cnorm, std::int64_t n,
                           cudaStream_t stream) {
  const double s = thrust::transform_reduce(
      thrust::cuda::par.on(stream), thrust::counting_iterator<std::int64_t>(0),
      thrust::counting_iterator<std::int64_t>(n),
      [=] __device__(std::int64_t i) -> double {
        double v = static_cast<double>(xnorm[i] + cnorm - T(2) * g[i * ldg]);
        v = v > 0 ? v : 0;
        return v < d2[i] ? v : d2[i];
      },
      0.0, thrust::plus<double>());
  SKINNY_CHECK_LAUNCH();
  return s;
}

template <class T>
void sum_into(const T* values, std::int64_t count, double* out, cudaStream_t stream, const double* weights,
              const std::int32_t* now, const std::int32_t* before) {
  const std::int64_t blocks = std::min<std::int64_t>(kSumMaxBlocks, (count + kSumPerBlock - 1) / kSumPerBlock);
  const int results = now ? 2 : 1;  // out[0] the sum, out[1] the changes
  if (blocks <= 1) {
    block_sums_kernel<<<1, kSumThreads, 0, stream>>>(values, count, count, weights, out, now, before);
    SKINNY_CHECK_LAUNCH();
    return;
  }
  // The blocks' sums (and their changes) at out + results, then one block a result adds them.
  const std::int64_t share = (count + blocks - 1) / blocks;
  block_sums_kernel<<<static_cast<unsigned>(blocks), kSumThreads, 0, stream>>>(values, count, share, weights,
                                                                               out + results, now, before);
  SKINNY_CHECK_LAUNCH();
  block_sums_kernel<<<results, kSumThreads, 0, stream>>>(out + results, results * blocks, blocks,
                                                         static_cast<const double*>(nullptr), out);
  SKINNY_CHECK_LAUNCH();
}

template <class T>
double sum(const T* values, std::int64_t count, cudaStream_t stream, const double* weights) {
  DeviceBuffer<double> out(kSumScratch);
  sum_into(values, count, out.data(), stream, weights);
  double s = 0;
  SKINNY_CUDA_TRY(cudaMemcpyAsync(&s, out.data(), sizeof s, cudaMemcpyDeviceToHost, stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  return s;
}

template <class T>
void min_distance_update(double* d2, const T* g, std::int64_t ldg, const T* xnorm, T cnorm, std::int64_t n, bool first,
                         cudaStream_t stream) {
  min_distance_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      d2, g, ldg, xnorm, cnorm, n, first);
  SKINNY_CHECK_LAUNCH();
}

#define SKINNY_KMEANS_ASSIGN(T)                                                                                  \
  template double mean_feature_variance(const T*, std::int64_t, std::int64_t, cudaStream_t);                    \
  template void argmin(const T*, std::int64_t, std::int64_t, const T*, const T*, std::int32_t*, T*, int*,       \
                       cudaStream_t);                                                                           \
  template void checked_argmin(const T*, std::int64_t, std::int64_t, const T*, const T*, const double*, double,  \
                               std::int32_t*, T*, int*, unsigned*, cudaStream_t);                               \
  template void check_points(const double*, const double*, const T*, std::int64_t, const double*, double, int*,  \
                             unsigned*, cudaStream_t);                                                          \
  template void block_checked_argmin(const T*, std::int64_t, std::int64_t, const T*, const T*, const double*,    \
                                     const double*, std::int64_t, double, std::int32_t*, T*, int*, unsigned*,   \
                                     cudaStream_t);                                                             \
  template double sum(const T*, std::int64_t, cudaStream_t, const double*);                                     \
  template void sum_into(const T*, std::int64_t, double*, cudaStream_t, const double*, const std::int32_t*,       \
                         const std::int32_t*);                                                                  \
  template void min_distance_update(double*, const T*, std::int64_t, const T*, T, std::int64_t, bool, cudaStream_t); \
  template double candidate_potential(const double*, const T*, std::int64_t, const T*, T, std::int64_t, cudaStream_t);
SKINNY_KMEANS_ASSIGN(float)
SKINNY_KMEANS_ASSIGN(double)

/// What every element type of X needs (float and double as compute types need the rest too).
#define SKINNY_KMEANS_ELEMENT(T)                                                                                  \
  template void row_sq_norms(const T*, std::int64_t, std::int64_t, compute_t<T>*, cudaStream_t);                \
  template void label_sq_distances(const T*, std::int64_t, std::int64_t, const compute_t<T>*,                   \
                                   const std::int32_t*, compute_t<T>*, cudaStream_t);                           \
  template void row_dots(const T*, std::int64_t, std::int64_t, const double*, double*, cudaStream_t);            \
  template void block_column_totals(const T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool,      \
                                    double*, double*, cudaStream_t);
SKINNY_KMEANS_ELEMENT(float)
SKINNY_KMEANS_ELEMENT(double)
SKINNY_KMEANS_ELEMENT(__half)
SKINNY_KMEANS_ELEMENT(__nv_bfloat16)
template void check_listed_points(const float*, std::int64_t, const std::int32_t*, std::int64_t, const double*,
                                  const double*, const float*, const double*, double, int*, unsigned*, cudaStream_t);
template void check_listed_points(const __half*, std::int64_t, const std::int32_t*, std::int64_t, const double*,
                                  const double*, const float*, const double*, double, int*, unsigned*, cudaStream_t);
template void check_listed_points(const __nv_bfloat16*, std::int64_t, const std::int32_t*, std::int64_t,
                                  const double*, const double*, const float*, const double*, double, int*, unsigned*,
                                  cudaStream_t);
template double mean_feature_variance(const __half*, std::int64_t, std::int64_t, cudaStream_t);
template double mean_feature_variance(const __nv_bfloat16*, std::int64_t, std::int64_t, cudaStream_t);
template void widen_rows(const __half*, std::int64_t, std::int64_t, float*, std::int64_t, cudaStream_t);
template void widen_rows(const __nv_bfloat16*, std::int64_t, std::int64_t, float*, std::int64_t, cudaStream_t);

}  // namespace skinny::kmeans::detail
