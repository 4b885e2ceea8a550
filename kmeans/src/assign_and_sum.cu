// One pass over X per Lloyd iteration for few clusters (k <= 32): each point's nearest centroid and its
// addition to that cluster's sums in the same kernel. Apart, the assignment and the update each read X
// (on the main job 262144 x 4096 float, 1.4 ms apiece); with few clusters both are bound by that read.
//
//  * A thread-block cluster of S <= 8 blocks (Hopper) shares a row's columns: block s owns W of them (a
//    multiple of 128, at most 512), their centroid slice in shared memory and their cluster sums in
//    registers, so nothing of size k x d leaves the chip between flushes.
//  * The cluster walks over groups of G rows (8 warps x R rows); each block's share of a group (G x W)
//    streams into a two-stage cp.async ring.
//  * Dot products as few_clusters.cu computes them: warp w takes R rows, lane l the 4-column vectors
//    l, l + 32, ... of the block's W columns; R x K partial sums per lane, reduced over the lanes by
//    recursive halving (lane_reductions.cuh).
//  * The S blocks' partial dot products meet in distributed shared memory: after a cluster barrier every
//    block adds them in rank order, so all S blocks compute the same bits and the same labels. Rank 0
//    writes the labels, distances and counts.
//  * Sums: thread t owns QC columns and adds each row of the group to its cluster's sums in 64-bit
//    registers, the rows of cluster j found by a warp ballot on the labels (j is then a constant: no
//    dynamic register index). Every kFlushRows rows the sums go to the global (high, low) words with
//    integer atomics: the same integers, and the same centroids, as the Updater's own pass.
#include "detail.hpp"
#include "element.cuh"
#include "fixed_point.hpp"
#include "lane_reductions.cuh"

#include <skinny/gemm/cp_async.cuh>
#include <skinny/gemm/errors.hpp>

#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace skinny::kmeans::detail {
namespace {

namespace cg = cooperative_groups;
using u64 = unsigned long long;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxBlocksPerCluster = 8;         ///< the portable cluster size
constexpr std::int64_t kMaxBlockColumns = 512;  ///< a stage of 32 float rows: 64 KB
constexpr int kColumnStep = 128;                ///< 32 lanes x 4 columns

/// Rows per warp and group: R x K partial sums per lane (8 to 64), so that two blocks fit an SM's
/// registers (H100, one pass at 262144 x 4096, k = 16 in half: R = 2 4.4 ms, R = 4 5.6 ms).
template <int K>
constexpr int kRows = K >= 16 ? 2 : 4;
template <int K>
constexpr int kGroupRows = kWarps * kRows<K>;
/// Columns whose K sums a thread keeps in registers: K x QC = 8 to 32 64-bit integers (two blocks per SM
/// leave a thread 128 registers).
template <int K>
constexpr int kSumColumns = K <= 4 ? 4 : K <= 16 ? 2 : 1;

/// Most columns a block takes for K-centroid kernels: its threads must own all of them in the sum phase.
std::int64_t block_columns_max(int K) {
  const int qc = K <= 4 ? 4 : K <= 16 ? 2 : 1;
  return std::min<std::int64_t>(kMaxBlockColumns, std::int64_t(kThreads) * qc);
}

/// The template K for k clusters (k = 2 its own: half the dot products and ballots of K = 4).
int padded_clusters(std::int64_t k) { return k <= 2 ? 2 : k <= 4 ? 4 : k <= 8 ? 8 : k <= 16 ? 16 : 32; }

/// Blocks per cluster and columns per block for d columns.
struct Split {
  int blocks;
  int columns;
};
Split split_columns(std::int64_t d, int K) {
  const std::int64_t w_max = block_columns_max(K);
  const std::int64_t blocks = (d + w_max - 1) / w_max;
  const std::int64_t per_block = (d + blocks - 1) / blocks;
  return {static_cast<int>(blocks), static_cast<int>((per_block + kColumnStep - 1) / kColumnStep * kColumnStep)};
}

template <class T, int K>
constexpr std::size_t smem_bytes(int columns) {
  return (2 * static_cast<std::size_t>(kGroupRows<K>) * sizeof(T) + K * sizeof(float)) * columns +
         2 * kGroupRows<K> * K * sizeof(float);
}

/// x.c over 4 columns, added to acc in a fixed order.
__device__ __forceinline__ float dot4(const float4& a, const float4& b, float acc) {
  return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, acc))));
}

