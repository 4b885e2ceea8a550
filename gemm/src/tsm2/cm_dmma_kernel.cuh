// TSM2 for column-major A in double on the tensor cores (DMMA): C = alpha * A * B + beta * C with 8 or
// 16 columns per pass. UNTESTED DRAFT (written without a GPU): not yet a trial candidate by default;
// SKINNY_TSM2_CM_KERNEL=dmma makes it the only column-major double kernel for k > 4.
//
// Why: at k = 16 the FFMA kernel spends 16 double FMAs per element of A and is issue-bound at 8-12 warps
// per SM (92-93 % of the read ceiling at n >= 20480, 4 % behind cuBLAS at 30720, which uses DMMA). Here
// an element of A costs a quarter of a shared-memory load and two DMMA issues per lane.
//
// C^T (cols x rows) = B^T (cols x inner) * A^T (inner x rows), one mma.m8n8k4 per (8 columns, 8 rows,
// 4 inner): B^T is the row-major A operand (lane (g, t) = (lane / 4, lane % 4) holds B^T(g, t)), A^T the
// column-major B operand (lane (g, t) holds A(row g, inner t)), and lane (g, t) accumulates C(rows 2t and
// 2t + 1, column g). DMMA rounds like double FMAs: no split, no extra adds.
//
// A warp owns 32 rows and streams them through its own cp.async ring (each stage: G columns x 32 rows,
// 16 lanes per column, 2 rows per lane); a warp reads only the rows it copied, so a stage needs a
// __syncwarp, not a block barrier. Column pitch 36 doubles: the half-warp's fragment reads (g in 0..3,
// t in 0..3) fall in distinct banks. B^T chunks are double buffered in shared memory, filled with the
// stage that starts the previous chunk (one __syncthreads per chunk), as in the FFMA kernels.
// Included only by tsm2.cu.
#pragma once

#include "../tensor_core.cuh"
#include "tsm2_device.cuh"

#include <cstdint>

