// TSM2 for column-major float A on the FP64 tensor cores (DMMA): C = alpha * A * B + beta * C with 8
// or 16 columns per pass. A trial candidate beside the FFMA kernel (tsm2.cu) for 5..16 columns.
//
// Why (measured on the H100, bench/results/h100/2026-11-23_cm-dmma/steps): at k = 8 and 16 the FFMA
// kernel spends k multiply-adds per element of A and is issue-bound at 8-12 warps per SM (ncu: 50 %
// issue-active). Here an element of A costs a quarter of a 16-byte shared load, one conversion to
// double and, per 8 columns, a quarter of a DMMA issue per lane. It wins where the FFMA kernel has too
// few warps to hide its latency (n = 10240: 84 % of the read ceiling against 79 % at k = 8, 74 against
// 70 % at k = 16) and loses where that kernel reads at 93-96 %; the trial keeps the faster. Products are
// exact and sums double, so results are at least as accurate as the FFMA kernel's. Measured and not
// kept: the same kernel on double A (never faster than the FFMA kernel: 88-92 % against 90-97 %), 64
// rows per warp, and an integer float-to-double conversion in place of F2F (no gain).
//
// C^T (cols x rows) = B^T (cols x inner) * A^T (inner x rows), one mma.m8n8k4 per (8 columns, 8 rows,
// 4 inner): B^T is the row-major A operand (lane (g, t) = (lane / 4, lane % 4) holds B^T(g, t)), A^T
// the column-major B operand (lane (g, t) holds A^T(t, g)), and lane (g, t) accumulates C^T(g, 2t) and
// C^T(g, 2t + 1). Any bijection of rows onto an n-tile's 8 positions, and of inner indices onto a k4
// step's 4, gives the same sums, so both are chosen for 16-byte reads:
//  * rows: a warp owns 32 rows as 4 n-tiles; position q of n-tile n is row 4q + n, so lane (g, t) finds
//    its 4 rows as one float4 at row 4g.
//  * inner: within each 8 inner indices, lane t of k4 step s takes index 2t + s, so a lane reads its two
//    B^T values of a column as one float2.
// A is streamed through a cp.async ring per warp (stage: 16 columns x 32 rows; a warp reads only what
// its lanes copied: a __syncwarp, no block barrier). Column pitch 36 floats: a quarter warp's 16-byte
// reads (g in 0..1, t in 0..3, columns 2t apart) fall in distinct banks; B^T rows are KC + 8 long for
// the same reason. B^T chunks are double buffered and filled with the stage that starts the previous
// chunk (one __syncthreads per chunk), as in the FFMA kernel.
// Included only by tsm2.cu.
#pragma once

#include "../tensor_core.cuh"
#include "tsm2_device.cuh"

#include <cstdint>

