// TSM2 for column-major A on the tensor cores: C = alpha * A * B + beta * C, a trial candidate beside
// the FFMA kernel (tsm2.cu) for 3..16 columns (kMinCmMmaCols, kMaxCmMmaCols), in two kinds of arithmetic:
//  * CmMath::dmma: DMMA (mma.m8n8k4 in double), 8 or 16 columns per pass; float A is converted to
//    double. Exact products (float A), double sums.
//  * CmMath::tf32x3 (float A): 3xTF32 on mma.m16n8k8, 16 columns per pass (fewer are zero rows of
//    the tile): each element of A split into TF32 halves (tensor_core.cuh), B split once per chunk
//    into shared memory; the error is that of float arithmetic.
//
// Why (measured on the H100, bench/results/h100/2026-11-23_cm-dmma/steps and …/2026-11-23_cm-tf32/steps):
// at k = 8 and 16 the FFMA kernel spends k multiply-adds per element of A and is issue-bound at 8-12
// warps per SM (ncu: 50 % issue-active). Here an element of A costs a quarter of a 16-byte shared load
// plus, in DMMA, one conversion to double and, per 8 columns, a quarter of a DMMA issue per lane; in
// 3xTF32 five integer and float operations (the split) and 3/64 of an mma issue for all 16 columns.
// Three things held both kernels back and were mended: a test per copy in the copy loop (the
// instructions of the whole stage's copies now run without one), B^T fragments that needed register
// moves (now read in register order), and copies that straddled 128-byte lines of shared memory (see
// CmMmaCfg::PITCH): together they took 3xTF32 at n = 10240, k = 16 from 73 to 89 % of the ceiling,
// and they made DMMA worth running on double A (k = 16: 93-96 % against the FFMA kernel's 87-93 %,
// where a first DMMA kernel for double A, before these changes, had been slower than the FFMA one).
// The trial keeps the fastest of these and the FFMA kernel. Measured and not kept: 64 rows per warp,
// an integer float-to-double conversion in place of F2F, and DMMA's two k4 steps of a pair in two
// sets of accumulators (as rm_mma_kernel.cuh does; here double k = 16 moved within run-to-run noise).
//
// C^T (cols x rows) = B^T (cols x inner) * A^T (inner x rows): B^T is the row-major A operand of the
// mma, A^T its column-major B operand. In DMMA (m8n8k4) lane (g, t) = (lane / 4, lane % 4) holds
// B^T(g, t) and A^T(t, g) and accumulates C^T(g, 2t) and C^T(g, 2t + 1); in TF32 (m16n8k8) it holds
// B^T(g or g + 8, t or t + 4) and A^T(t or t + 4, g) and accumulates C^T(g or g + 8, 2t or 2t + 1). Any
// bijection of rows onto an n-tile's 8 positions, and of inner indices onto a k-step's, gives the
// same sums, so both are chosen for 16-byte reads:
//  * rows: a warp owns 128 bytes of rows, VEC n-tiles (VEC = 4 floats or 2 doubles per 16 bytes);
//    position q of n-tile n is row VEC q + n, so lane (g, t) finds its VEC rows as one vector at row
//    VEC g.
//  * inner: within each 8 inner indices, lane t takes indices 2t and 2t + 1 (DMMA: one per k4 step of
//    a pair; TF32: positions t and t + 4 of the k8 step), so a lane reads its two B^T values of a
//    column as one 2-vector (DMMA) or, with their TF32 halves beside them, one float4 (TF32).
// A is streamed through a cp.async ring per block (stage: 16 columns of the block's rows), each warp's rows
// of a column as one aligned 128-byte line with its 16-byte pieces permuted so that the fragment reads are
// conflict-free (CmMmaCfg::piece); B^T rows are padded for the same reason. The block's threads copy a
// stage together, a warp instruction 512 contiguous bytes of a column (t1 >= 128), and a block barrier per
// stage publishes it. (A ring per warp, each warp copying its own 128 bytes of 4 columns per instruction
// with a __syncwarp per stage, read A more slowly: double K-means shape with DMMA 95.4-96.7 % of the read
// ceiling against 96.2-96.9 %; 3xTF32 float n = 10240 k = 16 91.2-91.6 against 91.8-92.2 %, n = 20480
// 96.0-96.4 against 96.7-97.1 %; H100, bench/results/h100/2026-11-24_dmma-block-copies/steps/04.) B^T
// chunks are double buffered and filled with the stage that starts the previous chunk (one __syncthreads
// per chunk), as in the FFMA kernel. In 3xTF32 each thread copies its elements of a chunk raw (cp.async)
// two chunks ahead and splits them into the shared buffer just before the chunk's block barrier, which
// publishes them: the split costs no barrier of its own, and the first chunks of B travel with the first
// stage of A. (Splitting chunk 0 before the first stage of A was queued had cost a wait on memory at every
// block's start: float n = 10240 k = 16 91.2-92.5 % of the read ceiling against 92.2-92.4 % now, k = 8
// 92.6-93.4 against 93.2-93.9 %, H100, bench/results/h100/2026-11-24_vector-reduce/steps/08.)
// Included only by tsm2.cu.
#pragma once

