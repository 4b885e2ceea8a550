// The nearest of few centroids (k <= 32) for every point, reading X once in its own type (float or
// 16-bit) with the cross terms on the FMA units: with few centroids the distances are bound by reading
// X, and a GEMM's tiles (the fused tensor-core kernel pads k to 128) or a 16-bit X widened to float
// first would read or compute several times more.
//
//  * A warp takes R rows at a time; lane l reads elements l, l + 32, ... of each row (coalesced) and
//    keeps R x K partial dot products with the centroids, which sit in shared memory (all of them when
//    K x d floats fit, otherwise a slice of columns at a time).
//  * The R x K partial sums are reduced over the lanes by recursive halving (each step sends half of
//    the values to the partner lane), R x K shuffles per lane in all instead of 5 R x K for a butterfly
//    per value; lane l ends with the sums of flat index 2l, 2l + 1 (row r = index / K, centroid index % K).
//  * Distances by the trick ||x||^2 + ||c||^2 - 2 x.c, the argmin over the K / 2 lanes of a row (ties to
//    the lowest index), counts per block in shared memory (integer atomics: any order gives the same).
#include "detail.hpp"
#include "element.cuh"
#include "lane_reductions.cuh"

#include <skinny/gemm/errors.hpp>

#include <algorithm>
#include <cmath>

namespace skinny::kmeans::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kValues = 64;                      ///< R x K partial sums per lane
constexpr std::size_t kCentroidSmem = 96 << 10;  ///< shared memory for centroids, bytes
constexpr int kLoadsInFlight = 16;               ///< values of X per lane whose loads are issued together

/// Rows a warp takes at a time: R x K = kValues partial sums per lane.
template <int K>
constexpr int kRowsPerWarp = kValues / K;

/// Columns of the centroids per shared-memory slice: all of d when K x d floats fit.
std::int64_t slice_columns(int K, std::int64_t d) {
  const std::int64_t fit = static_cast<std::int64_t>(kCentroidSmem / (sizeof(float) * K)) / 32 * 32;
  return std::min<std::int64_t>(fit, (d + 31) / 32 * 32);
}

template <class T, int K>
__global__ void __launch_bounds__(kThreads, 2) few_nearest_kernel(const T* __restrict__ x, std::int64_t n,
                                                              std::int64_t d, const float* __restrict__ c, int k,
                                                              const float* __restrict__ xnorm,
                                                              const float* __restrict__ cnorm, std::int64_t slice,
                                                              std::int32_t* __restrict__ labels,
                                                              float* __restrict__ mindist, int* __restrict__ counts) {
  constexpr int R = kRowsPerWarp<K>;
  constexpr int kBatch = kLoadsInFlight / R;  // columns per lane loaded together (R rows each)
  constexpr int V = kValues / 32;  // sums per lane after the reduction
  constexpr int kLanesPerRow = K / V;
  static_assert(kValues % 32 == 0 && K % V == 0 && R * K == kValues, "whole rows per lane group");
  extern __shared__ float cs[];  // [K][slice]
  __shared__ int block_counts[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x < 32) block_counts[threadIdx.x] = 0;
  const bool resident = slice >= d;  // all columns fit: load them once
  const auto load_slice = [&](std::int64_t t0) {
    for (std::int64_t idx = threadIdx.x; idx < K * slice; idx += kThreads) {
      const std::int64_t cc = idx / slice, j = t0 + idx % slice;
      cs[idx] = cc < k && j < d ? c[cc * d + j] : 0.0f;
    }
  };
  if (resident) load_slice(0);
  __syncthreads();

  const std::int64_t group_rows = static_cast<std::int64_t>(kWarps) * R;
  for (std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * group_rows; base < n;
       base += static_cast<std::int64_t>(gridDim.x) * group_rows) {
    const std::int64_t row0 = base + static_cast<std::int64_t>(warp) * R;
    float acc[R * K];
#pragma unroll
    for (int i = 0; i < R * K; ++i) acc[i] = 0.f;
    for (std::int64_t t0 = 0; t0 < d; t0 += slice) {
      if (!resident) {
        __syncthreads();
        load_slice(t0);
        __syncthreads();
      }
      const std::int64_t end = min(slice, d - t0);
      // kBatch columns' loads of all R rows in flight before the first is used: one load at a time per
      // warp would leave the SM waiting on memory latency (R x kBatch registers: 16).
      for (std::int64_t j0 = lane; j0 < end; j0 += 32 * kBatch) {
        float xv[kBatch][R];
#pragma unroll
        for (int u = 0; u < kBatch; ++u)
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const std::int64_t j = j0 + 32 * u;
            xv[u][r] = row0 + r < n && j < end ? to_float(x[(row0 + r) * d + t0 + j]) : 0.f;
          }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const std::int64_t j = min(j0 + 32 * u, slice - 1);  // past the end: a zero x times any centroid
#pragma unroll
          for (int cc = 0; cc < K; ++cc) {
            const float cv = cs[cc * slice + j];
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r * K + cc] = fmaf(xv[u][r], cv, acc[r * K + cc]);
          }
        }
      }
    }
    sum_over_lanes(acc, lane);
    // Lane l holds flat indices V l .. V l + V - 1 (row = index / K, centroid = index % K).
    const int r = (V * lane) / K;
    const std::int64_t row = row0 + r;
    const LaneNearest best = nearest_over_lanes<K, V, kLanesPerRow>(acc, V * lane, k, row < n ? xnorm[row] : 0.f, cnorm);
    if (lane % kLanesPerRow == 0 && row < n) {
      labels[row] = best.index;
      mindist[row] = best.distance;
      atomicAdd(block_counts + best.index, 1);
    }
  }
  __syncthreads();
  if (threadIdx.x < k && block_counts[threadIdx.x] != 0) atomicAdd(counts + threadIdx.x, block_counts[threadIdx.x]);
}

