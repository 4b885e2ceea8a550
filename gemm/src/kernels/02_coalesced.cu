// 02 coalesced: one thread per element of C, as in 01, but in 1-D blocks whose consecutive threads take
// consecutive columns j of one row i. A warp then reads one element of A (a broadcast), a contiguous
// run of a row-major B, and writes a contiguous run of C.
#include "common.cuh"
#include "launchers.hpp"

namespace skinny::gemm::detail {
namespace {

constexpr int kTile = 32;  ///< a block covers kTile x kTile elements of C
constexpr int kThreads = kTile * kTile;

template <class T, class OpA, class OpB>
__global__ void __launch_bounds__(kThreads)
    coalesced_kernel(OpA a, OpB b, T* __restrict__ c, std::int64_t ldc, int m, int n, int k, T alpha, T beta) {
  static_assert(kThreads <= 1024, "a block holds at most 1024 threads");
  const std::int64_t i = std::int64_t(blockIdx.x) * kTile + threadIdx.x / kTile;
  const std::int64_t j = std::int64_t(blockIdx.y) * kTile + threadIdx.x % kTile;
  if (i >= m || j >= n) return;
  // Walk row i of A and column j of B with pointers: the stride along k depends on the layout only.
  const T* __restrict__ pa = a.p + a.offset(i, 0);
  const T* __restrict__ pb = b.p + b.offset(0, j);
  const std::int64_t sa = OpA::row_major ? 1 : a.ld;
  const std::int64_t sb = OpB::row_major ? b.ld : 1;
  T acc = 0;
#pragma unroll 4
  for (int p = 0; p < k; ++p) {
    acc += *pa * *pb;
    pa += sa;
    pb += sb;
  }
  store_result(c, ldc, i, j, acc, alpha, beta);
}

}  // namespace

Support coalesced_can_implement(const Problem& p) { return ladder_support(p, "coalesced", ceil_div(p.n, kTile)); }

void coalesced_launch(const Problem& p, Context& ctx) {
  with_float_or_double(p, [&](auto zero) {
    using T = decltype(zero);
    with_operands<T>(p, [&](auto a, auto b) {
      const dim3 grid(ceil_div(p.m, kTile), ceil_div(p.n, kTile));
      coalesced_kernel<<<grid, kThreads, 0, ctx.stream()>>>(a, b, static_cast<T*>(p.c), p.ldc, int(p.m), int(p.n),
                                                            int(p.k), T(p.alpha), T(p.beta));
    });
  });
  SKINNY_CHECK_LAUNCH();
}

}  // namespace skinny::gemm::detail
