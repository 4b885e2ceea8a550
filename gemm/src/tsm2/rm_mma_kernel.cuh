// TSM2 for row-major A on the tensor cores: C = alpha * A * B + beta * C with A row-major (K-means
// data, whose points are rows; the ABFT column checksums [e w]^T A of a column-major A).
//
// Why (measured on the H100): the FFMA kernel (tsm2.cu) needs 4 (float) / 2 (double) multiply-adds
// per byte of A at k = 16 and stalled at 84 % (float) / 81 % (double) of the read ceiling on the
// K-means shape, and its lane groups read 128 bytes of each of thousands of rows per stage, which DRAM
// serves less well than longer runs (a first tensor-core version with that access pattern was no
// faster; reading 256 bytes of each row per stage took double from 81 % to 96 %).
//  * float: mma.m16n8k8 on TF32 operands, three products per pair (3xTF32): with x_hi = tf32(x) and
//    x_lo = tf32(x - x_hi) (round to nearest), a*b ~ a_lo*b_hi + a_hi*b_lo + a_hi*b_hi; the dropped
//    a_lo*b_lo and the rounding of x_lo are each <= 2^-22 |ab|: the accuracy of float arithmetic.
//    B is split once per call (tsm2_b_image_kernel); A is split with integer operations (no
//    conversion instructions). The tensor cores add
//    with truncation, so each k-group's products go into a fresh accumulator that is then added to
//    the running sum by round-to-nearest float adds. (|x| within 2^-12 of FLT_MAX rounds to Inf.)
//  * double: mma.m8n8k4 in double (DMMA), one product per pair.
// The inner dimension may be visited in any order as long as A and B agree: lane (g, t) of a warp
// (g = lane / 4, t = lane % 4) takes the 16 bytes at offset t * VEC of each k-group of 4 * VEC inner
// elements of rows g and g + 8; element e of that vector is the mma's inner index t (float: of k8
// step e / 2, as index t for even e and t + 4 for odd e; double: of k4 step e). B^T sits in shared
// memory and each lane reads the matching 16 bytes of it.
//
// A warp owns 16 rows and streams 256 contiguous bytes of each per stage through its own cp.async
// ring in shared memory (32 lanes copy 2 rows per instruction); slots are swizzled by row parity so
// the fragment reads (rows g and g + 1 at the same offset in a quarter warp) hit different banks.
// B is laid out once per call as the image of each shared-memory buffer (tsm2_b_image_kernel), so a
// block fills a buffer with contiguous 16-byte copies (4-byte gathers of B, 24 per lane per chunk,
// had held float k = 16 at 60 %). B chunks are double buffered and filled in the same commit group as
// an A stage, so one barrier per chunk suffices; between barriers a warp only syncs itself.
// Included only by tsm2.cu.
#pragma once

#include "../tensor_core.cuh"
#include "tsm2_device.cuh"

#include <cstdint>
#include <type_traits>

