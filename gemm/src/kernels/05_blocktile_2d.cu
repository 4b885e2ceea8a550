// 05 2-D block tiling: a block of (BM/TM)*(BN/TN) threads computes a BM x BN tile of C, each thread a
// TM x TN sub-tile. Per k-step the block stages a BM x BK slice of A and a BK x BN slice of B in shared
// memory, each thread loading several elements of each. In the inner product a thread copies a column
// slice of A (TM values) and a row slice of B (TN values) into registers and forms their outer product:
// TM + TN shared loads feed TM * TN multiply-adds.
//
// Shared layout: A is stored k-major (as[p][r]), so both register slices are contiguous in shared memory
// (the compiler reads them with wide loads). Rows are padded by kPad elements, so that the coalesced
// global loads of either layout store into shared memory without bank conflicts while keeping 16-byte
// alignment. Global loads are scalar; 06 vectorises them.
#include "common.cuh"
#include "launchers.hpp"

namespace skinny::gemm::detail {
namespace {

constexpr int kBM = 128, kBN = 128, kBK = 8, kTM = 8, kTN = 8;
constexpr int kPad = 4;

template <int BM, int BN, int BK, int TM, int TN, class T, class OpA, class OpB>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    blocktile_2d_kernel(OpA a, OpB b, T* __restrict__ c, std::int64_t ldc, int m, int n, int k, T alpha, T beta) {
  constexpr int kCols = BN / TN;  // threads along a row of the tile
  constexpr int kThreads = (BM / TM) * kCols;
  static_assert(BM % TM == 0 && BN % TN == 0, "the threads' sub-tiles must tile the block tile");
  static_assert(kThreads <= 1024, "a block holds at most 1024 threads");
  static_assert(kThreads % 32 == 0, "whole warps");
  static_assert((BM * BK) % kThreads == 0 && (BK * BN) % kThreads == 0, "loads split evenly over the threads");
  constexpr int kLdA = BM + kPad, kLdB = BN + kPad;
  __shared__ __align__(16) T as[BK * kLdA];  // as[p * kLdA + r] = A(row0 + r, k0 + p)
  __shared__ __align__(16) T bs[BK * kLdB];  // bs[p * kLdB + cc] = B(k0 + p, col0 + cc)

  const int tid = threadIdx.x;
  const int thread_col = tid % kCols;  // columns thread_col*TN .. +TN-1 of the tile
  const int thread_row = tid / kCols;  // rows thread_row*TM .. +TM-1
  const int row0 = blockIdx.x * BM;
  const int col0 = blockIdx.y * BN;
  const int m_rem = m - row0;  // > 0
  const int n_rem = n - col0;
  const bool full_mn = m_rem >= BM && n_rem >= BN;

  a.p += a.offset(row0, 0);
  b.p += b.offset(0, col0);

  T acc[TM][TN] = {};
  T reg_m[TM], reg_n[TN];
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
#pragma unroll
      for (int i = 0; i < TM; ++i) reg_m[i] = as[p * kLdA + thread_row * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) reg_n[j] = bs[p * kLdB + thread_col * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += reg_m[i] * reg_n[j];
    }
    __syncthreads();
  }

  const int r_base = thread_row * TM, c_base = thread_col * TN;
  if (full_mn) {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j)
        store_result(c, ldc, std::int64_t(row0) + r_base + i, std::int64_t(col0) + c_base + j, acc[i][j], alpha, beta);
  } else {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j)
        if (r_base + i < m_rem && c_base + j < n_rem)
          store_result(c, ldc, std::int64_t(row0) + r_base + i, std::int64_t(col0) + c_base + j, acc[i][j], alpha,
                       beta);
  }
}

}  // namespace

Support blocktile_2d_can_implement(const Problem& p) {
  return ladder_support(p, "blocktile2d", ceil_div(p.n, kBN));
}

void blocktile_2d_launch(const Problem& p, Context& ctx) {
  with_float_or_double(p, [&](auto zero) {
    using T = decltype(zero);
    with_operands<T>(p, [&](auto a, auto b) {
      const dim3 grid(ceil_div(p.m, kBM), ceil_div(p.n, kBN));
      blocktile_2d_kernel<kBM, kBN, kBK, kTM, kTN, T><<<grid, (kBM / kTM) * (kBN / kTN), 0, ctx.stream()>>>(
          a, b, static_cast<T*>(p.c), p.ldc, int(p.m), int(p.n), int(p.k), T(p.alpha), T(p.beta));
    });
  });
  SKINNY_CHECK_LAUNCH();
}

}  // namespace skinny::gemm::detail
