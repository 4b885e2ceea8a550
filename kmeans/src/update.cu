// The centroid update, deterministic for any k and d, reading X once: the cluster sums (exact integer
// sums, fixed_point.hpp, optionally of weighted points), empty clusters moved to the farthest points,
// then the means and the shift. Three ways to the sums:
//  * binned, where rows are narrow and k x d small: X read in row order, no sort. A block owns a range of
//    rows and a slice of columns and adds each row to its cluster's sums in shared memory with integer
//    atomics (several threads share a row, many rows at a time, so narrow rows keep them all busy), then
//    adds those to the global sums every kFlushRows rows.
//  * registers, for k <= 16 and float or double rows up to 128 wide: X read in row order, no sort. A
//    warp's lanes share a row, so its label is the same in all of them, and each lane adds its columns of
//    the row to that cluster's sums in registers; the warps' sums meet in shared memory, then go to the
//    global sums.
//  * otherwise: points grouped by label (a counting sort up to kCountingSortMaxK clusters, a radix sort
//    above), each team of a block summing kPiece consecutive grouped points, one cluster's run after
//    another, into registers.
// Every way gives the same integers, however the rows were shared out.
#include "detail.hpp"
#include "block_sum.cuh"
#include "element.cuh"
#include "fixed_point.hpp"

#include <skinny/gemm/errors.hpp>

#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/execution_policy.h>
#include <thrust/sequence.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace skinny::kmeans::detail {
namespace {

using u64 = unsigned long long;

constexpr std::int64_t kPiece = 256;  ///< sorted points per block
constexpr int kThreads = 128;
constexpr int kBatch = 8;             ///< rows whose loads are in flight together per thread
constexpr std::int64_t kSharedWeightSums = 4096;  ///< clusters whose weight sums a block keeps in shared memory
constexpr int kBinThreads = 256;
constexpr std::size_t kBinSmem = 64 << 10;  ///< most shared memory for a binned block's k x W sums
constexpr int kBinBlocksPerSm = 2;          ///< binned blocks per SM: fewer ranges, fewer flushes
/// Binned sums where rows are narrow and k x d small. H200, 1M float points, update per iteration, binned /
/// sorted: d = 2, k = 1024 0.05 / 0.14 ms; d = 16, k = 128 0.08 / 0.20, k = 1024 0.12 / 0.22; d = 64, k = 128
/// 0.17 / 0.21, k = 1024 0.37 / 0.23; d = 128, k = 128 0.28 / 0.25; d = 512, k = 16 0.92 / 0.65.
constexpr std::int64_t kBinMaxD = 64;
constexpr std::int64_t kBinMaxSums = 16384;    ///< k x d
constexpr double kMaxBinFlushFraction = 2.5;  ///< binned flushes' atomics at most this fraction of the bytes of X
constexpr std::int64_t kRegisterSumsMax = 32;  ///< most clusters whose sums a lane keeps in registers
/// Register sums where they measured faster than the sort (H200, ms per iteration, sort -> registers):
/// float 1M x 128, k = 16 0.56 -> 0.54, 4M x 128 2.00 -> 1.85; double 1M x 128, k = 16 0.85 -> 0.83.
/// Slower: 16-bit points (1M x 128, k = 16 half 0.48 -> 0.51), k = 24 and 32 (0.56 -> 0.69), d = 256 and
/// up (262144 x 4096, k = 16 2.41 -> 2.91), and binned where it applies (d <= 64;
/// bench/results/h200/2026-11-28_register-sums).
constexpr std::int64_t kRegisterRuleMaxK = 16;
constexpr std::int64_t kRegisterRuleMaxD = 128;
constexpr int kRegThreads = 256;
constexpr int kRegWarps = kRegThreads / 32;
constexpr int kRegBlocksPerSm = 2;  ///< the launch bounds' minimum: every instance fits two (no spills)

/// Elements per vector load: 16 bytes of float or double, 8 bytes of 16-bit data (8 x 16-bit columns per
/// thread would take twice the binned sums' shared memory).
template <class T>
constexpr int kVecOf = sizeof(T) >= 4 ? 16 / static_cast<int>(sizeof(T)) : 4;

/// Adds N elements of v times the weight w, each in fixed point with its column's scale.
template <class T, int N>
__device__ __forceinline__ void add_fixed_row(long long* s, const Vec<T, N>& v, double w, const double (&scale)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) s[i] += to_fixed(to_double(v.e[i]) * w, scale[i]);
}

/// A binned sum's three 32-bit words: q = a 2^40 + b 2^20 + c with a signed (|a| <= 2^10 for |q| <= 2^50)
/// and b, c in [0, 2^20), so kFlushRows (2^12) of each add up in 32 bits, by the shared-memory atomics
/// the hardware has (a 64-bit one is a compare-and-swap loop).
constexpr int kBinWords = 3;
__device__ __forceinline__ void bin_add(unsigned* words, std::int64_t plane, long long q) {
  atomicAdd(words, static_cast<unsigned>(q >> 40));
  atomicAdd(words + plane, static_cast<unsigned>(q >> 20) & 0xfffffu);
  atomicAdd(words + 2 * plane, static_cast<unsigned>(q) & 0xfffffu);
}
__device__ __forceinline__ long long bin_sum(const unsigned* words, std::int64_t plane) {
  return static_cast<long long>(static_cast<int>(words[0])) * (1LL << 40) +
         static_cast<long long>(words[plane]) * (1LL << 20) + static_cast<long long>(words[2 * plane]);
}

/// Adds rows r, r + step, ... below r1 (row_of(r): this thread's vector of row r) through add(label,
/// vector, weight), kBatch rows' loads in flight.
template <class V, class RowOf, class Add>
__device__ __forceinline__ void add_rows_in_order(std::int64_t r, std::int64_t r1, int step,
                                                  const std::int32_t* __restrict__ labels,
                                                  const double* __restrict__ weights, const RowOf& row_of,
                                                  const Add& add) {
  for (; r + (kBatch - 1) * step < r1; r += kBatch * step) {
    V v[kBatch];
    std::int32_t l[kBatch];
    double w[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      v[b] = row_of(r + b * step);
      l[b] = labels[r + b * step];
      w[b] = weights ? weights[r + b * step] : 1.0;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) add(l[b], v[b], w[b]);
  }
  for (; r < r1; r += step) add(labels[r], row_of(r), weights ? weights[r] : 1.0);
}