namespace skinny::gemm::detail::tsm2_device {

template <class T, int NT>
struct RmMmaCfg {
  static constexpr int VEC = 16 / int(sizeof(T));
  using V = typename VecOf<T, VEC>::type;
  static constexpr int HALVES = std::is_same_v<T, float> ? 2 : 1;  ///< B as TF32 hi and lo (float)
  /// Sets of accumulators (mma_stage): double keeps even and odd k-groups apart, so that a DMMA does
  /// not wait on the one before it; float adds each k-group's fresh accumulator into one set.
  static constexpr int ACC_SETS = 3 - HALVES;
  static constexpr int T2 = 8 * NT;       ///< columns of C per pass: NT mma tiles of 8
  static constexpr int ROWS_PER_WARP = 16;  ///< lane (g, t) computes rows g and g + 8
  static constexpr int W = 256;           ///< bytes of each row per stage
  static constexpr int CHUNKS = W / 16;   ///< 16-byte pieces of each row per stage
  static constexpr int COPIES = ROWS_PER_WARP * CHUNKS / 32;  ///< cp.async per lane per stage
  static constexpr int KG = 4 * VEC;      ///< inner elements of a k-group: 4 lanes x 16 bytes
  static constexpr int U = CHUNKS / 4;    ///< k-groups per stage
  static constexpr int STEP = W / int(sizeof(T));  ///< inner elements per stage
  static constexpr int S = 4;             ///< stages in the ring (S - 1 in flight)
  static constexpr int SPC = S - 1;       ///< stages per B chunk: a chunk's B arrives within S - 1 stages
  static constexpr int KC = SPC * STEP;   ///< inner elements per B chunk
  /// Padded row of the B^T tile: a quarter warp reads rows g and g + 1 at 16-byte offsets t; 64 bytes
  /// of padding put them 16 banks apart (conflict-free).
  static constexpr int LDT = KC + 64 / int(sizeof(T));
  static constexpr int B_TILE = HALVES * T2 * LDT;  ///< elements of one B buffer: [HALVES][T2][LDT]
  /// Elements of the B image (tsm2_b_image_kernel): one B buffer per pass and chunk of KC.
  static std::int64_t image_elems(std::int64_t inner, int passes) {
    return std::int64_t(passes) * ((inner + KC - 1) / KC) * B_TILE;
  }
  __host__ __device__ static std::size_t a_ring_bytes(int t1) { return std::size_t(S) * (t1 / 32) * ROWS_PER_WARP * W; }
  static std::size_t smem(int t1) { return a_ring_bytes(t1) + sizeof(T) * 2 * B_TILE; }
  __host__ __device__ static int rows_per_block(int t1) { return t1 / 32 * ROWS_PER_WARP; }
  static int loads_in_flight() { return (S - 1) * COPIES; }
  static int bytes_in_flight_per_thread() { return (S - 1) * COPIES * 16; }
};

/// B laid out once per call as the shared-memory buffers the kernel reads, so that a block fills one
/// with contiguous 16-byte copies: image[pass][chunk] = [HALVES][T2][LDT], B^T of columns
/// pass * T2 .. and inner indices chunk * KC .., zero outside B and in the padding; float holds the
/// TF32 halves (hi, lo) of each element.
template <class T, int NT>
__global__ void __launch_bounds__(256) tsm2_b_image_kernel(const Args<T> g, T* image) {
  using Cfg = RmMmaCfg<T, NT>;
  constexpr int T2 = Cfg::T2, LDT = Cfg::LDT, KC = Cfg::KC, B_TILE = Cfg::B_TILE;
  const std::int64_t nchunks = (g.inner + KC - 1) / KC;
  const std::int64_t total = std::int64_t(g.passes) * nchunks * B_TILE;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += stride) {
    const std::int64_t tile = idx / B_TILE;  // pass * nchunks + chunk
    const int in_tile = static_cast<int>(idx - tile * B_TILE);
    const int half = in_tile / (T2 * LDT), j = in_tile / LDT % T2, pp = in_tile % LDT;
    const std::int64_t pass = tile / nchunks, p = (tile - pass * nchunks) * KC + pp, col = pass * T2 + j;
    T v = T(0);
    if (pp < KC && p < g.inner && col < g.cols) {
      v = g.b[p * g.b_rs + col * g.b_cs];
      if constexpr (Cfg::HALVES == 2) {
        const Tf32Pair s = split_tf32(v);
        v = __uint_as_float(half == 0 ? s.hi : s.lo);
      }
    }
    image[idx] = v;
  }
}

/// acc[0][s][n] += the products of a stage's U k-groups: a[u][s] holds this lane's 4 floats of row 8s + g
/// of k-group u, bhi[u][n] and blo[u][n] the TF32 halves of its 4 floats of column 8n + g of B. Rows g
/// and g + 8 form one m16 tile. Each (k-group, n-tile) pair is a chain of mma instructions into its own
/// fresh accumulator, written step by step across the chains (k_group_3xtf32_step); ptxas keeps them
/// overlapped only with the registers the kernel's launch bounds give it (see there). The sums and
/// their order are those of k-group by k-group.
template <int U, int NT>
__device__ __forceinline__ void mma_stage(float (&acc)[1][2][NT][2], const float4 (&a)[U][2],
                                          const float4 (&bhi)[U][NT], const float4 (&blo)[U][NT]) {
  Tf32Pair x[U][2][4];  // [k-group][row g, g + 8][element]
#pragma unroll
  for (int u = 0; u < U; ++u) {
    split_tf32(a[u][0], x[u][0]);
    split_tf32(a[u][1], x[u][1]);
  }
  float d[U][NT][4];
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int n = 0; n < NT; ++n) d[u][n][0] = d[u][n][1] = d[u][n][2] = d[u][n][3] = 0.f;
#pragma unroll
  for (int i = 0; i < kKGroupSteps; ++i)
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int n = 0; n < NT; ++n) k_group_3xtf32_step(i, d[u][n], x[u][0], x[u][1], bhi[u][n], blo[u][n]);
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      acc[0][0][n][0] += d[u][n][0];
      acc[0][0][n][1] += d[u][n][1];
      acc[0][1][n][0] += d[u][n][2];
      acc[0][1][n][1] += d[u][n][3];
    }
}

