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

/// acc[s][n] += the products of one k-group: a[s] holds this lane's 4 floats of row 8s + g, bhi[n] and
/// blo[n] the TF32 halves of its 4 floats of column 8n + g of B. Rows g and g + 8 form one m16 tile.
template <int NT>
__device__ __forceinline__ void mma_k_group(float (&acc)[2][NT][2], const float4 (&a)[2], const float4 (&bhi)[NT],
                                            const float4 (&blo)[NT]) {
  Tf32Pair lo[4], hi[4];  // rows g and g + 8
  split_tf32(a[0], lo);
  split_tf32(a[1], hi);
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    float d[4];
    k_group_3xtf32(d, lo, hi, bhi[n], blo[n]);
    acc[0][n][0] += d[0];
    acc[0][n][1] += d[1];
    acc[1][n][0] += d[2];
    acc[1][n][1] += d[3];
  }
}

/// The same in double: rows g and g + 8 are two m8 tiles; blo is unused.
template <int NT>
__device__ __forceinline__ void mma_k_group(double (&acc)[2][NT][2], const double2 (&a)[2], const double2 (&b)[NT],
                                            const double2 (&)[NT]) {
#pragma unroll
  for (int e = 0; e < 2; ++e)
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int n = 0; n < NT; ++n) mma_f64(acc[s][n], elem<double>(a[s], e), elem<double>(b[n], e));
}

template <class T, int NT>
__global__ void __launch_bounds__(256) tsm2_rm_mma_kernel(const Args<T> g) {
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
#pragma unroll
    for (int c = 0; c < COPIES; ++c) copy_vector(dst + dst_slot[c], nb > 0 ? src_row[c] + p : g.a, nb, g.a);
  };
  // The B buffer of the chunk at p0 (a multiple of KC: splits are whole chunks) from the image.
  const std::int64_t nchunks = (g.inner + KC - 1) / KC;
  const V* image = reinterpret_cast<const V*>(g.b_image + pass * nchunks * B_TILE);
  auto fill = [&](std::int64_t p0, int buf) {
    const V* src = image + p0 / KC * (B_TILE / VEC);
    V* dst = reinterpret_cast<V*>(bt + buf * B_TILE);
    for (int i = tid; i < B_TILE / VEC; i += t1) cp_async<16>(dst + i, src + i, 16);
  };

  T acc[2][NT][2];
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int n = 0; n < NT; ++n) acc[s][n][0] = acc[s][n][1] = T(0);

  fill(p_begin, 0);
  auto fill_chunk = [&](std::int64_t c) {
    const std::int64_t p0 = p_begin + c * KC;
    if (p0 < p_end) fill(p0, static_cast<int>(c & 1));
  };
  // Fragment slots of lane (g, t) in a stage: rows g and g + 8 (same parity), piece 4u + t.
  const int frag0 = gq * CHUNKS, frag1 = (gq + 8) * CHUNKS, swz = (gq & 1) << 2;
  run_stages<S, SPC, true>(nsteps, issue, fill_chunk, [&](int slot, int kstep, std::int64_t chunk) {
    const V* a_s = as + slot * WARP_STAGE;
    const T* b_s = bt + (chunk & 1) * B_TILE + gq * LDT + kstep * STEP + tq * VEC;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int piece = (4 * u + tq) ^ swz;
      const V a[2] = {a_s[frag0 + piece], a_s[frag1 + piece]};
      V bhi[NT], blo[NT];
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        bhi[n] = *reinterpret_cast<const V*>(b_s + n * 8 * LDT + u * KG);
        if constexpr (Cfg::HALVES == 2) blo[n] = *reinterpret_cast<const V*>(b_s + T2 * LDT + n * 8 * LDT + u * KG);
      }
      mma_k_group<NT>(acc, a, bhi, blo);
    }
  });

  // acc[s][n][c]: row wrow + 8s + g, column j0 + 8n + 2t + c.
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
        store_result(g, split, i, j, acc[s][n][c]);
      }
  }
}

}  // namespace skinny::gemm::detail::tsm2_device