/// Binned: block (range, slice) adds the rows of its range to their clusters' sums over the slice's
/// W = C x N columns (k x W sums of three words in shared memory, bin_add: integer atomics, so any order
/// gives the same). C threads share a row, N columns each; the block takes kBinThreads / C rows at a time.
/// Every kFlushRows rows the sums go to the global (high, low) words.
template <class T, int N>
__global__ void __launch_bounds__(kBinThreads) binned_sums_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d,
                                                                 const std::int32_t* __restrict__ labels,
                                                                 const double* __restrict__ weights, std::int64_t k,
                                                                 int threads_per_row, std::int64_t rows_per_range,
                                                                 const double* __restrict__ scale, u64* __restrict__ hi,
                                                                 u64* __restrict__ lo) {
  using V = Vec<T, N>;
  extern __shared__ unsigned bins[];  // [kBinWords][k][W]
  const int width = threads_per_row * N, rows_at_once = kBinThreads / threads_per_row;
  const int column = static_cast<int>(threadIdx.x) % threads_per_row * N;  // the thread's first, in the slice
  const std::int64_t slice0 = static_cast<std::int64_t>(blockIdx.y) * width, j = slice0 + column;
  const bool active = j < d;  // d is a multiple of N
  const std::int64_t plane = k * width;
  double f[N];
#pragma unroll
  for (int i = 0; i < N; ++i) f[i] = active ? scale[j + i] : 0.0;
  const auto add = [&](std::int32_t label, const V& v, double w) {
    unsigned* s = bins + static_cast<std::int64_t>(label) * width + column;
#pragma unroll
    for (int i = 0; i < N; ++i) bin_add(s + i, plane, to_fixed(to_double(v.e[i]) * w, f[i]));
  };
  const auto row_of = [&](std::int64_t r) { return *reinterpret_cast<const V*>(x + r * d + j); };
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.x) * rows_per_range;
  const std::int64_t r_end = min(n, r0 + rows_per_range);
  for (std::int64_t f0 = r0; f0 < r_end; f0 += kFlushRows) {
    const std::int64_t r1 = min(r_end, f0 + kFlushRows);
    for (std::int64_t e = threadIdx.x; e < kBinWords * plane; e += kBinThreads) bins[e] = 0;
    __syncthreads();
    const std::int64_t r = f0 + static_cast<int>(threadIdx.x) / threads_per_row;
    if (active) add_rows_in_order<V>(r, r1, rows_at_once, labels, weights, row_of, add);
    __syncthreads();
    for (std::int64_t e = threadIdx.x; e < plane; e += kBinThreads) {
      const std::int64_t c = e / width, col = slice0 + e % width;
      if (col < d) add_fixed(hi + c * d + col, lo + c * d + col, bin_sum(bins + e, plane));
    }
    __syncthreads();  // the flush has read the words before they are zeroed again
  }
}

/// The instance of the register sums for k clusters: K = 8, 16 or 32 (k <= K).
int register_clusters(std::int64_t k) { return k <= 8 ? 8 : k <= 16 ? 16 : 32; }
/// Columns per lane for K clusters: at most 32 sums of 64 bits (64 registers), so that two blocks fit an
/// SM without spills (spilled: K = 8 with 4 float columns a lane, K = 16 with 2 double columns).
template <class T, int K>
constexpr int kRegColumns = K <= 16 && K * sizeof(T) <= 64 ? 2 : 1;

/// s[label] += q for label in [Lo, Hi), by halving the range: a dynamic index would put s in local memory.
/// The label is the same in all lanes of the warp, so they all take the same branches.
template <int Lo, int Hi, int K, int N>
__device__ __forceinline__ void add_to_cluster(long long (&s)[K][N], int label, const long long (&q)[N]) {
  if constexpr (Hi - Lo == 1) {
#pragma unroll
    for (int i = 0; i < N; ++i) s[Lo][i] += q[i];
  } else {
    constexpr int kMid = (Lo + Hi) / 2;
    if (label < kMid)
      add_to_cluster<Lo, kMid>(s, label, q);
    else
      add_to_cluster<kMid, Hi>(s, label, q);
  }
}

/// Registers: block (range, slice) adds the rows of its range over the slice's W = 32 N columns. The 32
/// lanes of a warp share a row, N columns each, and add it to its cluster's sums in registers (K x N of
/// them). Warp w takes rows w, w + kRegWarps, ... of the range. After each round of kFlushRows rows a
/// warp, the warps add their sums into the block's (high, low) words in shared memory one after another
/// (a 64-bit shared atomic would be a compare-and-swap loop); at the end those go to the global words.
template <class T, int K, int N>
__global__ void __launch_bounds__(kRegThreads, kRegBlocksPerSm)
    register_sums_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d,
                         const std::int32_t* __restrict__ labels, const double* __restrict__ weights, std::int64_t k,
                         std::int64_t rows_per_range,
                         const double* __restrict__ scale, u64* __restrict__ hi, u64* __restrict__ lo) {
  using V = Vec<T, N>;
  constexpr int W = 32 * N;
  __shared__ u64 block_hi[K * W], block_lo[K * W];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const std::int64_t slice0 = static_cast<std::int64_t>(blockIdx.y) * W, j = slice0 + lane * N;
  const bool active = j < d;  // d is a multiple of N
  double f[N];
#pragma unroll
  for (int i = 0; i < N; ++i) f[i] = active ? scale[j + i] : 0.0;
  for (int e = threadIdx.x; e < K * W; e += kRegThreads) block_hi[e] = block_lo[e] = 0;
  long long s[K][N];
#pragma unroll
  for (int c = 0; c < K; ++c)
#pragma unroll
    for (int i = 0; i < N; ++i) s[c][i] = 0;
  const auto row_of = [&](std::int64_t r) { return *reinterpret_cast<const V*>(x + r * d + j); };
  const auto add = [&](std::int32_t label, const V& v, double w) {
    long long q[N];
#pragma unroll
    for (int i = 0; i < N; ++i) q[i] = to_fixed(to_double(v.e[i]) * w, f[i]);
    add_to_cluster<0, K>(s, label, q);
  };
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.x) * rows_per_range;
  const std::int64_t r_end = min(n, r0 + rows_per_range);
  constexpr std::int64_t kRoundRows = kRegWarps * kFlushRows;  // <= kFlushRows values per 64-bit sum
  for (std::int64_t f0 = r0; f0 < r_end; f0 += kRoundRows) {
    if (active) add_rows_in_order<V>(f0 + warp, min(r_end, f0 + kRoundRows), kRegWarps, labels, weights, row_of, add);
    for (int turn = 0; turn < kRegWarps; ++turn) {
      __syncthreads();  // (the first: the words are zeroed; the others: the previous warp's additions are in)
      if (warp == turn && active)
#pragma unroll
        for (int c = 0; c < K; ++c)
#pragma unroll
          for (int i = 0; i < N; ++i) {
            block_hi[c * W + lane * N + i] += fixed_high(s[c][i]);
            block_lo[c * W + lane * N + i] += fixed_low(s[c][i]);
            s[c][i] = 0;
          }
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < K * W; e += kRegThreads) {
    const std::int64_t c = e / W, col = slice0 + e % W;
    if (c < k && col < d && (block_hi[e] | block_lo[e]) != 0) {
      atomicAdd(hi + c * d + col, block_hi[e]);
      atomicAdd(lo + c * d + col, block_lo[e]);
    }
  }
}

/// Clusters up to which the points are grouped by label with a counting sort (three k-entry arrays of
/// counters in a block's shared memory); more take the radix sort.
constexpr std::int64_t kCountingSortMaxK = 4096;
/// Points a block of the counting sort groups (its share of the global counters' atomics: one per
/// cluster present), and its threads.
constexpr std::int64_t kGroupPoints = 4096;
constexpr int kGroupThreads = 512;