template <class T>
__device__ __forceinline__ float4 load4(const T* p) {
  const Vec<T, 4> v = *reinterpret_cast<const Vec<T, 4>*>(p);
  return make_float4(to_float(v.e[0]), to_float(v.e[1]), to_float(v.e[2]), to_float(v.e[3]));
}

template <class T, int K>
__global__ void __launch_bounds__(kThreads, 2)
    assign_and_sum_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d, const float* __restrict__ c, int k,
                          const float* __restrict__ xnorm, const float* __restrict__ cnorm, int W,
                          const double* __restrict__ scale, std::int32_t* __restrict__ labels,
                          float* __restrict__ mindist, int* __restrict__ counts, u64* __restrict__ hi,
                          u64* __restrict__ lo) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int R = kRows<K>, G = kGroupRows<K>, QC = kSumColumns<K>, RK = R * K;
  constexpr int V = kLaneValues<RK>;               // sums per lane after the reduction
  constexpr int kLanesPerRow = K * 32 / RK;        // lanes that hold one row's K sums
  static_assert(G <= 32, "one ballot covers the rows of a group");
  static_assert(K % V == 0, "a lane's sums belong to one row");

  const cg::cluster_group cluster = cg::this_cluster();
  const int S = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const std::int64_t col0 = static_cast<std::int64_t>(rank) * W;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  extern __shared__ __align__(16) unsigned char smem[];
  T* stage = reinterpret_cast<T*>(smem);                                             // [2][G][W]
  float* cs = reinterpret_cast<float*>(smem + 2 * std::size_t(G) * W * sizeof(T));  // [K][W]
  float* part = cs + K * W;                                                          // [2][G x K]
  __shared__ int group_labels[G];
  __shared__ float group_norms[2][G];  // ||x||^2 of each stage's rows, loaded with them
  __shared__ int block_counts[K];
  __shared__ float cn[K];

  if (tid < K) {
    block_counts[tid] = 0;
    cn[tid] = tid < k ? cnorm[tid] : 0.f;
  }
  for (int i = tid; i < K * W; i += kThreads) {
    const int cc = i / W;
    const std::int64_t j = col0 + i % W;
    cs[i] = cc < k && j < d ? c[cc * d + j] : 0.f;
  }

  // The sum phase: thread t owns columns owner * QC .. + QC - 1 of the block's and the rows r = p (mod P)
  // of each group (P > 1 when the block has fewer than kThreads column owners).
  const int owners = W / QC;
  const int P = max(1, kThreads / owners);
  const int owner = tid % owners, p = tid / owners;
  unsigned my_rows = 0;
  if (p < P)
    for (int r = p; r < G; r += P) my_rows |= 1u << r;
  const std::int64_t sum_col = col0 + owner * QC;
  double f[QC];
#pragma unroll
  for (int q = 0; q < QC; ++q) f[q] = sum_col + q < d ? scale[sum_col + q] : 1.0;
  long long sums[K][QC];
#pragma unroll
  for (int cc = 0; cc < K; ++cc)
