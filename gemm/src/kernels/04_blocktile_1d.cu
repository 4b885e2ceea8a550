// 04 1-D block tiling: a block of BM*BN/TM threads computes a BM x BN tile of C, each thread TM
// results in one column. Per k-step the block stages a BM x BK slice of A and a BK x BN slice of B in
// shared memory; in the inner product a thread keeps one B value in a register and reuses it for its
// TM results, so shared-memory traffic per multiply-add drops from two loads to about one.
//
// Shared layout: A is stored k-major (as[p][r]), so the TM values of A a thread needs are contiguous
// (the compiler can read them as wide loads, and the whole warp reads the same ones: a broadcast). Rows
// are padded by kPad elements, so that the coalesced global loads of either layout store into shared
// memory without bank conflicts while keeping 16-byte alignment.
#include "common.cuh"
#include "launchers.hpp"

namespace skinny::gemm::detail {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 8, kTM = 8;
constexpr int kPad = 4;

template <int BM, int BN, int BK, int TM, class T, class OpA, class OpB>
__global__ void __launch_bounds__(BM* BN / TM)
    blocktile_1d_kernel(OpA a, OpB b, T* __restrict__ c, std::int64_t ldc, int m, int n, int k, T alpha, T beta) {
  constexpr int kThreads = BM * BN / TM;
  static_assert(BM % TM == 0, "a thread's TM rows must tile BM");
  static_assert(kThreads <= 1024, "a block holds at most 1024 threads");
  static_assert(kThreads % 32 == 0, "whole warps");
  static_assert(BN % 32 == 0, "a warp must share one threadRow, so its reads of A are broadcasts");
  static_assert((BM * BK) % kThreads == 0 && (BK * BN) % kThreads == 0, "loads split evenly over the threads");
  constexpr int kLdA = BM + kPad, kLdB = BN + kPad;
  __shared__ __align__(16) T as[BK * kLdA];  // as[p * kLdA + r] = A(row0 + r, k0 + p)
  __shared__ __align__(16) T bs[BK * kLdB];  // bs[p * kLdB + cc] = B(k0 + p, col0 + cc)

  const int tid = threadIdx.x;
  const int thread_col = tid % BN;  // consecutive threads: consecutive columns of C
  const int thread_row = tid / BN;  // rows thread_row*TM .. +TM-1 of the tile
  const int row0 = blockIdx.x * BM;
  const int col0 = blockIdx.y * BN;
  const int m_rem = m - row0;  // > 0
  const int n_rem = n - col0;
  const bool full_mn = m_rem >= BM && n_rem >= BN;

  a.p += a.offset(row0, 0);
  b.p += b.offset(0, col0);

  T acc[TM] = {};
  const int k_tiles = (k - 1) / BK + 1;  // counted in tiles: k0 + BK could overflow int
  for (int t = 0; t < k_tiles; ++t) {
    const int k0 = t * BK;
    if (full_mn && k - k0 >= BK) {
      load_tile<BM, BK, kThreads, 1, kLdA, false>(as, a, 0, k0, m_rem, k, tid);
      load_tile<BK, BN, kThreads, kLdB, 1, false>(bs, b, k0, 0, k, n_rem, tid);
    } else {
      load_tile<BM, BK, kThreads, 1, kLdA, true>(as, a, 0, k0, m_rem, k, tid);
      load_tile<BK, BN, kThreads, kLdB, 1, true>(bs, b, k0, 0, k, n_rem, tid);
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < BK; ++p) {
      const T bv = bs[p * kLdB + thread_col];
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i] += as[p * kLdA + thread_row * TM + i] * bv;
    }
    __syncthreads();
  }

  const std::int64_t j = std::int64_t(col0) + thread_col;
  if (full_mn) {
#pragma unroll
    for (int i = 0; i < TM; ++i) store_result(c, ldc, std::int64_t(row0) + thread_row * TM + i, j, acc[i], alpha, beta);
  } else if (thread_col < n_rem) {
#pragma unroll
    for (int i = 0; i < TM; ++i)
      if (thread_row * TM + i < m_rem)
        store_result(c, ldc, std::int64_t(row0) + thread_row * TM + i, j, acc[i], alpha, beta);
  }
}

}  // namespace

Support blocktile_1d_can_implement(const Problem& p) {
  return ladder_support(p, "blocktile1d", ceil_div(p.n, kBN));
}

void blocktile_1d_launch(const Problem& p, Context& ctx) {
  with_float_or_double(p, [&](auto zero) {
    using T = decltype(zero);
    with_operands<T>(p, [&](auto a, auto b) {
      const dim3 grid(ceil_div(p.m, kBM), ceil_div(p.n, kBN));
      blocktile_1d_kernel<kBM, kBN, kBK, kTM, T><<<grid, kBM * kBN / kTM, 0, ctx.stream()>>>(
          a, b, static_cast<T*>(p.c), p.ldc, int(p.m), int(p.n), int(p.k), T(p.alpha), T(p.beta));
    });
  });
  SKINNY_CHECK_LAUNCH();
}

}  // namespace skinny::gemm::detail