namespace skinny::gemm::detail::tsm2_device {

template <int NT>
struct CmDmmaCfg {
  using T = float;
  using V = float4;
  static constexpr int VEC = 4;           ///< rows per 16-byte copy and read
  static constexpr int T2 = 8 * NT;       ///< columns of C per pass: NT m-tiles of 8
  static constexpr int ROWS_PER_WARP = 32;
  static constexpr int NR = ROWS_PER_WARP / 8;  ///< n-tiles of 8 rows per warp
  static constexpr int G = 16;            ///< columns of A per stage (four k4 steps)
  static constexpr int S = 4;             ///< stages in each warp's ring (S - 1 in flight)
  static constexpr int PITCH = ROWS_PER_WARP + VEC;  ///< floats per column of a stage (bank spread)
  static constexpr int KC = 64;           ///< inner elements per B^T chunk
  static constexpr int SPC = KC / G;      ///< stages per chunk
  static constexpr int LDB = KC + 8;      ///< padded row of the B^T tile (bank spread)
  static_assert(SPC >= S - 1 && (SPC & (SPC - 1)) == 0, "a chunk's B must arrive within S - 1 stages");
  static_assert(G % 8 == 0 && NR == VEC, "pairs of k4 steps; a warp's rows are one vector per lane");
  static constexpr int STAGE = G * PITCH;  ///< floats of one warp's stage
  static constexpr int LANES_PER_COLUMN = ROWS_PER_WARP / VEC;
  static constexpr int COLUMNS_PER_COPY = 32 / LANES_PER_COLUMN;  ///< columns one copy instruction covers
  static constexpr int COPIES = G / COLUMNS_PER_COPY;  ///< 16-byte copies per lane per stage
  __host__ __device__ static std::size_t ring_bytes(int t1) { return std::size_t(t1 / 32) * S * STAGE * sizeof(T); }
  static std::size_t smem(int t1) { return ring_bytes(t1) + sizeof(T) * 2 * T2 * LDB; }
  __host__ __device__ static int rows_per_block(int t1) { return t1 / 32 * ROWS_PER_WARP; }
  static int loads_in_flight() { return (S - 1) * COPIES; }
  static int bytes_in_flight_per_thread() { return (S - 1) * COPIES * 16; }
  /// Row (0 .. 31 of the warp's) at position q of n-tile n.
  __host__ __device__ static constexpr int row_of(int n, int q) { return VEC * q + n; }
};

template <int NT>
__global__ void __launch_bounds__(256) tsm2_cm_dmma_kernel(const Args<float> g) {
  using Cfg = CmDmmaCfg<NT>;
  using T = float;
  using V = float4;
  constexpr int VEC = Cfg::VEC, G = Cfg::G, S = Cfg::S, PITCH = Cfg::PITCH, KC = Cfg::KC, SPC = Cfg::SPC,
                LDB = Cfg::LDB, T2 = Cfg::T2, NR = Cfg::NR, STAGE = Cfg::STAGE, COPIES = Cfg::COPIES,
                LPC = Cfg::LANES_PER_COLUMN, CPC = Cfg::COLUMNS_PER_COPY;
  extern __shared__ __align__(16) unsigned char smem[];
  const int t1 = blockDim.x, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
  T* ring = reinterpret_cast<T*>(smem) + warp * S * STAGE;   // this warp's [S][G][PITCH]
  T* bt = reinterpret_cast<T*>(smem + Cfg::ring_bytes(t1));  // [2][T2][LDB]

  const int pass = static_cast<int>(blockIdx.x % static_cast<unsigned>(g.passes));
  const std::int64_t rg = blockIdx.x / static_cast<unsigned>(g.passes);
  const std::int64_t wrow = rg * Cfg::rows_per_block(t1) + static_cast<std::int64_t>(warp) * Cfg::ROWS_PER_WARP;
  const std::int64_t j0 = static_cast<std::int64_t>(pass) * T2;
  const std::int64_t p_begin = static_cast<std::int64_t>(blockIdx.y) * g.chunk;
  const std::int64_t p_end = min(g.inner, p_begin + g.chunk);
  const std::int64_t nsteps = (p_end - p_begin + G - 1) / G;

  // Lane `lane` copies rows wrow + VEC (lane % LPC) .. + VEC - 1 of columns lane / LPC + CPC i of a
  // stage (LPC lanes cover a column's 32 rows). Rows past the edge are zero and never stored.
  const int copy_row = VEC * (lane % LPC), copy_col = lane / LPC;
  const std::int64_t rows_left = g.rows - (wrow + copy_row);
  const int row_bytes = rows_left <= 0 ? 0 : static_cast<int>(rows_left >= VEC ? VEC : rows_left) * int(sizeof(T));
  const T* a_rows = g.a + (row_bytes > 0 ? wrow + copy_row : 0);
  auto issue = [&](std::int64_t step, int slot) {
    if (step >= nsteps) return;
    const std::int64_t p0 = p_begin + step * G;
    T* dst = ring + slot * STAGE + copy_row;
#pragma unroll
    for (int i = 0; i < COPIES; ++i) {
      const int c = copy_col + CPC * i;
      const bool ok = p0 + c < p_end && row_bytes > 0;
      copy_vector(reinterpret_cast<V*>(dst + c * PITCH), ok ? a_rows + (p0 + c) * g.lda : g.a, ok ? row_bytes : 0,
                  g.a);
    }
  };

  double acc[NT][NR][2];
#pragma unroll
  for (int m = 0; m < NT; ++m)
#pragma unroll
    for (int n = 0; n < NR; ++n) acc[m][n][0] = acc[m][n][1] = 0.0;

  fill_b<T, KC, T2, true, LDB>(bt, g, p_begin, p_end, j0, tid, t1);
  auto fill_chunk = [&](std::int64_t c) {
    const std::int64_t p0 = p_begin + c * KC;
    if (p0 < p_end) fill_b<T, KC, T2, true, LDB>(bt + (c & 1) * T2 * LDB, g, p0, p_end, j0, tid, t1);
  };
  run_stages<S, SPC, true>(nsteps, issue, fill_chunk, [&](int slot, int kstep, std::int64_t chunk) {
    const T* a_s = ring + slot * STAGE + VEC * gq;
    const T* b_s = bt + (chunk & 1) * T2 * LDB + gq * LDB + kstep * G + 2 * tq;
#pragma unroll
    for (int u = 0; u < G / 8; ++u) {
      double bf[NT][2];  // B^T(column 8m + g, inner 8u + 2t + s)
#pragma unroll
      for (int m = 0; m < NT; ++m) {
        const float2 b2 = *reinterpret_cast<const float2*>(b_s + 8 * m * LDB + 8 * u);
        bf[m][0] = b2.x;
        bf[m][1] = b2.y;
      }
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        // A(row 4g + n, inner 8u + 2t + s) for n-tile n
        const V v = *reinterpret_cast<const V*>(a_s + (8 * u + 2 * tq + s) * PITCH);
        const double af[NR] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int m = 0; m < NT; ++m)
#pragma unroll
          for (int n = 0; n < NR; ++n) mma_f64(acc[m][n], bf[m][s], af[n]);
      }
    }
  });

  // Lane (g, t) holds C(rows row_of(n, 2t), row_of(n, 2t + 1); column 8m + g).
#pragma unroll
  for (int m = 0; m < NT; ++m) {
    const std::int64_t j = j0 + 8 * m + gq;
    if (j >= g.cols) continue;
#pragma unroll
    for (int n = 0; n < NR; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const std::int64_t i = wrow + Cfg::row_of(n, 2 * tq + h);
        if (i >= g.rows) continue;
        store_result(g, static_cast<int>(blockIdx.y), i, j, static_cast<float>(acc[m][n][h]));
      }
  }
}

}  // namespace skinny::gemm::detail::tsm2_device