#pragma unroll
    for (int q = 0; q < QC; ++q) sums[cc][q] = 0;
  const auto flush = [&] {
#pragma unroll
    for (int cc = 0; cc < K; ++cc)
#pragma unroll
      for (int q = 0; q < QC; ++q) {
        if (cc < k && sum_col + q < d && my_rows != 0)
          add_fixed(hi + cc * d + sum_col + q, lo + cc * d + sum_col + q, sums[cc][q]);
        sums[cc][q] = 0;
      }
  };

  const std::int64_t groups = (n + G - 1) / G;
  const std::int64_t cluster_id = blockIdx.x / S, clusters = gridDim.x / S;
  // A stage's copies: thread t takes the 4-element vector q = t % (W / 4) of rows t / (W / 4) + j step
  // (threads past `step` whole rows take none), so its column test and offsets are fixed: with a division
  // and a 64-bit address per vector, issuing took a third of the kernel's instructions at d = 128. The
  // columns past d are zeroed once (d % 4 == 0: a vector is wholly in or out) and never copied.
  const int per_row = W / 4, step = kThreads / per_row;
  const int copy_q = tid % per_row, copy_r = tid / per_row;
  const bool copier = copy_r < step && col0 + 4 * copy_q < d;
  const int ld = static_cast<int>(d);  // d <= 4096 (assign_and_sum_applies): offsets fit 32 bits
  if (col0 + W > d)
    for (int i = tid; i < 2 * G * W; i += kThreads)
      if (col0 + i % W >= d) stage[i] = T(0.f);
  constexpr int kVectorBytes = 4 * static_cast<int>(sizeof(T));
  const auto issue = [&](std::int64_t g, int buf) {
    if (g < groups) {
      if (copier) {
        T* dst = stage + std::size_t(buf) * G * W + copy_r * W + 4 * copy_q;
        const T* src = x + g * G * d + col0 + 4 * copy_q;
        const int rows_left = n - g * G < G ? static_cast<int>(n - g * G) : G;
        for (int r = copy_r; r < G; r += step) {
          const bool ok = r < rows_left;  // rows past n: zeros
          cp_async<kVectorBytes>(dst + (r - copy_r) * W, src + (ok ? r * ld : 0), ok ? kVectorBytes : 0);
        }
      }
      if (tid < G) {
        const std::int64_t row = g * G + tid;
        cp_async<4>(&group_norms[buf][tid], row < n ? xnorm + row : xnorm, row < n ? 4 : 0);
      }
    }
    cp_async_commit();
  };

  issue(cluster_id, 0);
  int groups_since_flush = 0;
  int buf = 0;
  for (std::int64_t g = cluster_id; g < groups; g += clusters, buf ^= 1) {
    cp_async_wait<0>();
    __syncthreads();  // the group's rows are in; every thread is done with the other stage
    issue(g + clusters, buf ^ 1);
    const T* rows = stage + std::size_t(buf) * G * W;

    float acc[RK];
#pragma unroll
    for (int i = 0; i < RK; ++i) acc[i] = 0.f;
    const T* mine = rows + warp * R * W;
    for (int q = lane; q < W / 4; q += 32) {
      float4 xv[R];
#pragma unroll
      for (int r = 0; r < R; ++r) xv[r] = load4(mine + r * W + 4 * q);
#pragma unroll
      for (int cc = 0; cc < K; ++cc) {
        const float4 cv = *reinterpret_cast<const float4*>(cs + cc * W + 4 * q);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r * K + cc] = dot4(xv[r], cv, acc[r * K + cc]);
      }
    }
    sum_over_lanes(acc, lane);
    const int idx0 = lane_first_index<RK>(lane);

    // The whole row's dot products: this block's alone, or all blocks' added in rank order.
    float dot[V];
    if (S > 1) {
      float* own = part + buf * G * K + warp * RK;
      if (lane % kLaneCopies<RK> == 0)
#pragma unroll
        for (int v = 0; v < V; ++v) own[idx0 + v] = acc[v];
      cluster.sync();
      // All S loads in flight before the first add (each is a round trip to another SM).
      float got[kMaxBlocksPerCluster][V];
#pragma unroll
      for (int s = 0; s < kMaxBlocksPerCluster; ++s)
        if (s < S) {
          const float* theirs = cluster.map_shared_rank(own, s);
#pragma unroll
          for (int v = 0; v < V; ++v) got[s][v] = theirs[idx0 + v];
        }
#pragma unroll
      for (int v = 0; v < V; ++v) dot[v] = 0.f;
#pragma unroll
      for (int s = 0; s < kMaxBlocksPerCluster; ++s)
        if (s < S)
#pragma unroll
          for (int v = 0; v < V; ++v) dot[v] += got[s][v];
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) dot[v] = acc[v];
    }

    // The argmin over the lanes of each row.
    const int r = idx0 / K;
    const std::int64_t row = g * G + warp * R + r;
    const LaneNearest best = nearest_over_lanes<K, V, kLanesPerRow>(dot, idx0, k, group_norms[buf][warp * R + r], cn);
    if (lane % kLanesPerRow == 0) {
      group_labels[warp * R + r] = row < n ? best.index : -1;
      if (rank == 0 && row < n) {
        labels[row] = best.index;
        mindist[row] = best.distance;
        atomicAdd(block_counts + best.index, 1);
      }
    }
    __syncthreads();  // the group's labels

    // Each row into its cluster's sums; the rows of cluster cc are the set bits of a ballot.
    const int label = lane < G ? group_labels[lane] : -1;
