// 01 naive: one thread per element of C. Consecutive threads take consecutive rows of C, so a warp
// reads 32 different rows of A and writes 32 different rows of C: no access is coalesced.
#include "common.cuh"
#include "launchers.hpp"

namespace skinny::gemm::detail {
namespace {

constexpr int kBlock = 32;

template <class T, class OpA, class OpB>
__global__ void naive_kernel(OpA a, OpB b, T* c, std::int64_t ldc, int m, int n, int k, T alpha, T beta) {
  const int i = blockIdx.x * kBlock + threadIdx.x;
  const int j = blockIdx.y * kBlock + threadIdx.y;
  if (i >= m || j >= n) return;
  T acc = 0;
  for (int p = 0; p < k; ++p) acc += a(i, p) * b(p, j);
  store_result(c, ldc, i, j, acc, alpha, beta);
}

}  // namespace

Support naive_can_implement(const Problem& p) { return ladder_support(p, "naive", ceil_div(p.n, kBlock)); }

void naive_launch(const Problem& p, Context& ctx) {
  with_float_or_double(p, [&](auto zero) {
    using T = decltype(zero);
    with_operands<T>(p, [&](auto a, auto b) {
      const dim3 grid(ceil_div(p.m, kBlock), ceil_div(p.n, kBlock));
      naive_kernel<<<grid, dim3(kBlock, kBlock), 0, ctx.stream()>>>(a, b, static_cast<T*>(p.c), p.ldc, int(p.m),
                                                                     int(p.n), int(p.k), T(p.alpha), T(p.beta));
    });
  });
  SKINNY_CHECK_LAUNCH();
}

}  // namespace skinny::gemm::detail
