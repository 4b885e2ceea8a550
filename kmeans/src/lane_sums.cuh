// Sums of N per-lane values over the 32 lanes of a warp by recursive halving: at each step a lane sends
// half of its live values to its partner and keeps the other half, so the whole reduction costs N
// shuffles per lane (a butterfly per value would cost 5 N). Used by the few-clusters kernels, whose lanes
// each hold partial dot products of R rows x K centroids.
#pragma once

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

/// The sums over the warp of the N values acc[0 .. N) (N = 16, 32 or 64). Afterwards lane l holds the sums
/// of flat indices kLaneValues<N> l .. + kLaneValues<N> - 1 in acc[0 ..] (N >= 32), or of index l / 2 in
/// acc[0] (N = 16; lanes 2i and 2i + 1 hold the same sum).
template <int N>
__device__ __forceinline__ void sum_over_lanes(float (&acc)[N], int lane) {
  static_assert(N == 16 || N == 32 || N == 64, "16, 32 or 64 values per lane");
  halve<16, N / 2>(acc, lane);
  halve<8, N / 4>(acc, lane);
  halve<4, N / 8>(acc, lane);
  halve<2, N / 16>(acc, lane);
  if constexpr (N >= 32)
    halve<1, N / 32>(acc, lane);
  else
    acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], 1);
}

/// The first flat index lane `lane` holds after sum_over_lanes<N>.
template <int N>
__device__ __forceinline__ int lane_first_index(int lane) {
  return N >= 32 ? kLaneValues<N> * lane : lane / 2;
}

}  // namespace skinny::kmeans::detail