#include "../tensor_core.cuh"
#include "tsm2_device.cuh"

#include <cstdint>
#include <type_traits>

namespace skinny::gemm::detail::tsm2_device {

enum class CmMath { dmma, tf32x3 };

template <class T_, CmMath M, int NT>
struct CmMmaCfg {
  using T = T_;
  static constexpr bool kTf32 = M == CmMath::tf32x3;
  static_assert(!kTf32 || (NT == 2 && std::is_same_v<T, float>), "3xTF32: float, 16 columns per m16 tile");
  static constexpr int VEC = 16 / int(sizeof(T));  ///< rows per 16-byte copy and read
  using V = typename VecOf<T, VEC>::type;
  static constexpr int T2 = 8 * NT;       ///< columns of C per pass: NT m-tiles of 8
  static constexpr int NR = VEC;          ///< n-tiles of 8 rows per warp: a lane's rows are one vector
  static constexpr int ROWS_PER_WARP = 8 * NR;  ///< 128 bytes of each column
  static constexpr int G = 16;            ///< columns of A per stage (two k8 steps)
  /// Stages in the ring (S - 1 in flight) and inner elements per B^T chunk. 3xTF32: 3 stages
  /// and chunks of 32 were chosen when it ran 3 blocks of 256 threads per SM, which they fit and 4
  /// stages with chunks of 64 do not (H100, n = 10240: 85-87 % of the read ceiling against 82-84 %);
  /// it now runs 2 (see the kernel's launch bounds), where both fit, and 3 stages with chunks of 32
  /// still win (4 and 64: n = 10240 87-89 % against 91 %, n = 20480 94-96 % against 96-97 %).
  static constexpr int S = kTf32 ? 3 : 4;
  /// Most threads per block (the kernel's launch bound). At t1 = 512 a block reads 2 KB of each column
  /// per stage (256 rows of double, 512 of float). DMMA: up to 512, which on the H100 read double
  /// n = 20480, k = 16 without a split at 99.1-100 % of the read ceiling, where t1 <= 256 had needed 8
  /// splits for 95.4-96.2 % (bench/results/h100/2026-11-24_t1-512/steps). 3xTF32: 256, two blocks per SM
  /// (the kernel's comment); at 512 it was no faster anywhere (float n = 10240, k = 16: 0.1475 against
  /// 0.1469 ms in the trial).
  static constexpr int MAX_T1 = kTf32 ? 256 : 512;
  /// A stage holds each column's rows as 128 aligned bytes, its eight 16-byte pieces permuted:
  /// piece q of column c sits at q ^ swizzle(c). Aligned lines matter to the copies: padded columns
  /// (a pitch of 36 floats) made the cp.async writes straddle 128-byte lines of shared memory, and the
  /// H100 split them into partial requests to L2 that fetched about half the sectors twice (ncu:
  /// 2.5x the L2 requests of the FFMA kernel for the same bytes of A). The permutation keeps the
  /// fragment reads conflict-free: a quarter warp reads pieces g (two of them) of columns 8u + 2t + s
  /// (four t), and g ^ 2t are eight distinct pieces.
  __host__ __device__ static constexpr int swizzle(int c) { return ((c >> 1) & 3) << 1; }
  /// Offset of rows VEC q .. VEC q + VEC - 1 (of the block's) of column c in a stage whose columns are
  /// `pitch` elements apart (the block's rows: a multiple of 128 bytes). The swizzle permutes pieces
  /// within a 128-byte line only.
  __host__ __device__ static constexpr int piece(int c, int q, int pitch) { return c * pitch + VEC * (q ^ swizzle(c)); }
  static_assert(swizzle(8 + 2 * 3 + 1) == 2 * 3 && swizzle(2 * 2) == 2 * 2, "columns 8u + 2t + s swizzle by 2t");
  static constexpr int KC = kTf32 ? 32 : 64;
  static constexpr int SPC = KC / G;      ///< stages per chunk
  /// Padded row of the B^T tile. DMMA: a row per column of B, KC + 8 elements, so a half warp's float2
  /// reads (rows g in 0..3, offsets 2t) cover the 32 banks once, and a quarter warp's double2 reads
  /// (rows g in 0..1) fall in distinct banks. TF32: a row per pair of columns g and g + 8 holding, per
  /// pair of inner indices (2i, 2i + 1), the high halves of (g, 2i), (g + 8, 2i), (g, 2i + 1),
  /// (g + 8, 2i + 1) (the mma's A fragment in register order) and then the low halves: 4 KC floats
  /// + 4, so a quarter warp's float4 reads (rows g in 0..1, offsets 8t) fall in distinct banks.
  static constexpr int LDB = kTf32 ? 4 * KC + 4 : KC + 8;
  static_assert(SPC >= S - 1 && (SPC & (SPC - 1)) == 0, "a chunk's B must arrive within S - 1 stages");
  static_assert(G % 8 == 0, "k8 steps");
  /// Columns the block's threads cover with one 16-byte copy each: a column holds t1 / 4 pieces.
  static constexpr int COLUMNS_PER_COPY = 32 * VEC / ROWS_PER_WARP;
  static constexpr int COPIES = G / COLUMNS_PER_COPY;  ///< 16-byte copies per thread per stage
  static constexpr int B_BUF = (kTf32 ? T2 / 2 : T2) * LDB;  ///< elements of one B^T buffer
  static constexpr int B_RAW = kTf32 ? T2 * KC : 0;  ///< elements of one raw B^T chunk (3xTF32)
  __host__ __device__ static std::size_t ring_bytes(int t1) {
    return std::size_t(S) * G * rows_per_block(t1) * sizeof(T);
  }
  static std::size_t smem(int t1) { return ring_bytes(t1) + sizeof(T) * 2 * (B_BUF + B_RAW); }
  __host__ __device__ static int rows_per_block(int t1) { return t1 / 32 * ROWS_PER_WARP; }
  static int loads_in_flight() { return (S - 1) * COPIES; }
  static int bytes_in_flight_per_thread() { return (S - 1) * COPIES * 16; }
  /// The piece (rows VEC q .. VEC q + VEC - 1 of the block's) and the first column thread `tid` copies in
  /// a stage, then every COLUMNS_PER_COPY-th column: t1 / COLUMNS_PER_COPY threads cover a column's rows.
  __host__ __device__ static int copy_piece(int tid, int t1) { return tid % (t1 / COLUMNS_PER_COPY); }
  __host__ __device__ static int copy_column(int tid, int t1) { return tid / (t1 / COLUMNS_PER_COPY); }
  /// Offset in a stage of lane (g, t) of warp `warp`: its warp's piece g of column 2t, whose swizzle is
  /// 2t; the fragment reads add 8u + s columns.
  __host__ __device__ static constexpr int a_lane(int warp, int g, int t, int pitch) {
    return warp * ROWS_PER_WARP + VEC * (g ^ (2 * t)) + 2 * t * pitch;
  }
  /// Row (0 .. ROWS_PER_WARP - 1 of the warp's) at position q of n-tile n.
  __host__ __device__ static constexpr int row_of(int n, int q) { return VEC * q + n; }
  /// Offset of B^T(j, pp) (pp within the chunk) in a 3xTF32 buffer; its low TF32 half is 4 further.
  __host__ __device__ static constexpr int tf32_slot(int j, int pp) {
    return (j & 7) * LDB + 8 * (pp >> 1) + 2 * (pp & 1) + (j >> 3);
  }
};

/// 3xTF32: queues thread `tid`'s raw copies of the B^T chunk at inner index p0 (elements tid, tid + t1,
/// .. in fill_b's order, b_chunk_element), zero outside inner x cols, to raw[idx].
template <class Cfg>
__device__ __forceinline__ void copy_raw_b(float* raw, const Args<float>& g, std::int64_t p0, std::int64_t p_end,
                                           std::int64_t j0, int tid, int t1) {
  for (int idx = tid; idx < Cfg::T2 * Cfg::KC; idx += t1) {
    int j, pp;
    b_chunk_element<Cfg::KC, Cfg::T2>(idx, g.b_cs == 1, j, pp);
    const std::int64_t p = p0 + pp, jc = j0 + j;
    const bool ok = p < p_end && jc < g.cols;
    cp_async<4>(raw + idx, ok ? g.b + p * g.b_rs + jc * g.b_cs : g.b, ok ? 4 : 0);
  }
}

/// Splits the same elements, once this thread's copies have landed, into a B^T buffer.
template <class Cfg>
__device__ __forceinline__ void split_raw_b(float* buf, const float* raw, const Args<float>& g, int tid, int t1) {
  for (int idx = tid; idx < Cfg::T2 * Cfg::KC; idx += t1) {
    int j, pp;
    b_chunk_element<Cfg::KC, Cfg::T2>(idx, g.b_cs == 1, j, pp);
    const Tf32Pair s = split_tf32(raw[idx]);
    const int slot = Cfg::tf32_slot(j, pp);
    buf[slot] = __uint_as_float(s.hi);
    buf[slot + 4] = __uint_as_float(s.lo);
  }
}

/// 3xTF32: two blocks of 256 threads per SM (at most 128 registers). At three (at most 85 registers,
/// which its shared memory allows) ptxas ran the n-tiles' mma chains one after another to save
/// registers; with room for them side by side (99 registers) the H100 read at 91 % of the ceiling
/// instead of 86-88 % at n = 10240, 96-97 % instead of 92-95 % at n = 20480, 99 % instead of 94-96 %
/// on the column-major K-means shape (bench/results/h100/2026-11-24_launch-bounds/steps).
template <class T, CmMath M, int NT>
__global__ void __launch_bounds__(CmMmaCfg<T, M, NT>::MAX_T1, M == CmMath::tf32x3 ? 2 : 1)
    tsm2_cm_mma_kernel(const Args<T> g) {
  using Cfg = CmMmaCfg<T, M, NT>;
  using V = typename Cfg::V;
  constexpr int VEC = Cfg::VEC, G = Cfg::G, S = Cfg::S, KC = Cfg::KC, SPC = Cfg::SPC, LDB = Cfg::LDB, T2 = Cfg::T2,
                NR = Cfg::NR, COPIES = Cfg::COPIES, CPC = Cfg::COLUMNS_PER_COPY, B_BUF = Cfg::B_BUF,
                B_RAW = Cfg::B_RAW;
  extern __shared__ __align__(16) unsigned char smem[];
  const int t1 = blockDim.x, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
  const int pitch = Cfg::rows_per_block(t1), stage = G * pitch;
  T* ring = reinterpret_cast<T*>(smem);                      // [S][G][pitch], swizzled
  T* bt = reinterpret_cast<T*>(smem + Cfg::ring_bytes(t1));  // [2][B_BUF]
  T* raw = bt + 2 * B_BUF;                                   // 3xTF32: [2][B_RAW]

  const int pass = static_cast<int>(blockIdx.x % static_cast<unsigned>(g.passes));
  const std::int64_t rg = blockIdx.x / static_cast<unsigned>(g.passes);
  const std::int64_t brow = rg * Cfg::rows_per_block(t1);
  const std::int64_t wrow = brow + static_cast<std::int64_t>(warp) * Cfg::ROWS_PER_WARP;
  const std::int64_t j0 = static_cast<std::int64_t>(pass) * T2;
  const std::int64_t p_begin = static_cast<std::int64_t>(blockIdx.y) * g.chunk;
  const std::int64_t p_end = min(g.inner, p_begin + g.chunk);
  const std::int64_t nsteps = (p_end - p_begin + G - 1) / G;

  // Thread `tid` copies rows brow + copy_row .. + VEC - 1 of columns copy_col + CPC i of a stage. Rows past
  // the edge are zero and never stored.
  const int copy_row = VEC * Cfg::copy_piece(tid, t1), copy_col = Cfg::copy_column(tid, t1);
  const std::int64_t copy_first = brow + copy_row;
  const std::int64_t rows_left = g.rows - copy_first;
  const int row_bytes = rows_left <= 0 ? 0 : static_cast<int>(rows_left >= VEC ? VEC : rows_left) * int(sizeof(T));
  const T* a_rows = g.a + (row_bytes > 0 ? copy_first : 0);
  // The common case, whole rows and a whole stage, runs without a test per copy from a source pointer
  // carried from stage to stage (the compiler would otherwise recompute the addresses every stage).
  const int whole_rows = kept(row_bytes == VEC * int(sizeof(T)));
  const std::int64_t copy_stride = CPC * g.lda;
  const T* next_src = a_rows + (p_begin + copy_col) * g.lda;
  // Offsets of this thread's pieces in a stage: columns c and c + 2 CPC share a swizzle.
  static_assert(COPIES % 2 == 0 && Cfg::swizzle(2 * CPC) == 0, "two offsets serve all copies");
  const int dst_offset[2] = {kept(Cfg::piece(copy_col, copy_row / VEC, pitch)),
                             kept(Cfg::piece(copy_col + CPC, copy_row / VEC, pitch))};
  auto dst_of = [&](int i) { return dst_offset[i % 2] + i / 2 * 2 * CPC * pitch; };
  auto issue = [&](std::int64_t step, int slot) {
    if (step >= nsteps) return;
    const std::int64_t p0 = p_begin + step * G;
    const T* src = next_src;
    next_src += G * g.lda;
    if (whole_rows && p0 + G <= p_end) {
#pragma unroll
      for (int i = 0; i < COPIES; ++i)
        cp_async<16>(ring + slot * stage + dst_of(i), src + i * copy_stride, 16);
      return;
    }
#pragma unroll
    for (int i = 0; i < COPIES; ++i) {
      const int c = copy_col + CPC * i;
      const bool ok = p0 + c < p_end && row_bytes > 0;
      copy_vector(reinterpret_cast<V*>(ring + slot * stage + dst_of(i)), ok ? a_rows + (p0 + c) * g.lda : g.a,
                  ok ? row_bytes : 0, g.a);
    }
  };

  // acc[m][n][h]: C(row wrow + row_of(n, 2t + h), column j0 + 8m + g).
  using Acc = std::conditional_t<Cfg::kTf32, float, double>;
  Acc acc[NT][NR][2];
#pragma unroll
  for (int m = 0; m < NT; ++m)
#pragma unroll
    for (int n = 0; n < NR; ++n) acc[m][n][0] = acc[m][n][1] = Acc(0);

  // B^T chunk c goes to buffer c & 1. 3xTF32: chunks 0 and 1 are copied raw with stage 0 of A, not
  // before it, so that A starts streaming one wait on memory sooner; at the start of chunk c, before its
  // barrier, each thread splits its own raw elements of chunk c into buffer c & 1 (its last reader,
  // chunk c - 2, ended before the barrier of chunk c - 1); after the barrier, chunk c + 2 is copied raw
  // into the buffer chunk c came in. Chunk c went raw with stage SPC (c - 2) + S - 1, which run_stages
  // has waited for by stage SPC c.
  static_assert(S - 1 <= 2 * SPC, "a raw B chunk lands within two chunks");
  if constexpr (Cfg::kTf32) {
    copy_raw_b<Cfg>(raw, g, p_begin, p_end, j0, tid, t1);
    if (p_begin + KC < p_end) copy_raw_b<Cfg>(raw + B_RAW, g, p_begin + KC, p_end, j0, tid, t1);
  } else {
    fill_b<T, KC, T2, true, LDB>(bt, g, p_begin, p_end, j0, tid, t1);
  }
  auto chunk_start = [&](std::int64_t c) {
    if constexpr (Cfg::kTf32)
      if (p_begin + c * KC < p_end) split_raw_b<Cfg>(bt + (c & 1) * B_BUF, raw + (c & 1) * B_RAW, g, tid, t1);
  };
  auto fill_chunk = [&](std::int64_t c) {
    if constexpr (Cfg::kTf32) {
      const std::int64_t p1 = p_begin + (c + 1) * KC;
      if (p1 < p_end) copy_raw_b<Cfg>(raw + ((c + 1) & 1) * B_RAW, g, p1, p_end, j0, tid, t1);
    } else {
      const std::int64_t p0 = p_begin + c * KC;
      if (p0 < p_end) fill_b<T, KC, T2, true, LDB>(bt + (c & 1) * B_BUF, g, p0, p_end, j0, tid, t1);
    }
  };
  // This lane's offsets in a stage (Cfg::a_lane) and in a B^T buffer (row g, inner 2t).
  const int a_lane = kept(Cfg::a_lane(warp, gq, tq, pitch));
  const int b_lane = kept(gq * LDB + (Cfg::kTf32 ? 8 : 2) * tq);
  run_stages<S, SPC, StageSync::block>(nsteps, issue, chunk_start, fill_chunk,
                                       [&](int slot, int kstep, std::int64_t chunk) {
    const T* a_s = ring + slot * stage + a_lane;
    if constexpr (Cfg::kTf32) {
      // One k-group per stage into a fresh accumulator (the tensor cores add by truncation), then
      // round-to-nearest adds into the running sums.
      const T* b_s = bt + (chunk & 1) * B_BUF + b_lane + 4 * kstep * G;
      float d[NR][4];
#pragma unroll
      for (int n = 0; n < NR; ++n) d[n][0] = d[n][1] = d[n][2] = d[n][3] = 0.f;
#pragma unroll
      for (int u = 0; u < G / 8; ++u) {
        // The A fragment: B^T(column g, g + 8; inner 8u + 2t, 8u + 2t + 1), high and low halves.
        const float4 hi = *reinterpret_cast<const float4*>(b_s + 32 * u);
        const float4 lo = *reinterpret_cast<const float4*>(b_s + 32 * u + 4);
        const Tf32Pair a0{__float_as_uint(hi.x), __float_as_uint(lo.x)};
        const Tf32Pair a1{__float_as_uint(hi.y), __float_as_uint(lo.y)};
        const Tf32Pair a2{__float_as_uint(hi.z), __float_as_uint(lo.z)};
        const Tf32Pair a3{__float_as_uint(hi.w), __float_as_uint(lo.w)};
        // A(row 4g + n, inner 8u + 2t) and (.., 8u + 2t + 1) for n-tile n
        Tf32Pair x0[NR], x1[NR];
        split_tf32(*reinterpret_cast<const V*>(a_s + 8 * u * pitch), x0);
        split_tf32(*reinterpret_cast<const V*>(a_s + (8 * u + 1) * pitch), x1);
        // Product by product across the n-tiles' independent chains (tensor_core.cuh, k_group_3xtf32_step).
#pragma unroll
        for (int p = 0; p < 3; ++p)
#pragma unroll
          for (int n = 0; n < NR; ++n)
            mma_3xtf32_product(p, d[n], a0, a1, a2, a3, x0[n].hi, x1[n].hi, x0[n].lo, x1[n].lo);
      }
#pragma unroll
      for (int n = 0; n < NR; ++n) {
        acc[0][n][0] += d[n][0];
        acc[0][n][1] += d[n][1];
        acc[1][n][0] += d[n][2];
        acc[1][n][1] += d[n][3];
      }
    } else {
      const T* b_s = bt + (chunk & 1) * B_BUF + b_lane + kstep * G;
#pragma unroll
      for (int u = 0; u < G / 8; ++u) {
        double bf[NT][2];  // B^T(column 8m + g, inner 8u + 2t + s)
#pragma unroll
        for (int m = 0; m < NT; ++m) {
          const auto b2 = *reinterpret_cast<const typename VecOf<T, 2>::type*>(b_s + 8 * m * LDB + 8 * u);
          bf[m][0] = b2.x;
          bf[m][1] = b2.y;
        }
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          // A(row VEC g + n, inner 8u + 2t + s) for n-tile n
          const V v = *reinterpret_cast<const V*>(a_s + (8 * u + s) * pitch);
          double af[NR];
#pragma unroll
          for (int n = 0; n < NR; ++n) af[n] = elem<T>(v, n);
#pragma unroll
          for (int m = 0; m < NT; ++m)
#pragma unroll
            for (int n = 0; n < NR; ++n) mma_f64(acc[m][n], bf[m][s], af[n]);
        }
      }
    }
  });

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
        store_result(g, static_cast<int>(blockIdx.y), i, j, static_cast<T>(acc[m][n][h]));
      }
  }
}

}  // namespace skinny::gemm::detail::tsm2_device