template <class T, int K>
void launch(const T* x, std::int64_t n, std::int64_t d, const float* c, int k, const float* xnorm, const float* cnorm,
            std::int32_t* labels, float* mindist, int* counts, cudaStream_t stream) {
  const std::int64_t slice = slice_columns(K, d);
  const std::size_t smem = static_cast<std::size_t>(K) * static_cast<std::size_t>(slice) * sizeof(float);
  SKINNY_CUDA_TRY(cudaFuncSetAttribute(few_nearest_kernel<T, K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
  int per_sm = 0;
  SKINNY_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, few_nearest_kernel<T, K>, kThreads, smem));
  const std::int64_t groups = (n + kWarps * kRowsPerWarp<K> - 1) / (kWarps * kRowsPerWarp<K>);
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(groups, std::max(1, per_sm) * multiprocessors()));
  few_nearest_kernel<T, K><<<blocks, kThreads, smem, stream>>>(x, n, d, c, k, xnorm, cnorm, slice, labels, mindist,
                                                               counts);
  SKINNY_CHECK_LAUNCH();
}

}  // namespace

template <class T>
void few_nearest(const T* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k, const float* xnorm,
                 const float* cnorm, std::int32_t* labels, float* mindist, int* counts, cudaStream_t stream) {
  const int kk = static_cast<int>(k);
  if (k <= 4)
    launch<T, 4>(x, n, d, c, kk, xnorm, cnorm, labels, mindist, counts, stream);
  else if (k <= 8)
    launch<T, 8>(x, n, d, c, kk, xnorm, cnorm, labels, mindist, counts, stream);
  else if (k <= 16)
    launch<T, 16>(x, n, d, c, kk, xnorm, cnorm, labels, mindist, counts, stream);
  else
    launch<T, 32>(x, n, d, c, kk, xnorm, cnorm, labels, mindist, counts, stream);
}

template void few_nearest(const float*, std::int64_t, std::int64_t, const float*, std::int64_t, const float*,
                          const float*, std::int32_t*, float*, int*, cudaStream_t);
template void few_nearest(const __half*, std::int64_t, std::int64_t, const float*, std::int64_t, const float*,
                          const float*, std::int32_t*, float*, int*, cudaStream_t);
template void few_nearest(const __nv_bfloat16*, std::int64_t, std::int64_t, const float*, std::int64_t, const float*,
                          const float*, std::int32_t*, float*, int*, cudaStream_t);

}  // namespace skinny::kmeans::detail
