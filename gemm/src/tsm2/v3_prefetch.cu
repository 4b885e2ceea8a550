// TSM2 paper, V3 (Alg. 4): V2 with data prefetching (paper 3.5). In V2 every load of A is followed at
// once by the FMAs that need it, so each warp stalls for the whole memory latency. Here each thread
// works through its row of A in steps of t3 elements: the t3 loads for step s+1 are issued before the
// t2 x t3 FMAs of step s, so t3 independent loads per thread are always in flight while it computes.
// Likewise the rows of the next t1 x t2 tile of B are loaded into t2 registers at the start of a
// tile and only written to shared memory after the current tile has been used. The tile is double
// buffered (the next one goes to the other buffer), so one __syncthreads per tile suffices.
#include "paper_common.cuh"

namespace skinny::gemm::detail {
namespace {

/// One tile's worth of steps: t1 / t3 steps of t3 elements of A against the shared tile `cur_b`.
/// cur_a holds A(i, p0 .. p0+t3-1) on entry and A(i, p0+t1 .. p0+t1+t3-1) on exit (zero past inner).
template <class T, int T1, int T2, int T3, Layout LA>
__device__ __forceinline__ void tsm2_v3_tile(T (&acc)[T2], T (&cur_a)[T3], const T (*cur_b)[T1],
                                             const tsm2_paper::ARow<T, LA>& a, std::int64_t p0,
                                             std::int64_t inner) {
  const T* next = a.ptr(p0 + T3);  // the next element of A to prefetch, walking down row i
  const std::int64_t step = a.step();
  // Elements of A left to prefetch in this tile: A(i, p0+t3+e) exists for e < left. Clamped to t1,
  // the most one tile prefetches, so it fits an int; negative when even the first is past inner.
  const int left = static_cast<int>(inner - p0 - T3 < T1 ? inner - p0 - T3 : T1);
  // Not unrolled: the steps are identical and the register arrays are indexed by l and jj only.
  // Unrolling lets the compiler hoist the loads of later steps and run out of registers.
#pragma unroll 1
  for (int s = 0; s < T1; s += T3) {
    // The next t3 elements of A (the first of the next tile after the last step): issued before this
    // step's FMAs, so the loads are in flight while they run.
    T next_a[T3];
#pragma unroll
    for (int l = 0; l < T3; ++l, next += step) next_a[l] = s + l < left ? __ldg(next) : T(0);
#pragma unroll
    for (int l = 0; l < T3; ++l)
#pragma unroll
      for (int jj = 0; jj < T2; ++jj) acc[jj] += cur_a[l] * cur_b[jj][s + l];
#pragma unroll
    for (int l = 0; l < T3; ++l) cur_a[l] = next_a[l];
  }
}

/// Blocks per SM the register allocation must allow (__launch_bounds__). Left alone, the compiler
/// hoists every shared-memory load of a step and takes 124-143 registers (3-4 blocks of 128 threads);
/// these are the tightest caps that still compile without spills (96 registers for float, 128 for
/// double), keeping more warps, and so more prefetched loads of A, in flight per SM.
template <class T>
constexpr int kV3MinBlocks = sizeof(T) == 4 ? 5 : 4;

template <class T, int T1, int T2, int T3, Layout LA>
__global__ void __launch_bounds__(T1, kV3MinBlocks<T>) tsm2_v3_kernel(const TallSkinny<T> t) {
  static_assert(T1 > 0 && T1 % 32 == 0 && T1 <= 1024, "t1 must be a whole number of warps (at most 1024 threads)");
  static_assert(T2 >= 1 && T2 <= kMaxSkinny, "t2 (columns per pass) must be in 1 .. kMaxSkinny");
  static_assert(T3 >= 1 && T1 % T3 == 0, "t3 (elements of A per step) must divide t1");
  static_assert(2 * sizeof(T) * T1 * T2 <= 48 * 1024, "two B tiles must fit in static shared memory");
  // Column-major tiles, tile[buf][jj][k] = B(p0 + k, j0 + jj): a step reads t3 consecutive words of a
  // column, which the compiler fetches with vector loads (every thread reads the same address).
  __shared__ __align__(16) T tile[2][T2][T1];

  const int tid = threadIdx.x;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * T1 + tid;
  const bool live = i < t.rows;  // rows past the edge still help load B and reach every barrier
  const tsm2_paper::ARow<T, LA> a(t, live ? i : t.rows - 1);

  for (std::int64_t j0 = 0; j0 < t.cols; j0 += T2) {
    T acc[T2];
#pragma unroll
    for (int jj = 0; jj < T2; ++jj) acc[jj] = 0;

    // Before the loop: the first tile of B in shared memory, the first t3 elements of A in registers.
    T next_b[T2];
    tsm2_paper::load_b_row(next_b, t, tid, j0);
    T cur_a[T3];
#pragma unroll
    for (int l = 0; l < T3; ++l) cur_a[l] = a.get_or_zero(l, t.inner);
    int buf = 0;
#pragma unroll
    for (int jj = 0; jj < T2; ++jj) tile[0][jj][tid] = next_b[jj];
    __syncthreads();

    for (std::int64_t p0 = 0; p0 < t.inner; p0 += T1) {
      // The next tile of B: issued now, needed only after this tile's compute.
      tsm2_paper::load_b_row(next_b, t, p0 + T1 + tid, j0);
      tsm2_v3_tile(acc, cur_a, tile[buf], a, p0, t.inner);
      // Nobody reads the other buffer during this tile (its last readers passed the previous barrier).
      buf ^= 1;
#pragma unroll
      for (int jj = 0; jj < T2; ++jj) tile[buf][jj][tid] = next_b[jj];
      __syncthreads();
    }
    if (live) tsm2_paper::store_c_pass(t, i, j0, acc);
  }
}

using tsm2_paper::Params;

}  // namespace

Support tsm2_v3_can_implement(const Problem& p) { return tsm2_paper::support(p, "tsm2_v3", Params<float>::t1); }

void tsm2_v3_launch(const Problem& p, Context& ctx) {
  tsm2_paper::launch_tall_skinny(p, [&](const auto& t, auto la) {
    using T = decltype(t.alpha);
    constexpr int t1 = Params<T>::t1, t2 = Params<T>::t2, t3 = Params<T>::t3;
    tsm2_v3_kernel<T, t1, t2, t3, decltype(la)::value><<<tsm2_paper::grid(t.rows, t1), t1, 0, ctx.stream()>>>(t);
  });
}

}  // namespace skinny::gemm::detail