/// The same in double: rows g and g + 8 are two m8 tiles, k-group u goes to accumulator set u % 2;
/// blo is unused.
template <int U, int NT>
__device__ __forceinline__ void mma_stage(double (&acc)[2][2][NT][2], const double2 (&a)[U][2],
                                          const double2 (&b)[U][NT], const double2 (&)[U][NT]) {
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int s = 0; s < 2; ++s)
#pragma unroll
        for (int n = 0; n < NT; ++n) mma_f64(acc[u % 2][s][n], elem<double>(a[u][s], e), elem<double>(b[u][n], e));
}

/// __launch_bounds__(256, 1): shared memory allows one block of 256 threads per SM anyway, and the
/// promise lets ptxas spend registers on interleaving the mma chains (mma_stage). Without it ptxas kept
/// 69 registers by running each chain's dependent mma back to back, whatever the source order: on the
/// H100 (K-means shape, float) 52 % of the stall samples were "wait" and the kernel read at 83 % of the
/// ceiling; with it (192 registers), copies without a test per copy and run_stages counting its
/// chunks instead of dividing (645 M -> 488 M instructions), 96 %; double went from 95 % to 98 %.
template <class T, int NT>
__global__ void __launch_bounds__(256, 1) tsm2_rm_mma_kernel(const Args<T> g) {
  using Cfg = RmMmaCfg<T, NT>;
  using V = typename Cfg::V;
  constexpr int VEC = Cfg::VEC, CHUNKS = Cfg::CHUNKS, COPIES = Cfg::COPIES, KG = Cfg::KG, U = Cfg::U,
                STEP = Cfg::STEP, S = Cfg::S, SPC = Cfg::SPC, KC = Cfg::KC, LDT = Cfg::LDT, T2 = Cfg::T2,
                B_TILE = Cfg::B_TILE;
  constexpr int WARP_STAGE = Cfg::ROWS_PER_WARP * CHUNKS;  // 16-byte slots of one warp's stage
  extern __shared__ __align__(16) unsigned char smem[];
  const int t1 = blockDim.x, tid = threadIdx.x;
  const int warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
  V* as = reinterpret_cast<V*>(smem) + warp * S * WARP_STAGE;  // this warp's ring [S][16 rows][CHUNKS]
  T* bt = reinterpret_cast<T*>(smem + Cfg::a_ring_bytes(t1));  // [2][HALVES][T2][LDT]

  const int pass = static_cast<int>(blockIdx.x % static_cast<unsigned>(g.passes));
  const std::int64_t rg = blockIdx.x / static_cast<unsigned>(g.passes);
  const std::int64_t wrow = rg * Cfg::rows_per_block(t1) + static_cast<std::int64_t>(warp) * Cfg::ROWS_PER_WARP;
  const std::int64_t j0 = static_cast<std::int64_t>(pass) * T2;
  const int split = rotated_split(g.split, rg);
  const std::int64_t p_begin = static_cast<std::int64_t>(split) * g.chunk;
  const std::int64_t p_end = min(g.inner, p_begin + g.chunk);
  const std::int64_t nsteps = (p_end - p_begin + STEP - 1) / STEP;

  // Copy c of a lane: row lane / CHUNKS + c * 32 / CHUNKS of the warp's 16, always piece lane % CHUNKS,
  // so the inner offset and the bytes left at the edge are the same for all of a lane's copies. Rows
  // past the edge read the last row and are never stored.
  static_assert(32 % CHUNKS == 0, "a lane copies the same piece of each of its rows");
  const int piece = lane % CHUNKS;
  const T* src_row[COPIES];
  int dst_slot[COPIES];
#pragma unroll
  for (int c = 0; c < COPIES; ++c) {
    const int r = lane / CHUNKS + c * (32 / CHUNKS);
    src_row[c] = g.a + min(wrow + r, g.rows - 1) * g.lda;
    dst_slot[c] = r * CHUNKS + (piece ^ ((r & 1) << 2));
  }
  auto issue = [&](std::int64_t step, int slot) {
    if (step >= nsteps) return;
    const std::int64_t p = p_begin + step * STEP + piece * VEC, left = p_end - p;
    const int nb = left <= 0 ? 0 : (left >= VEC ? VEC : static_cast<int>(left)) * static_cast<int>(sizeof(T));
    V* dst = as + slot * WARP_STAGE;
    if (nb == int(sizeof(V))) {  // the common case without a test per copy (copy_vector's)
#pragma unroll
      for (int c = 0; c < COPIES; ++c) cp_async<16>(dst + dst_slot[c], src_row[c] + p, 16);
      return;
    }
#pragma unroll
    for (int c = 0; c < COPIES; ++c) copy_vector(dst + dst_slot[c], nb > 0 ? src_row[c] + p : g.a, nb, g.a);
  };
  // The B buffer of chunk c of this split (splits are whole chunks) from the image.
  const std::int64_t nchunks = (g.inner + KC - 1) / KC;
  const V* image = reinterpret_cast<const V*>(g.b_image + pass * nchunks * B_TILE);
  const std::int64_t first_chunk = p_begin / KC;
  auto fill = [&](std::int64_t c, int buf) {
    const V* src = image + (first_chunk + c) * (B_TILE / VEC);
    V* dst = reinterpret_cast<V*>(bt + buf * B_TILE);
    for (int i = tid; i < B_TILE / VEC; i += t1) cp_async<16>(dst + i, src + i, 16);
  };

  T acc[Cfg::ACC_SETS][2][NT][2];
#pragma unroll
  for (int k = 0; k < Cfg::ACC_SETS; ++k)
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int n = 0; n < NT; ++n) acc[k][s][n][0] = acc[k][s][n][1] = T(0);

  fill(0, 0);
  auto fill_chunk = [&](std::int64_t c) {
    if (p_begin + c * KC < p_end) fill(c, static_cast<int>(c & 1));
  };
  // Fragment slots of lane (g, t) in a stage: rows g and g + 8 (same parity), piece 4u + t.
  const int frag0 = gq * CHUNKS, frag1 = (gq + 8) * CHUNKS, swz = (gq & 1) << 2;
  run_stages<S, SPC, StageSync::warp>(nsteps, issue, fill_chunk, [&](int slot, int kstep, std::int64_t chunk) {
    const V* a_s = as + slot * WARP_STAGE;
    const T* b_s = bt + (chunk & 1) * B_TILE + gq * LDT + kstep * STEP + tq * VEC;
    V a[U][2], bhi[U][NT], blo[U][NT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int piece = (4 * u + tq) ^ swz;
      a[u][0] = a_s[frag0 + piece];
      a[u][1] = a_s[frag1 + piece];
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        bhi[u][n] = *reinterpret_cast<const V*>(b_s + n * 8 * LDT + u * KG);
        if constexpr (Cfg::HALVES == 2) blo[u][n] = *reinterpret_cast<const V*>(b_s + T2 * LDT + n * 8 * LDT + u * KG);
      }
    }
    mma_stage<U, NT>(acc, a, bhi, blo);
  });

  // acc[.][s][n][c]: row wrow + 8s + g, column j0 + 8n + 2t + c, the sets added in order.
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const std::int64_t i = wrow + 8 * s + gq;
    if (i >= g.rows) continue;
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const std::int64_t j = j0 + 8 * n + 2 * tq + c;
        if (j >= g.cols) continue;
        T v = acc[0][s][n][c];
#pragma unroll
        for (int k = 1; k < Cfg::ACC_SETS; ++k) v += acc[k][s][n][c];
        store_result(g, split, i, j, v);
      }
  }
}

}  // namespace skinny::gemm::detail::tsm2_device