/// Shared memory of group_by_label_kernel for k clusters: three k-entry arrays and the block's points
/// (index and label) in their grouped order.
std::size_t group_smem(int k) { return (3 * static_cast<std::size_t>(k) + 2 * kGroupPoints) * sizeof(int); }

/// Points grouped by label: `cursor` starts at each cluster's first position (the exclusive sums of the
/// counts); block b reserves a run of positions in each cluster for its kGroupPoints points (one global
/// atomic per cluster present) and writes them there, perm = point index, sorted_labels = label.
/// The block first groups its points in shared memory (its counts' exclusive sums), so that consecutive
/// threads write consecutive positions of one cluster's run: written in point order, every point's two
/// 4-byte stores went to a different place of the output, a separate L2 write each (H200, update ms
/// before -> after: 1M points, k = 1024 0.165 -> 0.140; 4M, k = 2048 0.52 -> 0.44, k = 4096 0.54 -> 0.49).
/// The order within a cluster depends on the threads' timing; the sums that read it are exact integers,
/// so they do not.
__global__ void __launch_bounds__(kGroupThreads) group_by_label_kernel(const std::int32_t* __restrict__ labels,
                                                                     std::int64_t rows, int k,
                                                                     int* __restrict__ cursor,
                                                                     std::int32_t* __restrict__ perm,
                                                                     std::int32_t* __restrict__ sorted_labels) {
  using BlockScan = cub::BlockScan<int, kGroupThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  extern __shared__ int group_shared[];  // group_smem(k)
  int* count = group_shared;             // [k]: the block's points per label, then the next place of each
  int* start = count + k;                // [k]: where each label's points begin in the block's order
  int* base = start + k;                 // [k]: where they begin in the output
  int* grouped_rows = base + k;          // [kGroupPoints]
  int* grouped_labels = grouped_rows + kGroupPoints;
  const std::int64_t p0 = static_cast<std::int64_t>(blockIdx.x) * kGroupPoints, p1 = min(rows, p0 + kGroupPoints);
  const int points = static_cast<int>(p1 - p0);
  // Each thread's labels (point threadIdx.x + u kGroupThreads), all loads in flight at once, kept for
  // both passes below (-1: past the last point).
  constexpr int kPerThread = kGroupPoints / kGroupThreads;
  static_assert(kPerThread * kGroupThreads == kGroupPoints, "whole batches");
  std::int32_t mine[kPerThread];
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int e = threadIdx.x + u * kGroupThreads;
    mine[u] = e < points ? labels[p0 + e] : -1;
  }
  for (int c = threadIdx.x; c < k; c += blockDim.x) count[c] = 0;
  __syncthreads();
#pragma unroll
  for (int u = 0; u < kPerThread; ++u)
    if (mine[u] >= 0) atomicAdd(count + mine[u], 1);
  __syncthreads();
  // Each thread a run of consecutive labels: their sum, the block's exclusive scan of those, then the starts.
  const int per = (k + kGroupThreads - 1) / kGroupThreads, c0 = threadIdx.x * per, c1 = min(k, c0 + per);
  int run = 0;
  for (int c = c0; c < c1; ++c) run += count[c];
  int before = 0;
  BlockScan(scan_storage).ExclusiveSum(run, before);
  for (int c = c0; c < c1; ++c) {
    start[c] = before;
    before += count[c];
  }
  __syncthreads();
  // The runs' reservations with a warp's atomics on consecutive counters (one L2 line for 32 clusters;
  // from each thread's own run they took 8 lines at k = 4096 and the update 0.54 -> 0.65 ms).
  for (int c = threadIdx.x; c < k; c += blockDim.x) {
    if (count[c] != 0) base[c] = atomicAdd(cursor + c, count[c]);
    count[c] = start[c];
  }
  __syncthreads();
#pragma unroll
  for (int u = 0; u < kPerThread; ++u)
    if (mine[u] >= 0) {
      const int at = atomicAdd(count + mine[u], 1);
      grouped_rows[at] = static_cast<int>(p0 + threadIdx.x + u * kGroupThreads);
      grouped_labels[at] = mine[u];
    }
  __syncthreads();
  for (int e = threadIdx.x; e < points; e += blockDim.x) {
    const int label = grouped_labels[e];
    const int at = base[label] + (e - start[label]);
    perm[at] = grouped_rows[e];
    sorted_labels[at] = label;
  }
}

/// Pieces a block of the sorted sums takes at most: rows narrower than kThreads vectors leave threads
/// over, and they sum further pieces (teams). Four cover rows of 32 vectors (128 floats) with every
/// thread. H200, 1M points, k = 1024, ms per update, the radix sort and one piece a block -> the counting
/// sort and teams: float d = 64 0.22 -> 0.18 (4 teams); d = 128 0.27 -> 0.24 (4); d = 256 0.40 -> 0.37
/// (2); half d = 128 0.23 -> 0.17 (4).
constexpr int kMaxTeams = 4;
/// Shared memory of a sorted-sums block: its pieces' rows, labels and weights.
std::size_t sorted_sums_smem(int teams) {
  return static_cast<std::size_t>(teams) * kPiece * (2 * sizeof(std::int32_t) + sizeof(double));
}

/// Teams for rows of `vectors` vectors: as many as kThreads threads hold whole rows of (a power of two, at
/// most kMaxTeams; 1 where a row needs a block or more).
int sorted_teams(std::int64_t vectors) {
  int teams = 1;
  while (teams < kMaxTeams && std::int64_t(2 * teams) * vectors <= kThreads) teams *= 2;
  return teams;
}