namespace skinny::gemm::detail::tsm2_device {

template <int NT>
struct CmDmmaCfg {
  using T = double;
  using V = double2;
  static constexpr int T2 = 8 * NT;       ///< columns of C per pass: NT m-tiles of 8
  static constexpr int VEC = 2;           ///< rows per 16-byte copy
  static constexpr int ROWS_PER_WARP = 32;
  static constexpr int NR = ROWS_PER_WARP / 8;  ///< n-tiles of 8 rows per warp
  static constexpr int G = 8;             ///< columns of A per stage (two k4 steps)
  static constexpr int S = 4;             ///< stages in each warp's ring (S - 1 in flight)
  static constexpr int PITCH = ROWS_PER_WARP + 4;  ///< doubles per column of a stage (bank spread)
  static constexpr int KC = 64;           ///< inner elements per B^T chunk
  static constexpr int SPC = KC / G;      ///< stages per chunk
  static constexpr int LDB = KC + 4;      ///< padded row of the B^T tile (bank spread for g, t)
  static_assert(SPC >= S - 1 && (SPC & (SPC - 1)) == 0, "a chunk's B must arrive within S - 1 stages");
  static constexpr int STAGE = G * PITCH;  ///< doubles of one warp's stage
  __host__ __device__ static std::size_t ring_bytes(int t1) { return std::size_t(t1 / 32) * S * STAGE * sizeof(T); }
  static std::size_t smem(int t1) { return ring_bytes(t1) + sizeof(T) * 2 * T2 * LDB; }
  __host__ __device__ static int rows_per_block(int t1) { return t1 / 32 * ROWS_PER_WARP; }
  /// 16-byte copies per lane per stage: G columns x 32 rows = G x 16 copies over 32 lanes.
  static constexpr int COPIES = G * (ROWS_PER_WARP / VEC) / 32;
  static int loads_in_flight() { return (S - 1) * COPIES; }
  static int bytes_in_flight_per_thread() { return (S - 1) * COPIES * 16; }
};

template <int NT>
__global__ void __launch_bounds__(256) tsm2_cm_dmma_kernel(const Args<double> g) {
  using Cfg = CmDmmaCfg<NT>;
  using T = double;
  using V = double2;
  constexpr int G = Cfg::G, S = Cfg::S, PITCH = Cfg::PITCH, KC = Cfg::KC, SPC = Cfg::SPC, LDB = Cfg::LDB,
                T2 = Cfg::T2, NR = Cfg::NR, STAGE = Cfg::STAGE, COPIES = Cfg::COPIES;
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

  // Lane `lane` copies rows wrow + 2 (lane % 16) .. + 1 of columns c = lane / 16 + 2 i of a stage.
  const int copy_row = 2 * (lane & 15), copy_col = lane >> 4;
  const std::int64_t rows_left = g.rows - (wrow + copy_row);
  const int row_bytes = rows_left <= 0 ? 0 : (rows_left >= 2 ? 2 : 1) * int(sizeof(T));
  const T* a_rows = g.a + (row_bytes > 0 ? wrow + copy_row : 0);
  auto issue = [&](std::int64_t step, int slot) {
    if (step >= nsteps) return;
    const std::int64_t p0 = p_begin + step * G;
    T* dst = ring + slot * STAGE + copy_row;
#pragma unroll
    for (int i = 0; i < COPIES; ++i) {
      const int c = copy_col + 2 * i;
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
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    issue(s, s);
    cp_async_commit();
  }

  int slot = 0, islot = S - 1;
  for (std::int64_t step = 0; step < nsteps; ++step) {
    cp_async_wait<S - 2>();  // this lane's copies of stage `step` (and the B^T chunk queued with it)
    const int kstep = static_cast<int>(step & (SPC - 1));
    const std::int64_t chunk = step / SPC;
    if (kstep == 0) {
      __syncthreads();  // everyone's B^T of this chunk is in; everyone is done with the other buffer
      const std::int64_t pn = p_begin + (chunk + 1) * KC;
      if (pn < p_end) fill_b<T, KC, T2, true, LDB>(bt + ((chunk + 1) & 1) * T2 * LDB, g, pn, p_end, j0, tid, t1);
    } else {
      __syncwarp();  // the other lanes' copies of this stage are in
    }
    issue(step + S - 1, islot);
    cp_async_commit();
    islot = islot + 1 == S ? 0 : islot + 1;

    const T* a_s = ring + slot * STAGE;
    const T* b_s = bt + (chunk & 1) * T2 * LDB + kstep * G;
#pragma unroll
    for (int k4 = 0; k4 < G; k4 += 4) {
      double af[NT], bf[NR];
#pragma unroll
      for (int m = 0; m < NT; ++m) af[m] = b_s[(8 * m + gq) * LDB + k4 + tq];
#pragma unroll
      for (int n = 0; n < NR; ++n) bf[n] = a_s[(k4 + tq) * PITCH + 8 * n + gq];
#pragma unroll
      for (int m = 0; m < NT; ++m)
#pragma unroll
        for (int n = 0; n < NR; ++n) mma_f64(acc[m][n], af[m], bf[n]);
    }
    __syncwarp();  // every lane is done with this slot before a lane refills it
    slot = slot + 1 == S ? 0 : slot + 1;
  }
  cp_async_wait<0>();

  // Lane (g, t) holds C(rows 8n + 2t, 8n + 2t + 1; column 8m + g) of the warp's rows.
#pragma unroll
  for (int m = 0; m < NT; ++m) {
    const std::int64_t j = j0 + 8 * m + gq;
    if (j >= g.cols) continue;
#pragma unroll
    for (int n = 0; n < NR; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const std::int64_t i = wrow + 8 * n + 2 * tq + h;
        if (i >= g.rows) continue;
        if (g.split == 1)
          store_c(g, i, j, acc[m][n][h]);
        else
          g.ws[(static_cast<std::int64_t>(blockIdx.y) * g.rows + i) * g.cols + j] = acc[m][n][h];
      }
  }
}

}  // namespace skinny::gemm::detail::tsm2_device