#pragma unroll
    for (int cc = 0; cc < K; ++cc) {
      unsigned members = __ballot_sync(0xffffffffu, label == cc) & my_rows;
      while (members != 0) {
        const int m = __ffs(members) - 1;
        members &= members - 1;
        const Vec<T, QC> v = *reinterpret_cast<const Vec<T, QC>*>(rows + m * W + owner * QC);
#pragma unroll
        for (int q = 0; q < QC; ++q) sums[cc][q] += to_fixed(to_double(v.e[q]), f[q]);
      }
    }
    if (++groups_since_flush == static_cast<int>(kFlushRows / G)) {  // <= kFlushRows values per 64-bit sum
      flush();
      groups_since_flush = 0;
    }
  }
  flush();
  __syncthreads();
  if (rank == 0 && tid < k && block_counts[tid] != 0) atomicAdd(counts + tid, block_counts[tid]);
  cluster.sync();  // no block leaves while another may still read its partial sums
#else
  __trap();  // assign_and_sum_applies() sends only compute capability >= 9.0 here
#endif
}

template <class T, int K>
void launch(const T* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k, const float* xnorm,
            const float* cnorm, std::int32_t* labels, float* mindist, int* counts, const SumTarget& sums,
            cudaStream_t stream) {
  const Split split = split_columns(d, K);
  const std::size_t smem = smem_bytes<T, K>(split.columns);
  const auto kernel = assign_and_sum_kernel<T, K>;
  SKINNY_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  cudaLaunchAttribute cluster_dim;
  cluster_dim.id = cudaLaunchAttributeClusterDimension;
  cluster_dim.val.clusterDim.x = static_cast<unsigned>(split.blocks);
  cluster_dim.val.clusterDim.y = 1;
  cluster_dim.val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(split.blocks));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &cluster_dim;
  config.numAttrs = 1;
  int resident = 0;  // clusters the GPU holds at once
  SKINNY_CUDA_TRY(cudaOccupancyMaxActiveClusters(&resident, kernel, &config));
  const std::int64_t groups = (n + kGroupRows<K> - 1) / kGroupRows<K>;
  const std::int64_t clusters = std::max<std::int64_t>(1, std::min<std::int64_t>(resident, groups));
  config.gridDim = dim3(static_cast<unsigned>(clusters * split.blocks));
  SKINNY_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, x, n, d, c, static_cast<int>(k), xnorm, cnorm, split.columns,
                                     sums.scale, labels, mindist, counts, sums.hi, sums.lo));
}

}  // namespace

template <class T>
bool assign_and_sum_applies(const T* x, std::int64_t d, std::int64_t k) {
  if constexpr (std::is_same_v<T, double>) {
    return false;
  } else {
    if (k > kFewClustersMax || d % 4 != 0 || reinterpret_cast<std::uintptr_t>(x) % (4 * sizeof(T)) != 0) return false;
    if (d > kMaxBlocksPerCluster * block_columns_max(padded_clusters(k))) return false;
    int device = 0, major = 0;
    SKINNY_CUDA_TRY(cudaGetDevice(&device));
    SKINNY_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major >= 9;
  }
}

template <class T>
void assign_and_sum(const T* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k, const float* xnorm,
                    const float* cnorm, std::int32_t* labels, float* mindist, int* counts, const SumTarget& sums,
                    cudaStream_t stream) {
  switch (padded_clusters(k)) {
    case 2: launch<T, 2>(x, n, d, c, k, xnorm, cnorm, labels, mindist, counts, sums, stream); break;
    case 4: launch<T, 4>(x, n, d, c, k, xnorm, cnorm, labels, mindist, counts, sums, stream); break;
    case 8: launch<T, 8>(x, n, d, c, k, xnorm, cnorm, labels, mindist, counts, sums, stream); break;
    case 16: launch<T, 16>(x, n, d, c, k, xnorm, cnorm, labels, mindist, counts, sums, stream); break;
    default: launch<T, 32>(x, n, d, c, k, xnorm, cnorm, labels, mindist, counts, sums, stream); break;
  }
}

template bool assign_and_sum_applies(const float*, std::int64_t, std::int64_t);
template bool assign_and_sum_applies(const double*, std::int64_t, std::int64_t);
template bool assign_and_sum_applies(const __half*, std::int64_t, std::int64_t);
template bool assign_and_sum_applies(const __nv_bfloat16*, std::int64_t, std::int64_t);
#define SKINNY_ASSIGN_AND_SUM(T)                                                                                  \
  template void assign_and_sum(const T*, std::int64_t, std::int64_t, const float*, std::int64_t, const float*,   \
                               const float*, std::int32_t*, float*, int*, const SumTarget&, cudaStream_t);
SKINNY_ASSIGN_AND_SUM(float)
SKINNY_ASSIGN_AND_SUM(__half)
SKINNY_ASSIGN_AND_SUM(__nv_bfloat16)

}  // namespace skinny::kmeans::detail