/// Block b (pieces (b / slices) T .. + T - 1 of T = `teams`, column slice b % slices): each of its teams
/// of kThreads / T threads adds kPiece consecutive points of the label-sorted order (gathered through
/// perm) over N * kThreads / T columns; each run of one cluster is summed in registers and added to that
/// cluster's global sums when the run ends. Narrow rows take several teams, so that every thread of the
/// block loads (1M x 128: with one piece a block, three quarters of the threads had no columns). A
/// piece's slices are neighbouring blocks, so a row's slices are read about together (H200, ms per
/// update, pieces first -> slices first: 262144 x 4096, k = 16 half 0.685 -> 0.640, float 1.12 -> 1.07;
/// k = 128 bfloat16 0.665 -> 0.63; one slice: the same).
template <class T, int N>
__global__ void __launch_bounds__(kThreads) sorted_sums_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d,
                                                              const std::int32_t* __restrict__ perm,
                                                              const std::int32_t* __restrict__ sorted_labels,
                                                              const double* __restrict__ weights,
                                                              const double* __restrict__ scale, u64* __restrict__ hi,
                                                              u64* __restrict__ lo, unsigned slices, int teams) {
  using V = Vec<T, N>;
  // The pieces' rows, labels and weights, staged first: read from global memory in the loop, each row's
  // load of X waited for the load of its index (two latencies a batch). H200, ms per iteration, before ->
  // after: 262144 x 4096, k = 128 bfloat16 1.33 -> 1.27; 1M x 512, k = 16 bfloat16 1.03 -> 1.00, float
  // 1.36 -> 1.34; 1M x 128, k = 128 0.49 -> 0.48. Before, ncu at 262144 x 4096 half, k = 16: 0.72 ms,
  // DRAM 63 % busy, SM 55 %; each value also takes a conversion to double, at a quarter of the FMA rate.
  // teams x kPiece of each (sorted_sums_smem): as much as the teams use, so wide rows keep the
  // residency of small blocks.
  extern __shared__ double piece_weights[];
  std::int32_t* piece_rows = reinterpret_cast<std::int32_t*>(piece_weights + teams * kPiece);
  std::int32_t* piece_labels = piece_rows + teams * kPiece;
  const unsigned slice = blockIdx.x % slices;
  const std::int64_t b0 = static_cast<std::int64_t>(blockIdx.x / slices) * teams * kPiece;
  const int staged = static_cast<int>(min(n - b0, std::int64_t(teams) * kPiece));
  for (int e = threadIdx.x; e < staged; e += kThreads) {
    const std::int32_t row = perm[b0 + e];
    piece_rows[e] = row;
    piece_labels[e] = sorted_labels[b0 + e];
    piece_weights[e] = weights ? weights[row] : 1.0;
  }
  __syncthreads();
  const int team_threads = kThreads / teams, team = threadIdx.x / team_threads;
  const int first = team * static_cast<int>(kPiece), count = min(staged - first, static_cast<int>(kPiece));
  const std::int64_t j = (static_cast<std::int64_t>(slice) * team_threads + threadIdx.x % team_threads) * N;
  if (j >= d || count <= 0) return;
  double f[N];
#pragma unroll
  for (int i = 0; i < N; ++i) f[i] = scale[j + i];
  long long acc[N] = {};
  std::int32_t run = piece_labels[first];
  const auto flush = [&] {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      add_fixed(hi + run * d + j + i, lo + run * d + j + i, acc[i]);
      acc[i] = 0;
    }
  };
  const auto add = [&](int e, const V& v) {
    if (piece_labels[e] != run) {
      flush();
      run = piece_labels[e];
    }
    add_fixed_row<T, N>(acc, v, piece_weights[e], f);
  };
  const auto row_of = [&](int e) { return *reinterpret_cast<const V*>(x + std::int64_t(piece_rows[e]) * d + j); };
  int e = first;
  const int end = first + count;
  for (; e + kBatch <= end; e += kBatch) {
    V v[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) v[b] = row_of(e + b);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) add(e + b, v[b]);
  }
  for (; e < end; ++e) add(e, row_of(e));
  flush();
}

/// Weight sums per cluster: block b adds the weights of points [b * kFlushRows, (b + 1) * kFlushRows),
/// in shared memory when k <= kSharedWeightSums.
__global__ void weight_sums_kernel(const std::int32_t* __restrict__ labels, const double* __restrict__ weights,
                                   std::int64_t n, std::int64_t k, double scale, u64* __restrict__ hi,
                                   u64* __restrict__ lo) {
  extern __shared__ long long block_sums[];
  const bool shared = k <= kSharedWeightSums;
  if (shared)
    for (std::int64_t c = threadIdx.x; c < k; c += blockDim.x) block_sums[c] = 0;
  __syncthreads();
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * kFlushRows;
  const std::int64_t end = min(n, begin + kFlushRows);
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const long long q = to_fixed(weights[i], scale);
    if (shared)
      atomicAdd(reinterpret_cast<u64*>(block_sums + labels[i]), static_cast<u64>(q));
    else
      add_fixed(hi + labels[i], lo + labels[i], q);
  }
  __syncthreads();
  if (shared)
    for (std::int64_t c = threadIdx.x; c < k; c += blockDim.x) add_fixed(hi + c, lo + c, block_sums[c]);
}

/// |w_i x_ij| maxima per column (and of the weights, at out[d]), as the bits of non-negative doubles,
/// whose unsigned order is their numeric order: an integer atomicMax gives the same result in any order.
template <class T>
__global__ void column_max_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d,
                                  const double* __restrict__ weights, std::int64_t rows_per_block, u64* __restrict__ out) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j > d || (j == d && !weights)) return;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * rows_per_block;
  const std::int64_t r1 = min(n, r0 + rows_per_block);
  double m = 0;
  for (std::int64_t i = r0; i < r1; ++i) {
    const double w = weights ? weights[i] : 1.0;
    m = fmax(m, j < d ? fabs(to_double(x[i * d + j]) * w) : fabs(w));
  }
  atomicMax(out + j, static_cast<u64>(__double_as_longlong(m)));
}

/// Moves point `point` (weight w) from cluster `from` to the empty cluster `to` (scikit-learn's relocation).
template <class T>
__global__ void move_point_kernel(const T* __restrict__ x, std::int64_t d, std::int64_t point, double w,
                                  std::int64_t from, std::int64_t to, const double* __restrict__ scale,
                                  u64* __restrict__ hi, u64* __restrict__ lo) {
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const long long q = to_fixed(to_double(x[point * d + j]) * w, scale[j]);
    hi[from * d + j] += fixed_high(-q);
    lo[from * d + j] += fixed_low(-q);
    hi[to * d + j] = fixed_high(q);
    lo[to * d + j] = fixed_low(q);
  }
}

/// Each point whose label differs from the one the sums hold (`summed`) leaves that cluster's sums for its
/// new one's (its weight too, where weight_hi is set), in the fixed point every sum kernel rounds to, and
/// its label is recorded: integer subtractions and additions, so the sums become those of all points under
/// `labels`. A warp tests 32 points at once, then moves each changed one, a lane per column.
template <class T>
__global__ void move_changed_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d,
                                    const std::int32_t* __restrict__ labels, std::int32_t* __restrict__ summed,
                                    const double* __restrict__ weights, const double* __restrict__ scale,
                                    u64* __restrict__ hi, u64* __restrict__ lo, double weight_scale,
                                    u64* __restrict__ weight_hi, u64* __restrict__ weight_lo) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = threadIdx.x % 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t base = (static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32) * 32;
       base < n; base += warps * 32) {
    const std::int64_t i = base + lane;
    const std::int32_t to = i < n ? labels[i] : 0, from = i < n ? summed[i] : 0;
    const bool changed = to != from;
    if (changed) summed[i] = to;
    for (unsigned left = __ballot_sync(kAll, changed); left != 0; left &= left - 1) {
      const int src = __ffs(left) - 1;
      const std::int64_t point = base + src;
      const std::int64_t into = __shfl_sync(kAll, to, src), out_of = __shfl_sync(kAll, from, src);
      const double w = weights ? weights[point] : 1.0;
      for (std::int64_t j = lane; j < d; j += 32) {
        const long long q = to_fixed(to_double(x[point * d + j]) * w, scale[j]);
        add_fixed(hi + into * d + j, lo + into * d + j, q);
        add_fixed(hi + out_of * d + j, lo + out_of * d + j, -q);
      }
      if (weight_hi != nullptr && lane == 0) {
        const long long q = to_fixed(w, weight_scale);
        add_fixed(weight_hi + into, weight_lo + into, q);
        add_fixed(weight_hi + out_of, weight_lo + out_of, -q);
      }
    }
  }
}

