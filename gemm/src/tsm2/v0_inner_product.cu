// TSM2 paper, V0 (Alg. 1): the inner-product version. One thread per row i of A; for each column j
// of C the thread forms the dot product of row i of A with column j of B, so every element of A is
// read `cols` times from global memory (the cost V1 removes). Each element is loaded and used at once:
// no prefetching, as in the paper.
#include "paper_common.cuh"

namespace skinny::gemm::detail {
namespace {

template <class T, int T1, Layout LA>
__global__ void __launch_bounds__(T1) tsm2_v0_kernel(const TallSkinny<T> t) {
  static_assert(T1 > 0 && T1 % 32 == 0 && T1 <= 1024, "t1 must be a whole number of warps (at most 1024 threads)");
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * T1 + threadIdx.x;
  if (i >= t.rows) return;
  const tsm2_paper::ARow<T, LA> a(t, i);
  for (std::int64_t j = 0; j < t.cols; ++j) {
    T acc = 0;
#pragma unroll 1
    for (std::int64_t p = 0; p < t.inner; ++p) acc += a(p) * tsm2_paper::b_at(t, p, j);
    tsm2_paper::store_c(t, i, j, acc);
  }
}

constexpr int kT1 = 128;  // threads per block (the paper's t1; V0 has no other parameter)

}  // namespace

Support tsm2_v0_can_implement(const Problem& p) { return tsm2_paper::support(p, "tsm2_v0", kT1); }

void tsm2_v0_launch(const Problem& p, Context& ctx) {
  tsm2_paper::launch_tall_skinny(p, [&](const auto& t, auto la) {
    using T = decltype(t.alpha);
    tsm2_v0_kernel<T, kT1, decltype(la)::value><<<tsm2_paper::grid(t.rows, kT1), kT1, 0, ctx.stream()>>>(t);
  });
}

}  // namespace skinny::gemm::detail
