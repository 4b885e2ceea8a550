// Reductions over the lanes of a warp for the few-clusters kernels (few_clusters.cu, assign_and_sum.cu),
// whose lanes each hold partial dot products of R rows x K centroids:
//  * sums by recursive halving: at each step a lane sends half of its live values to its partner and
//    keeps the other half, so the whole reduction costs N shuffles per lane (a butterfly per value would
//    cost 5 N);
//  * then each row's nearest centroid over the lanes that hold its K sums.
#pragma once

#include <climits>
#include <cmath>

namespace skinny::kmeans::detail {

/// One step: lanes with bit Off keep values M .. 2M - 1 (added to their partner's), the others 0 .. M - 1;
/// afterwards the live values are acc[0 .. M). Unrolled at compile time, so acc stays in registers.
template <int Off, int M, int N>
__device__ __forceinline__ void halve(float (&acc)[N], int lane) {
  const bool upper = lane & Off;
#pragma unroll
  for (int i = 0; i < M; ++i) {
    const float low = acc[i], high = acc[i + M];
    acc[i] = (upper ? high : low) + __shfl_xor_sync(0xffffffffu, upper ? low : high, Off);
  }
}

/// Values each lane holds after sum_over_lanes<N>.
template <int N>
constexpr int kLaneValues = N >= 32 ? N / 32 : 1;

/// Lanes that hold the same sum after sum_over_lanes<N>.
template <int N>
constexpr int kLaneCopies = N >= 32 ? 1 : 32 / N;

/// The sums over the warp of the N values acc[0 .. N) (N = 8, 16, 32 or 64). Afterwards lane l holds the
/// sums of flat indices kLaneValues<N> l .. + kLaneValues<N> - 1 in acc[0 ..] (N >= 32), or of index
/// l / kLaneCopies<N> in acc[0] (N = 8 or 16: that many consecutive lanes hold the same sum).
template <int N>
__device__ __forceinline__ void sum_over_lanes(float (&acc)[N], int lane) {
  static_assert(N == 8 || N == 16 || N == 32 || N == 64, "8, 16, 32 or 64 values per lane");
  halve<16, N / 2>(acc, lane);
  halve<8, N / 4>(acc, lane);
  halve<4, N / 8>(acc, lane);
  if constexpr (N >= 16) halve<2, N / 16>(acc, lane);
  else acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], 2);
  if constexpr (N >= 32) halve<1, N / 32>(acc, lane);
  else acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], 1);
}

/// The first flat index lane `lane` holds after sum_over_lanes<N>.
template <int N>
__device__ __forceinline__ int lane_first_index(int lane) {
  return N >= 32 ? kLaneValues<N> * lane : lane / kLaneCopies<N>;
}

/// A row's nearest centroid: its index and squared distance (clamped at 0).
struct LaneNearest {
  float distance;
  int index;
};

/// The nearest of k <= K centroids to a row whose K dot products are spread over L consecutive lanes: this
/// lane holds dot[0 .. V) for flat indices first .. first + V - 1 (centroid = index % K). Distances by the
/// trick ||x||^2 + ||c||^2 - 2 x.c (xn, cn[j]); ties to the lowest index; every distance NaN: index 0 and
/// NaN, as gemm::nearest gives. Every lane of the row gets the result.
template <int K, int V, int L, int N>
__device__ __forceinline__ LaneNearest nearest_over_lanes(const float (&dot)[N], int first, int k, float xn,
                                                         const float* cn) {
  static_assert(V <= N, "V values per lane");
  float best = INFINITY;
  int best_j = INT_MAX;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int j = (first + v) % K;
    if (j >= k) continue;
    const float dist = xn + cn[j] - 2.f * dot[v];
    if (dist < best || (dist == best && j < best_j)) best = dist, best_j = j;
  }
#pragma unroll
  for (int off = 1; off < L; off <<= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, off);
    const int oj = __shfl_xor_sync(0xffffffffu, best_j, off);
    if (ob < best || (ob == best && oj < best_j)) best = ob, best_j = oj;
  }
  if (best_j == INT_MAX) return {NAN, 0};
  return {best > 0.f ? best : 0.f, best_j};
}

}  // namespace skinny::kmeans::detail