/// The weight-sum side of a moved point (finish() does it on the host with the same rounding).
__global__ void move_weight_kernel(double w, double scale, std::int64_t from, std::int64_t to, u64* __restrict__ hi,
                                   u64* __restrict__ lo) {
  const long long q = to_fixed(w, scale);
  hi[from] += fixed_high(-q);
  lo[from] += fixed_low(-q);
  hi[to] = fixed_high(q);
  lo[to] = fixed_low(q);
}

constexpr int kMeansThreads = 256;

/// Means (clusters left empty keep their centroid), and per block the sum of its elements' squared shifts
/// (each thread over a fixed stride, then a fixed tree: deterministic). Summed here, the shift needs
/// one small pass more, not a k x d array and two (H200: the iteration within its spread, 0-4 us less).
/// The denominator is the count, or the weight sum when the points are weighted (w_hi non-null).
template <class C>
__global__ void __launch_bounds__(kMeansThreads) means_kernel(
    const u64* __restrict__ hi, const u64* __restrict__ lo, const double* __restrict__ inv_scale,
    const int* __restrict__ counts, const u64* __restrict__ w_hi, const u64* __restrict__ w_lo, double w_inv_scale,
    const C* __restrict__ old_c, std::int64_t k, std::int64_t d, C* __restrict__ new_c,
    double* __restrict__ block_shifts) {
  __shared__ double part[kMeansThreads];
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  double shift = 0;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < k * d; idx += stride) {
    const std::int64_t c = idx / d, j = idx - c * d;
    const double denom = w_hi ? from_fixed(w_hi[c], w_lo[c], w_inv_scale) : static_cast<double>(counts[c]);
    const C value = counts[c] > 0 ? static_cast<C>(from_fixed(hi[idx], lo[idx], inv_scale[j]) / denom) : old_c[idx];
    new_c[idx] = value;
    const double delta = static_cast<double>(value) - static_cast<double>(old_c[idx]);
    shift += delta * delta;
  }
  const double block_shift = block_tree_sum<kMeansThreads>(shift, part);
  if (threadIdx.x == 0) block_shifts[blockIdx.x] = block_shift;
}

template <class U>
DeviceBuffer<U> device_array(std::int64_t count) {
  return DeviceBuffer<U>(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)));
}

int bits_for(std::int64_t k) {
  int bits = 1;
  while ((std::int64_t(1) << bits) < k) ++bits;
  return bits;
}

/// A binned block's shape for k clusters of d columns read in vectors of `vec` elements: C threads a row
/// (a power of two: the smallest that covers a row, or the most whose k x C x vec sums fit kBinSmem),
/// the column slices, and the shared memory. threads_per_row 0: not even one vector's sums fit.
struct BinLayout {
  int threads_per_row = 0;
  std::int64_t slices = 0;
  std::size_t smem = 0;
};
BinLayout bin_layout(std::int64_t k, std::int64_t d, int vec) {
  const auto smem = [&](std::int64_t c) {
    return static_cast<std::size_t>(k * c * vec) * kBinWords * sizeof(unsigned);
  };
  if (smem(1) > kBinSmem) return {};
  const std::int64_t vectors = d / vec;  // a row's
  int c = 1;
  while (c < kBinThreads && c < vectors && smem(2 * c) <= kBinSmem) c *= 2;
  return {c, (vectors + c - 1) / c, smem(c)};
}

template <class T>
const void* binned_kernel(int vec) {
  return vec > 1 ? reinterpret_cast<const void*>(&binned_sums_kernel<T, kVecOf<T>>)
                 : reinterpret_cast<const void*>(&binned_sums_kernel<T, 1>);
}

/// Register sums of `rows` points: the instance for k, N columns a lane where rows are vectors, else 1; as
/// many row ranges a column slice as fill the GPU once.
template <class T>
void launch_register_sums(const T* x, std::int64_t rows, std::int64_t d, const std::int32_t* labels,
                          const double* weights, std::int64_t k, bool vectors, int sms, const double* scale, u64* hi,
                          u64* lo, cudaStream_t stream) {
  const auto launch = [&](auto kernel, std::int64_t width) {
    const std::int64_t slices = (d + width - 1) / width;
    const std::int64_t ranges = std::clamp<std::int64_t>(std::int64_t(kRegBlocksPerSm) * sms / slices, 1, rows);
    const std::int64_t rows_per_range = (rows + ranges - 1) / ranges;
    const dim3 grid(static_cast<unsigned>((rows + rows_per_range - 1) / rows_per_range), static_cast<unsigned>(slices));
    kernel<<<grid, kRegThreads, 0, stream>>>(x, rows, d, labels, weights, k, rows_per_range, scale, hi, lo);
    SKINNY_CHECK_LAUNCH();
  };
  if (!vectors) return launch(register_sums_kernel<T, 32, 1>, 32);
  switch (register_clusters(k)) {
    case 8: return launch(register_sums_kernel<T, 8, kRegColumns<T, 8>>, 32 * kRegColumns<T, 8>);
    case 16: return launch(register_sums_kernel<T, 16, kRegColumns<T, 16>>, 32 * kRegColumns<T, 16>);
    default: return launch(register_sums_kernel<T, 32, kRegColumns<T, 32>>, 32 * kRegColumns<T, 32>);
  }
}

/// SKINNY_KMEANS_SUMS=binned|registers|sorted overrides the automatic choice (for benchmarks).
template <class Sums>
Sums forced_sums(Sums sums) {
  const char* forced = std::getenv("SKINNY_KMEANS_SUMS");
  if (sums != Sums::automatic || forced == nullptr) return sums;
  const std::string name(forced);
  if (name == "binned") return Sums::binned;
  if (name == "registers") return Sums::registers;
  if (name == "sorted") return Sums::sorted;
  throw std::invalid_argument("SKINNY_KMEANS_SUMS must be binned, registers or sorted (got '" + name + "')");
}

}  // namespace

