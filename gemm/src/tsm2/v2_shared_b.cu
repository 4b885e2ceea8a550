// TSM2 paper, V2 (Alg. 3): V1 with B staged through shared memory. The block's t1 threads load a
// t1 x t2 tile of B together, thread k fetching row k of the tile (for a column-major B a warp reads
// 32 consecutive elements of a column: coalesced, where V1 asked for one element per transaction), and
// every B element now comes from global memory once per block instead of once per thread. The tile is
// stored column-major, tile[j][p] (paper 3.4): the loading warp writes 32 consecutive words of one
// column, 32 different banks, and in the compute loop all threads read the same word (a broadcast), so
// there are no bank conflicts. A is still loaded one element at a time and used at once: each warp
// waits on every load (paper 3.5; removing that wait is V3).
#include "paper_common.cuh"

namespace skinny::gemm::detail {
namespace {

template <class T, int T1, int T2, Layout LA>
__global__ void __launch_bounds__(T1) tsm2_v2_kernel(const TallSkinny<T> t) {
  static_assert(T1 > 0 && T1 % 32 == 0 && T1 <= 1024, "t1 must be a whole number of warps (at most 1024 threads)");
  static_assert(T2 >= 1 && T2 <= kMaxSkinny, "t2 (columns per pass) must be in 1 .. kMaxSkinny");
  static_assert(sizeof(T) * T1 * T2 <= 48 * 1024, "the B tile must fit in static shared memory");
  __shared__ T tile[T2][T1];  // column-major: tile[jj][k] = B(p0 + k, j0 + jj)

  const int tid = threadIdx.x;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * T1 + tid;
  const bool live = i < t.rows;  // rows past the edge still help load B and reach every barrier
  const tsm2_paper::ARow<T, LA> a(t, live ? i : t.rows - 1);

  for (std::int64_t j0 = 0; j0 < t.cols; j0 += T2) {
    T acc[T2];
#pragma unroll
    for (int jj = 0; jj < T2; ++jj) acc[jj] = 0;

    for (std::int64_t p0 = 0; p0 < t.inner; p0 += T1) {
      __syncthreads();  // the previous tile has been used by every thread
      T b[T2];
      tsm2_paper::load_b_row(b, t, p0 + tid, j0);  // zero past the edges of B
#pragma unroll
      for (int jj = 0; jj < T2; ++jj) tile[jj][tid] = b[jj];
      __syncthreads();

      const int steps = static_cast<int>(t.inner - p0 < T1 ? t.inner - p0 : T1);
#pragma unroll 1
      for (int k = 0; k < steps; ++k) {
        const T ap = a(p0 + k);
#pragma unroll
        for (int jj = 0; jj < T2; ++jj) acc[jj] += ap * tile[jj][k];
      }
    }
    if (live) tsm2_paper::store_c_pass(t, i, j0, acc);
  }
}

using tsm2_paper::Params;

}  // namespace

Support tsm2_v2_can_implement(const Problem& p) { return tsm2_paper::support(p, "tsm2_v2", Params<float>::t1); }

void tsm2_v2_launch(const Problem& p, Context& ctx) {
  tsm2_paper::launch_tall_skinny(p, [&](const auto& t, auto la) {
    using T = decltype(t.alpha);
    constexpr int t1 = Params<T>::t1, t2 = Params<T>::t2;
    tsm2_v2_kernel<T, t1, t2, decltype(la)::value><<<tsm2_paper::grid(t.rows, t1), t1, 0, ctx.stream()>>>(t);
  });
}

}  // namespace skinny::gemm::detail
