// TSM2 paper, V1 (Alg. 2): the outer-product version. One thread per row i of A; the columns of C are
// processed in passes of t2 held in registers, and for each p the thread loads A(i, p) once and
// multiplies it into all t2 accumulators with B(p, j0 .. j0+t2-1). A is read ceil(cols / t2) times
// instead of cols times. B is read straight from global memory: every thread of a warp asks for the
// same element (a broadcast; one useful element per transaction, the inefficiency V2 removes). Each A
// element is loaded and used at once: no prefetching.
#include "paper_common.cuh"

namespace skinny::gemm::detail {
namespace {

template <class T, int T1, int T2, Layout LA>
__global__ void __launch_bounds__(T1) tsm2_v1_kernel(const TallSkinny<T> t) {
  static_assert(T1 > 0 && T1 % 32 == 0 && T1 <= 1024, "t1 must be a whole number of warps (at most 1024 threads)");
  static_assert(T2 >= 1 && T2 <= kMaxSkinny, "t2 (columns per pass) must be in 1 .. kMaxSkinny");
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * T1 + threadIdx.x;
  if (i >= t.rows) return;
  const tsm2_paper::ARow<T, LA> a(t, i);
  for (std::int64_t j0 = 0; j0 < t.cols; j0 += T2) {
    const int n_cols = static_cast<int>(t.cols - j0 < T2 ? t.cols - j0 : T2);  // columns in this pass
    T acc[T2];
#pragma unroll
    for (int jj = 0; jj < T2; ++jj) acc[jj] = 0;
    const T* b_row = t.b + j0 * t.b_col_stride;  // B(p, j0)
#pragma unroll 1
    for (std::int64_t p = 0; p < t.inner; ++p, b_row += t.b_row_stride) {
      const T ap = a(p);
      const T* b_pj = b_row;  // B(p, j0 + jj)
#pragma unroll
      for (int jj = 0; jj < T2; ++jj, b_pj += t.b_col_stride)
        if (jj < n_cols) acc[jj] += ap * __ldg(b_pj);
    }
    tsm2_paper::store_c_pass(t, i, j0, acc);
  }
}

using tsm2_paper::Params;

}  // namespace

Support tsm2_v1_can_implement(const Problem& p) { return tsm2_paper::support(p, "tsm2_v1", Params<float>::t1); }

void tsm2_v1_launch(const Problem& p, Context& ctx) {
  tsm2_paper::launch_tall_skinny(p, [&](const auto& t, auto la) {
    using T = decltype(t.alpha);
    constexpr int t1 = Params<T>::t1, t2 = Params<T>::t2;
    tsm2_v1_kernel<T, t1, t2, decltype(la)::value><<<tsm2_paper::grid(t.rows, t1), t1, 0, ctx.stream()>>>(t);
  });
}

}  // namespace skinny::gemm::detail