template <class T>
Updater<T>::Updater(std::int64_t n, std::int64_t d, std::int64_t k, Sums sums) : n_(n), d_(d), k_(k) {
  sums = forced_sums(sums);
  vec_ = d % kVecOf<T> == 0 ? kVecOf<T> : 1;
  sums_ = device_array<u64>(2 * k * d);
  weight_sums_ = device_array<u64>(2 * k);
  scale_ = device_array<double>(2 * d);
  counts_ = device_array<int>(k);
  counts_host_ = PinnedBuffer<int>(static_cast<std::size_t>(k));
  sms_ = multiprocessors();
  block_shifts_ = device_array<double>(means_blocks());
  // The flushes' integer atomics as a fraction of the bytes of X, for `ranges` row ranges that each add
  // k x d sums to the global ones once and then per kFlushRows rows.
  const auto flush_fraction = [&](std::int64_t ranges) {
    const double flushes = double(ranges) + double(n) / double(kFlushRows);
    return flushes * double(k) * 2 * sizeof(u64) / (double(n) * sizeof(T));
  };
  if (sums == Sums::registers && k > kRegisterSumsMax)
    throw std::invalid_argument("Updater: register sums take k <= " + std::to_string(kRegisterSumsMax) +
                                " clusters; k = " + std::to_string(k));
  if (sums != Sums::sorted && sums != Sums::registers) {
    // Binned where rows are narrow and k x d small (then the sort costs more than the atomics), k x (a
    // slice of columns) fits and the flushes of kBinBlocksPerSm blocks per SM stay cheap.
    const BinLayout bins = bin_layout(k, d, vec_);
    if (bins.threads_per_row == 0 && sums == Sums::binned)
      throw std::invalid_argument("Updater: binned sums need k x " + std::to_string(vec_) + " sums of 12 bytes in " +
                                  std::to_string(kBinSmem) + " bytes of shared memory; k = " + std::to_string(k));
    const std::int64_t slices = std::max<std::int64_t>(1, bins.slices);
    const std::int64_t ranges = std::max<std::int64_t>(1, std::min<std::int64_t>(n, kBinBlocksPerSm * sms_ / slices));
    if (sums == Sums::binned || (bins.threads_per_row > 0 && d <= kBinMaxD && k * d <= kBinMaxSums &&
                                 flush_fraction(ranges) <= kMaxBinFlushFraction)) {
      way_ = Sums::binned;
      ranges_ = ranges;
      return;
    }
  }
  // Registers for few clusters of float or double rows up to 128 wide (no sort), the sort otherwise.
  if (sums == Sums::registers ||
      (sums == Sums::automatic && k <= kRegisterRuleMaxK && d <= kRegisterRuleMaxD && sizeof(T) >= 4)) {
    way_ = Sums::registers;
    return;
  }
  way_ = Sums::sorted;
  keys_out_ = device_array<std::int32_t>(n);
  perm_ = device_array<std::int32_t>(n);
  if (k <= kCountingSortMaxK) {
    bucket_counts_ = device_array<int>(k);
    bucket_cursor_ = device_array<int>(k);
    SKINNY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, sort_temp_bytes_, bucket_counts_.data(),
                                                  bucket_cursor_.data(), static_cast<int>(k)));
  } else {
    keys_ = device_array<std::int32_t>(n);
    perm_in_ = device_array<std::int32_t>(n);
    SKINNY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, sort_temp_bytes_, keys_.data(), keys_out_.data(),
                                                    perm_in_.data(), perm_.data(), static_cast<int>(n), 0, bits_for(k)));
  }
  sort_temp_ = device_array<unsigned char>(static_cast<std::int64_t>(sort_temp_bytes_));
}

template <class T>
std::vector<double> Updater<T>::column_max_abs(const T* x, std::int64_t rows, const double* weights,
                                               cudaStream_t stream) const {
  DeviceBuffer<u64> bits(static_cast<std::size_t>(d_ + 1));
  SKINNY_CUDA_TRY(cudaMemsetAsync(bits.data(), 0, bits.size() * sizeof(u64), stream));
  const std::int64_t pieces = std::min<std::int64_t>(rows, 4LL * sms_);
  const std::int64_t rows_per_block = (rows + pieces - 1) / pieces;
  const dim3 grid(static_cast<unsigned>((d_ + 1 + 255) / 256), static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block));
  column_max_kernel<T><<<grid, 256, 0, stream>>>(x, rows, d_, weights, rows_per_block, bits.data());
  SKINNY_CHECK_LAUNCH();
  const std::vector<u64> host = bits.to_host();
  std::vector<double> out(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) std::memcpy(&out[i], &host[i], sizeof(double));
  return out;
}

template <class T>
void Updater<T>::set_scales(const std::vector<double>& max_abs, bool weighted) {
  if (static_cast<std::int64_t>(max_abs.size()) != d_ + 1)
    throw std::invalid_argument("Updater::set_scales: need d + 1 maxima (columns, then weights)");
  std::vector<double> scales(static_cast<std::size_t>(2 * d_));
  for (std::int64_t j = 0; j < d_; ++j) {
    scales[static_cast<std::size_t>(j)] = fixed_scale(max_abs[static_cast<std::size_t>(j)]);
    scales[static_cast<std::size_t>(d_ + j)] = 1.0 / scales[static_cast<std::size_t>(j)];
  }
  scale_.copy_from(scales);
  weighted_ = weighted;
  weight_scale_ = fixed_scale(max_abs[static_cast<std::size_t>(d_)]);
  scaled_ = true;
}

template <class T>
void Updater<T>::begin(cudaStream_t stream) {
  if (!scaled_) throw std::logic_error("Updater: set_scales before the first update");
  summed_valid_ = false;  // the sums are summed afresh (by accumulate, or a caller of its own)
  SKINNY_CUDA_TRY(cudaMemsetAsync(sums_.data(), 0, sums_.size() * sizeof(u64), stream));
  if (weighted_) SKINNY_CUDA_TRY(cudaMemsetAsync(weight_sums_.data(), 0, weight_sums_.size() * sizeof(u64), stream));
}

