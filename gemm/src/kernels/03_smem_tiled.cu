// 03 shared-memory tiling: a block of kTile x kTile threads computes a kTile x kTile tile of C, one
// element per thread. Each k-step the block stages a kTile x kTile tile of A and of B in shared memory,
// read from global memory once and then kTile times from shared memory. Loads are coalesced for either
// layout: threads run along the operand's contiguous dimension, and the shared arrays are padded by one
// so that the transposed store of a column-major tile does not hit one bank 32 times.
#include "common.cuh"
#include "launchers.hpp"

namespace skinny::gemm::detail {
namespace {

constexpr int kTile = 32;

template <int Tile, class T, class OpA, class OpB>
__global__ void __launch_bounds__(Tile* Tile)
    smem_tiled_kernel(OpA a, OpB b, T* __restrict__ c, std::int64_t ldc, int m, int n, int k, T alpha, T beta) {
  static_assert(Tile * Tile <= 1024, "a block holds at most 1024 threads");
  static_assert(Tile % 32 == 0, "a warp must cover whole rows of the tile (broadcast reads of A)");
  __shared__ T as[Tile][Tile + 1];  // as[r][p] = A(row0 + r, k0 + p)
  __shared__ T bs[Tile][Tile + 1];  // bs[p][cc] = B(k0 + p, col0 + cc)

  const int tx = threadIdx.x;  // column of C within the tile (fastest)
  const int ty = threadIdx.y;  // row of C within the tile
  const int row0 = blockIdx.x * Tile;
  const int col0 = blockIdx.y * Tile;
  const int m_rem = m - row0;  // rows of C left from row0 (> 0)
  const int n_rem = n - col0;
  const bool full_mn = m_rem >= Tile && n_rem >= Tile;

  // Move the operands to the block's corner, so tile coordinates are small and local.
  a.p += a.offset(row0, 0);
  b.p += b.offset(0, col0);

  // Coordinates this thread loads, in tile terms: along the contiguous dimension of each layout.
  constexpr bool a_row = OpA::row_major, b_row = OpB::row_major;
  const int ar = a_row ? ty : tx, ap = a_row ? tx : ty;  // A(ar, k0 + ap)
  const int bp = b_row ? ty : tx, bc = b_row ? tx : ty;  // B(k0 + bp, bc)

  T acc = 0;
  const int k_tiles = (k - 1) / Tile + 1;  // counted in tiles: k0 + Tile could overflow int
  for (int t = 0; t < k_tiles; ++t) {
    const int k0 = t * Tile;
    if (full_mn && k - k0 >= Tile) {
      as[ar][ap] = a(ar, std::int64_t(k0) + ap);
      bs[bp][bc] = b(std::int64_t(k0) + bp, bc);
    } else {
      as[ar][ap] = a.get_or_zero(ar, std::int64_t(k0) + ap, m_rem, k);
      bs[bp][bc] = b.get_or_zero(std::int64_t(k0) + bp, bc, k, n_rem);
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < Tile; ++p) acc += as[ty][p] * bs[p][tx];
    __syncthreads();
  }
  if (ty < m_rem && tx < n_rem)
    store_result(c, ldc, std::int64_t(row0) + ty, std::int64_t(col0) + tx, acc, alpha, beta);
}

}  // namespace

Support smem_tiled_can_implement(const Problem& p) { return ladder_support(p, "smem", ceil_div(p.n, kTile)); }

void smem_tiled_launch(const Problem& p, Context& ctx) {
  with_float_or_double(p, [&](auto zero) {
    using T = decltype(zero);
    with_operands<T>(p, [&](auto a, auto b) {
      const dim3 grid(ceil_div(p.m, kTile), ceil_div(p.n, kTile));
      smem_tiled_kernel<kTile, T><<<grid, dim3(kTile, kTile), 0, ctx.stream()>>>(
          a, b, static_cast<T*>(p.c), p.ldc, int(p.m), int(p.n), int(p.k), T(p.alpha), T(p.beta));
    });
  });
  SKINNY_CHECK_LAUNCH();
}

}  // namespace skinny::gemm::detail