template <class T>
void Updater<T>::accumulate(const T* x, const double* weights, const std::int32_t* labels, std::int64_t rows,
                            cudaStream_t stream, const int* label_counts) {
  if (rows == 0) return;  // an empty part adds nothing (and would launch empty grids)
  u64* hi = sums_.data();
  u64* lo = hi + k_ * d_;
  const double* scale = scale_.data();
  // Vector loads when every row starts aligned (d a multiple of the vector and x aligned).
  const int vec = reinterpret_cast<std::uintptr_t>(x) % (sizeof(T) * kVecOf<T>) == 0 ? vec_ : 1;
  if (way_ == Sums::binned) {
    // The layout of this call's vectors (unaligned x reads single elements); ranges_ as planned.
    const BinLayout bins = bin_layout(k_, d_, vec);
    const std::int64_t rows_per_range = (rows + ranges_ - 1) / ranges_;
    const dim3 grid(static_cast<unsigned>((rows + rows_per_range - 1) / rows_per_range),
                    static_cast<unsigned>(bins.slices));
    // The shared-memory limit is the kernel's, not this updater's: another updater (of other k or
    // vectors) may have set it since the constructor, so it is set for this launch.
    SKINNY_CUDA_TRY(cudaFuncSetAttribute(binned_kernel<T>(vec), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bins.smem)));
    if (vec > 1)
      binned_sums_kernel<T, kVecOf<T>><<<grid, kBinThreads, bins.smem, stream>>>(
          x, rows, d_, labels, weights, k_, bins.threads_per_row, rows_per_range, scale, hi, lo);
    else
      binned_sums_kernel<T, 1><<<grid, kBinThreads, bins.smem, stream>>>(x, rows, d_, labels, weights, k_,
                                                                         bins.threads_per_row, rows_per_range, scale,
                                                                         hi, lo);
    SKINNY_CHECK_LAUNCH();
  } else if (way_ == Sums::registers) {
    launch_register_sums(x, rows, d_, labels, weights, k_, vec > 1, sms_, scale, hi, lo, stream);
  } else {
    // Points grouped by label (the sums do not depend on the order within a cluster): a counting sort
    // where a block's counters fit (no copies of the labels and indices, one pass over the labels where
    // the caller has their counts), else the radix sort.
    if (k_ <= kCountingSortMaxK) {
      const int k = static_cast<int>(k_);
      const std::size_t counters = static_cast<std::size_t>(k) * sizeof(int);
      if (label_counts == nullptr) {
        SKINNY_CUDA_TRY(cudaMemsetAsync(bucket_counts_.data(), 0, counters, stream));
        count_labels(labels, rows, k_, bucket_counts_.data(), stream);
        label_counts = bucket_counts_.data();
      }
      SKINNY_CUDA_TRY(cub::DeviceScan::ExclusiveSum(sort_temp_.data(), sort_temp_bytes_, label_counts,
                                                    bucket_cursor_.data(), k, stream));
      const std::size_t smem = group_smem(k);
      SKINNY_CUDA_TRY(cudaFuncSetAttribute(group_by_label_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)));
      group_by_label_kernel<<<static_cast<unsigned>((rows + kGroupPoints - 1) / kGroupPoints), kGroupThreads, smem,
                              stream>>>(labels, rows, k, bucket_cursor_.data(), perm_.data(), keys_out_.data());
      SKINNY_CHECK_LAUNCH();
    } else {
      SKINNY_CUDA_TRY(cudaMemcpyAsync(keys_.data(), labels, static_cast<std::size_t>(rows) * sizeof(std::int32_t),
                                      cudaMemcpyDeviceToDevice, stream));
      thrust::sequence(thrust::cuda::par_nosync.on(stream), perm_in_.data(), perm_in_.data() + rows);
      SKINNY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(sort_temp_.data(), sort_temp_bytes_, keys_.data(),
                                                      keys_out_.data(), perm_in_.data(), perm_.data(),
                                                      static_cast<int>(rows), 0, bits_for(k_), stream));
    }
    const std::int64_t vectors = d_ / vec;
    const int teams = sorted_teams(vectors);
    const auto slices = static_cast<unsigned>((vectors + kThreads - 1) / kThreads);
    const std::int64_t rows_per_block = teams * kPiece;
    const auto blocks = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block * slices);
    if (vec > 1)
      sorted_sums_kernel<T, kVecOf<T>><<<blocks, kThreads, sorted_sums_smem(teams), stream>>>(
          x, rows, d_, perm_.data(), keys_out_.data(), weights, scale, hi, lo, slices, teams);
    else
      sorted_sums_kernel<T, 1><<<blocks, kThreads, sorted_sums_smem(teams), stream>>>(
          x, rows, d_, perm_.data(), keys_out_.data(), weights, scale, hi, lo, slices, teams);
    SKINNY_CHECK_LAUNCH();
  }
  if (weighted_) {
    const std::size_t smem = k_ <= kSharedWeightSums ? static_cast<std::size_t>(k_) * sizeof(long long) : 0;
    weight_sums_kernel<<<static_cast<unsigned>((rows + kFlushRows - 1) / kFlushRows), 256, smem, stream>>>(
        labels, weights, rows, k_, weight_scale_, weight_sums_.data(), weight_sums_.data() + k_);
    SKINNY_CHECK_LAUNCH();
  }
}

template <class T>
double Updater<T>::finish(const T* x, const double* weights, std::int32_t* labels, const C* mindist,
                          const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream) {
  queue_means(counts_dev, old_c, new_c, stream);
  return settle(x, weights, labels, mindist, counts_dev, old_c, new_c, stream);
}

template <class T>
void Updater<T>::queue_means(const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream) {
  // The counts come back while the means are queued on the assumption that no cluster is empty, so one
  // wait covers all; an empty cluster redoes the means after its move.
  counts_host_.copy_from_device_async(counts_dev, stream);
  means_and_shift(counts_dev, old_c, new_c, stream);
}

template <class T>
double Updater<T>::settle(const T* x, const double* weights, std::int32_t* labels, const C* mindist,
                          const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream,
                          cudaEvent_t means_done) {
  std::vector<double> host_weights;
  Points points;
  points.x = x;
  points.fetch = [&](std::vector<C>& dist, std::vector<std::int32_t>& lab) {
    dist.resize(static_cast<std::size_t>(n_));
    lab.resize(static_cast<std::size_t>(n_));
    SKINNY_CUDA_TRY(cudaMemcpyAsync(dist.data(), mindist, dist.size() * sizeof(C), cudaMemcpyDeviceToHost, stream));
    SKINNY_CUDA_TRY(cudaMemcpyAsync(lab.data(), labels, lab.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
    if (weights) {
      host_weights.resize(static_cast<std::size_t>(n_));
      SKINNY_CUDA_TRY(cudaMemcpyAsync(host_weights.data(), weights, host_weights.size() * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream));
    }
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  };
  points.relabel = [&](std::int64_t point, std::int32_t label) {
    SKINNY_CUDA_TRY(cudaMemcpyAsync(labels + point, &label, sizeof label, cudaMemcpyHostToDevice, stream));
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));  // `label` lives on this stack frame
  };
  // The weights come back with the distances: their host copy exists once fetch() has run.
  return settle_with(points, weights ? &host_weights : nullptr, counts_dev, old_c, new_c, stream, means_done);
}

template <class T>
double Updater<T>::finish(const Points& points, const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream) {
  queue_means(counts_dev, old_c, new_c, stream);
  return settle_with(points, nullptr, counts_dev, old_c, new_c, stream);
}

template <class T>
double Updater<T>::settle_with(const Points& points, const std::vector<double>* fetched_weights, const int* counts_dev,
                               const C* old_c, C* new_c, cudaStream_t stream, cudaEvent_t means_done) {
  if (means_done) SKINNY_CUDA_TRY(cudaEventSynchronize(means_done));
  else SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  moved_ = std::find(counts_host_.data(), counts_host_.data() + k_, 0) != counts_host_.data() + k_;
  if (!moved_) return shift_.value();
  summed_valid_ = false;  // the moves below relabel points the summed labels do not follow
  std::vector<int> counts(counts_host_.data(), counts_host_.data() + k_);

  // Empty clusters take the points farthest from their centroids (largest distance first, ties to the
  // lower index), as scikit-learn's _relocate_empty_clusters does.
  std::vector<std::int64_t> empty;
  for (std::int64_t c = 0; c < k_; ++c)
    if (counts[static_cast<std::size_t>(c)] == 0) empty.push_back(c);
  std::vector<C> dist;
  std::vector<std::int32_t> lab;
  points.fetch(dist, lab);
  const double* weights = fetched_weights ? fetched_weights->data() : points.weights;
  std::vector<std::int64_t> order(dist.size());
  std::iota(order.begin(), order.end(), 0);
  const auto m = static_cast<std::ptrdiff_t>(std::min<std::size_t>(empty.size(), order.size()));
  std::partial_sort(order.begin(), order.begin() + m, order.end(), [&](std::int64_t a, std::int64_t b) {
    const C da = dist[static_cast<std::size_t>(a)], db = dist[static_cast<std::size_t>(b)];
    return da > db || (da == db && a < b);
  });
  u64* hi = sums_.data();
  u64* lo = hi + k_ * d_;
  std::vector<u64> wsums;
  if (weighted_) wsums = weight_sums_.to_host();  // waits for the stream
  DeviceBuffer<T> row(points.x_on_device ? 0 : static_cast<std::size_t>(d_));
  for (std::ptrdiff_t e = 0; e < m; ++e) {
    const std::int64_t point = order[static_cast<std::size_t>(e)], to = empty[static_cast<std::size_t>(e)];
    const std::int32_t from = lab[static_cast<std::size_t>(point)];
    const double wp = weights ? weights[point] : 1.0;
    if (points.x_on_device) {
      move_point_kernel<T><<<1, 256, 0, stream>>>(points.x, d_, point, wp, from, to, scale_.data(), hi, lo);
    } else {  // stream order keeps the copy of each row after the kernel that read the previous one
      SKINNY_CUDA_TRY(cudaMemcpyAsync(row.data(), points.x + point * d_, row.bytes(), cudaMemcpyHostToDevice, stream));
      move_point_kernel<T><<<1, 256, 0, stream>>>(row.data(), d_, 0, wp, from, to, scale_.data(), hi, lo);
    }
    SKINNY_CHECK_LAUNCH();
    if (weighted_) {
      const long long q = std::llrint(wp * weight_scale_);
      wsums[static_cast<std::size_t>(from)] += fixed_high(-q);
      wsums[static_cast<std::size_t>(k_ + from)] += fixed_low(-q);
      wsums[static_cast<std::size_t>(to)] = fixed_high(q);
      wsums[static_cast<std::size_t>(k_ + to)] = fixed_low(q);
    }
    --counts[static_cast<std::size_t>(from)];
    counts[static_cast<std::size_t>(to)] = 1;
    points.relabel(point, static_cast<std::int32_t>(to));
  }
  if (weighted_) weight_sums_.copy_from(wsums);
  SKINNY_CUDA_TRY(cudaMemcpyAsync(counts_.data(), counts.data(), counts.size() * sizeof(int), cudaMemcpyHostToDevice, stream));
  means_and_shift(counts_.data(), old_c, new_c, stream);
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  return shift_.value();
}

template <class T>
void Updater<T>::queue_update(const T* x, const double* weights, const std::int32_t* labels, const int* counts_dev,
                              const C* old_c, C* new_c, cudaStream_t stream, bool few_changes) {
  // Each call moves at most n points, adding less than 2^32 to a low word per move: far below 2^64 up to
  // 2^31 moves, after which all points are summed afresh.
  moved_changes_ = few_changes && summed_valid_ && (moves_since_sum_ + 1) * n_ <= (std::int64_t(1) << 31);
  if (moved_changes_) {
    u64* hi = sums_.data();
    const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n_ + 255) / 256, 8LL * sms_));
    move_changed_kernel<T><<<blocks, 256, 0, stream>>>(x, n_, d_, labels, summed_labels_.data(), weights, scale_.data(),
                                                       hi, hi + k_ * d_, weight_scale_,
                                                       weighted_ ? weight_sums_.data() : nullptr,
                                                       weighted_ ? weight_sums_.data() + k_ : nullptr);
    SKINNY_CHECK_LAUNCH();
    ++moves_since_sum_;
  } else {
    begin(stream);
    accumulate(x, weights, labels, n_, stream, counts_dev);
    // The labels summed, kept where asked and their copy fits in free memory (else every update sums all
    // points).
    const std::size_t label_bytes = static_cast<std::size_t>(n_) * sizeof(std::int32_t);
    if (keep_summed_labels_ && summed_labels_.size() == 0 && label_bytes <= available_device_memory())
      summed_labels_ = device_array<std::int32_t>(n_);
    if (keep_summed_labels_ && summed_labels_.size() > 0) {
      SKINNY_CUDA_TRY(cudaMemcpyAsync(summed_labels_.data(), labels, label_bytes, cudaMemcpyDeviceToDevice, stream));
      summed_valid_ = true;
      moves_since_sum_ = 0;
    }
  }
  queue_means(counts_dev, old_c, new_c, stream);
}

template <class T>
double Updater<T>::update(const T* x, const double* weights, std::int32_t* labels, const C* mindist,
                          const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream, bool few_changes) {
  queue_update(x, weights, labels, counts_dev, old_c, new_c, stream, few_changes);
  return settle(x, weights, labels, mindist, counts_dev, old_c, new_c, stream);
}

template <class T>
void Updater<T>::move_point(const T* row, double w, std::int64_t from, std::int64_t to, cudaStream_t stream) {
  u64* hi = sums_.data();
  move_point_kernel<T><<<1, 256, 0, stream>>>(row, d_, 0, w, from, to, scale_.data(), hi, hi + k_ * d_);
  SKINNY_CHECK_LAUNCH();
  if (weighted_) {
    move_weight_kernel<<<1, 1, 0, stream>>>(w, weight_scale_, from, to, weight_sums_.data(), weight_sums_.data() + k_);
    SKINNY_CHECK_LAUNCH();
  }
}

template <class T>
double Updater<T>::means(const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream) {
  means_and_shift(counts_dev, old_c, new_c, stream);
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  return shift_.value();
}

template <class T>
unsigned Updater<T>::means_blocks() const {
  return static_cast<unsigned>(std::min<std::int64_t>((k_ * d_ + kMeansThreads - 1) / kMeansThreads, 8LL * sms_));
}

template <class T>
void Updater<T>::means_and_shift(const int* counts, const C* old_c, C* new_c, cudaStream_t stream) {
  const u64* hi = sums_.data();
  const unsigned blocks = means_blocks();
  means_kernel<C><<<blocks, kMeansThreads, 0, stream>>>(hi, hi + k_ * d_, scale_.data() + d_, counts,
                                                        weighted_ ? weight_sums_.data() : nullptr,
                                                        weighted_ ? weight_sums_.data() + k_ : nullptr,
                                                        1.0 / weight_scale_, old_c, k_, d_, new_c, block_shifts_.data());
  SKINNY_CHECK_LAUNCH();
  // A reduction of our own: thrust's allocates (and frees) scratch memory on every call.
  shift_.queue(block_shifts_.data(), blocks, stream);
}

template class Updater<float>;
template class Updater<double>;
template class Updater<__half>;
template class Updater<__nv_bfloat16>;

}  // namespace skinny::kmeans::detail
