// 07 wmma: tensor cores through the WMMA API (16x16x16, f16 inputs, f32 accumulators and output).
// A 128x256x64 block tile is computed by 8 warps, each owning a 64x64 warp tile (4x4 accumulator
// fragments). Global -> shared copies run through a 3-stage cp.async pipeline (16-byte cp.async.cg with
// zero-fill past the matrix edges); each operand is kept in shared memory in its own layout, rows padded
// by 8 halves so the fragment loads (ldmatrix) are free of bank conflicts. Blocks walk the output in
// groups of 8 row tiles so that the blocks resident at one time share their A and B panels in L2.
// When an operand is not 16-byte aligned or its ld is not a multiple of 8, the same kernel loads the
// tiles element by element with bounds checks instead (template flag kVec).
#include "common.cuh"
#include "launchers.hpp"

#include <mma.h>

#include <atomic>

namespace skinny::gemm::detail {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kPad = 8;     ///< halves of padding per shared row (16 bytes)
constexpr int kCPad = 4;    ///< floats of padding per row of the epilogue staging buffer
constexpr int kGroupM = 8;  ///< row tiles per swizzle group (L2 reuse)

/// The tile configuration, with everything derived from it.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_>
struct TileConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, STAGES = STAGES_;
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN;
  static constexpr int kWarps = kWarpsM * kWarpsN;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kFragsM = WM / 16, kFragsN = WN / 16;

  static_assert(BM % WM == 0 && BN % WN == 0, "the warp tiles must divide the block tile");
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tiles are made of 16x16 WMMA fragments");
  static_assert(BK % 16 == 0, "BK must be a multiple of the WMMA k (16)");
  static_assert(BM % 8 == 0 && BN % 8 == 0 && BK % 8 == 0, "tiles are copied in 16-byte (8-half) chunks");
  static_assert(STAGES >= 2, "the pipeline needs at least two stages");
  static_assert(kThreads <= 1024, "too many warps per block");
  static_assert(32 % (WN / 4) == 0 && 16 % (32 / (WN / 4)) == 0, "epilogue: a warp writes whole rows of WN floats");

  /// Shared tile of an operand in its own layout: rows x (cols + kPad) halves, cols contiguous.
  /// Row-major A: BM x BK; column-major A: BK x BM; row-major B: BK x BN; column-major B: BN x BK.
  static constexpr int a_rows(bool row) { return row ? BM : BK; }
  static constexpr int a_cols(bool row) { return row ? BK : BM; }
  static constexpr int b_rows(bool row) { return row ? BK : BN; }
  static constexpr int b_cols(bool row) { return row ? BN : BK; }
  static constexpr int a_stage(bool row) { return a_rows(row) * (a_cols(row) + kPad); }
  static constexpr int b_stage(bool row) { return b_rows(row) * (b_cols(row) + kPad); }
  static constexpr int kEpilogueBytes = kWarps * 16 * (WN + kCPad) * int(sizeof(float));
  static constexpr int smem_bytes(bool a_row, bool b_row) {
    const int pipeline = STAGES * (a_stage(a_row) + b_stage(b_row)) * int(sizeof(__half));
    return pipeline > kEpilogueBytes ? pipeline : kEpilogueBytes;
  }
};

// BK = 64 rather than 32 halves the barriers per FLOP: +5% on the H100 at 4096 (measured 2026-11-22).
using Config = TileConfig<128, 256, 64, 64, 64, 3>;

// ---- cp.async (sm_80+), with a plain-load fallback for older architectures ----

/// Copies 16 bytes global -> shared, of which only the first `src_bytes` (0..16) are read: the rest is
/// zero-filled. `dst` and `src` must be 16-byte aligned.
__device__ __forceinline__ void cp_async_16(__half* dst, const __half* src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(src_bytes)
               : "memory");
#else
  union {
    uint4 u;
    __half h[8];
  } v;
  if (src_bytes == 16) {
    v.u = *reinterpret_cast<const uint4*>(src);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) v.h[e] = 2 * e < src_bytes ? src[e] : __ushort_as_half(0);
  }
  *reinterpret_cast<uint4*>(dst) = v.u;
#endif
}

/// Copies 16 bytes global -> shared (both 16-byte aligned), all of them inside the matrix.
__device__ __forceinline__ void cp_async_16_full(__half* dst, const __half* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
#else
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/// Copies a ROWS x COLS tile (COLS contiguous in global memory and in shared memory) into `s`, whose rows
/// are COLS + kPad halves apart. `g` points at the tile's first element, `ld` is the global row stride;
/// elements at row >= rows_left or column >= cols_left are outside the matrix and become zeros.
/// Thread `tid` copies the 8-half chunk at column c0 of rows r0, r0 + kRowStep, ... so the column bound is
/// checked once per tile and the chunks of a thread are a fixed stride apart in both memories.
/// kVec: 16-byte cp.async (g and ld must keep every 8-half chunk 16-byte aligned); otherwise element-wise
/// loads with bounds checks.
template <int ROWS, int COLS, int THREADS, bool kVec>
__device__ __forceinline__ void load_tile(__half* s, const __half* g, std::int64_t ld, int rows_left, int cols_left,
                                          int tid) {
  constexpr int kSld = COLS + kPad;
  constexpr int kChunksPerRow = COLS / 8;
  static_assert(THREADS % kChunksPerRow == 0, "a row's chunks must not straddle two passes");
  constexpr int kRowStep = THREADS / kChunksPerRow;  // rows covered by one pass of the block
  static_assert(ROWS % kRowStep == 0, "every thread copies the same number of 16-byte chunks");
  const int r0 = tid / kChunksPerRow;
  const int c0 = (tid % kChunksPerRow) * 8;
  __half* const dst = s + r0 * kSld + c0;
  const __half* const src = g + r0 * ld + c0;
  const std::int64_t step = kRowStep * ld;
  const int valid = cols_left - c0;  // halves of this thread's chunks inside the matrix (may be <= 0 or > 8)
  if constexpr (kVec) {
    if (rows_left >= ROWS && cols_left >= COLS) {  // interior tile: no bounds to check (block-uniform)
#pragma unroll
      for (int i = 0; i < ROWS / kRowStep; ++i) cp_async_16_full(dst + i * kRowStep * kSld, src + i * step);
      return;
    }
    const int col_bytes = valid >= 8 ? 16 : (valid > 0 ? 2 * valid : 0);
#pragma unroll
    for (int i = 0; i < ROWS / kRowStep; ++i) {
      const int bytes = r0 + i * kRowStep < rows_left ? col_bytes : 0;
      cp_async_16(dst + i * kRowStep * kSld, bytes > 0 ? src + i * step : g, bytes);  // nothing read if 0
    }
  } else {
#pragma unroll
    for (int i = 0; i < ROWS / kRowStep; ++i) {
      const bool row_in = r0 + i * kRowStep < rows_left;
      const __half* const row = src + i * step;
      union {
        uint4 u;
        __half h[8];
      } v;
#pragma unroll
      for (int e = 0; e < 8; ++e) v.h[e] = (row_in && e < valid) ? row[e] : __ushort_as_half(0);
      *reinterpret_cast<uint4*>(dst + i * kRowStep * kSld) = v.u;
    }
  }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool kVec, class OpA, class OpB>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, 1)
    wmma_kernel(OpA a, OpB b, float* __restrict__ c, std::int64_t ldc, int m, int n, int k, float alpha, float beta,
                bool c_vec) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
  __trap();  // WMMA needs sm_70 or newer
#else
  using Cfg = TileConfig<BM, BN, BK, WM, WN, STAGES>;
  constexpr int kThreads = Cfg::kThreads;
  constexpr bool kARow = OpA::row_major, kBRow = OpB::row_major;
  constexpr int kARows = Cfg::a_rows(kARow), kACols = Cfg::a_cols(kARow), kASld = kACols + kPad;
  constexpr int kBRows = Cfg::b_rows(kBRow), kBCols = Cfg::b_cols(kBRow), kBSld = kBCols + kPad;
  constexpr int kAStage = Cfg::a_stage(kARow), kBStage = Cfg::b_stage(kBRow);
  constexpr int kFM = Cfg::kFragsM, kFN = Cfg::kFragsN;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* const As = reinterpret_cast<__half*>(smem_raw);
  __half* const Bs = As + STAGES * kAStage;

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int wm = warp / Cfg::kWarpsN, wn = warp % Cfg::kWarpsN;

  // Grouped tile order: consecutive blocks run down kGroupM row tiles before moving to the next column
  // tile, so the blocks in flight share A row panels and B column panels in L2.
  const int tiles_m = m / BM + (m % BM != 0);
  const int tiles_n = n / BN + (n % BN != 0);
  const int pid = blockIdx.x;
  const int per_group = kGroupM * tiles_n;
  const int first_m = (pid / per_group) * kGroupM;
  const int group_m = min(tiles_m - first_m, kGroupM);
  const int pid_m = first_m + (pid % per_group) % group_m;
  const int pid_n = (pid % per_group) / group_m;
  const int m0 = pid_m * BM, n0 = pid_n * BN;
  const int rows_m = m - m0, cols_n = n - n0;  // rows / columns of C left from the tile's origin (>= 1)
  const int ktiles = k / BK + (k % BK != 0);

  // Tile origins in global memory of the next k tile to load; each load moves them by BK along k.
  const __half* a_next = a.p + (kARow ? std::int64_t(m0) * a.ld : std::int64_t(m0));
  const __half* b_next = b.p + (kBRow ? std::int64_t(n0) : std::int64_t(n0) * b.ld);
  const std::int64_t a_kstep = kARow ? BK : BK * a.ld;
  const std::int64_t b_kstep = kBRow ? BK * b.ld : BK;
  int k_left = k;  // k extent left from the next tile's origin

  // Loads the next k tile into `stage` (called for k tiles 0, 1, 2, ... in order, while k_left > 0).
  auto load_next = [&](int stage) {
    load_tile<kARows, kACols, kThreads, kVec>(As + stage * kAStage, a_next, a.ld, kARow ? rows_m : k_left,
                                              kARow ? k_left : rows_m, tid);
    load_tile<kBRows, kBCols, kThreads, kVec>(Bs + stage * kBStage, b_next, b.ld, kBRow ? k_left : cols_n,
                                              kBRow ? cols_n : k_left, tid);
    a_next += a_kstep;
    b_next += b_kstep;
    k_left -= BK;
  };

  using ALayout = std::conditional_t<kARow, wmma::row_major, wmma::col_major>;
  using BLayout = std::conditional_t<kBRow, wmma::row_major, wmma::col_major>;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFM][kFN];
#pragma unroll
  for (int i = 0; i < kFM; ++i)
#pragma unroll
    for (int j = 0; j < kFN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  // Prologue: STAGES - 1 tiles in flight (one commit group each, empty past the last tile).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) load_next(s);
    cp_async_commit();
  }

  int read_stage = 0, write_stage = STAGES - 1;
  for (int kt = 0; kt < ktiles; ++kt) {
    // Group kt (tile kt) is complete once at most STAGES - 2 newer groups are pending; the barrier makes
    // every thread's copies visible and ensures nobody still reads the stage refilled below (tile kt - 1).
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = kt + STAGES - 1;
    if (next < ktiles) load_next(write_stage);
    cp_async_commit();
    write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;

    const __half* const as = As + read_stage * kAStage;
    const __half* const bs = Bs + read_stage * kBStage;
    read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, ALayout> af[kFM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, BLayout> bf[kFN];
#pragma unroll
      for (int i = 0; i < kFM; ++i) {
        const int row = wm * WM + i * 16;  // row of A within the block tile
        wmma::load_matrix_sync(af[i], kARow ? as + row * kASld + kk : as + kk * kASld + row, kASld);
      }
#pragma unroll
      for (int j = 0; j < kFN; ++j) {
        const int col = wn * WN + j * 16;  // column of B within the block tile
        wmma::load_matrix_sync(bf[j], kBRow ? bs + kk * kBSld + col : bs + col * kBSld + kk, kBSld);
      }
#pragma unroll
      for (int i = 0; i < kFM; ++i)
#pragma unroll
        for (int j = 0; j < kFN; ++j) wmma::mma_sync(acc[i][j], af[i], bf[j], acc[i][j]);
    }
  }

  // Epilogue: the pipeline buffers become per-warp staging for 16 x WN strips of the warp tile.
  cp_async_wait<0>();
  __syncthreads();
  constexpr int kCsld = WN + kCPad;
  constexpr int kVecPerRow = WN / 4;              // float4s per strip row
  constexpr int kRowsPerPass = 32 / kVecPerRow;   // strip rows a warp writes per pass
  float* const cs = reinterpret_cast<float*>(smem_raw) + warp * 16 * kCsld;
  const bool has_beta = beta != 0.0f;
#pragma unroll
  for (int i = 0; i < kFM; ++i) {
#pragma unroll
    for (int j = 0; j < kFN; ++j) wmma::store_matrix_sync(cs + j * 16, acc[i][j], kCsld, wmma::mem_row_major);
    __syncwarp();
#pragma unroll
    for (int pass = 0; pass < 16 / kRowsPerPass; ++pass) {
      const int r = pass * kRowsPerPass + lane / kVecPerRow;  // row in the strip
      const int cc = (lane % kVecPerRow) * 4;                  // column in the strip
      const int tr = wm * WM + i * 16 + r;                     // row / column in the block tile
      const int tc = wn * WN + cc;
      if (tr < rows_m) {
        float* const out = c + std::int64_t(m0 + tr) * ldc + (n0 + tc);
        const float4 v = *reinterpret_cast<const float4*>(cs + r * kCsld + cc);
        if (c_vec && tc + 3 < cols_n) {
          float4 o = make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w);
          if (has_beta) {
            const float4 old = *reinterpret_cast<const float4*>(out);
            o.x += beta * old.x;
            o.y += beta * old.y;
            o.z += beta * old.z;
            o.w += beta * old.w;
          }
          *reinterpret_cast<float4*>(out) = o;
        } else {
          const float vs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (tc + e < cols_n) out[e] = has_beta ? alpha * vs[e] + beta * out[e] : alpha * vs[e];
        }
      }
    }
    __syncwarp();
  }
#endif
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <class Cfg, bool kVec, class OpA, class OpB>
void launch_config(OpA a, OpB b, const Problem& p, Context& ctx) {
  auto* const kernel = &wmma_kernel<Cfg::BM, Cfg::BN, Cfg::BK, Cfg::WM, Cfg::WN, Cfg::STAGES, kVec, OpA, OpB>;
  constexpr int smem = Cfg::smem_bytes(OpA::row_major, OpB::row_major);
  // Opting in to more than 48 KB of dynamic shared memory is a per-device function attribute: set it
  // once per instantiation and device.
  static std::atomic<unsigned long long> configured{0};
  const int dev = ctx.device();
  const unsigned long long bit = dev >= 0 && dev < 64 ? 1ull << dev : 0;
  if (bit == 0 || !(configured.load(std::memory_order_acquire) & bit)) {
    SKINNY_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    configured.fetch_or(bit, std::memory_order_acq_rel);
  }
  float* const c = static_cast<float*>(p.c);
  const bool c_vec = aligned16(c) && p.ldc % 4 == 0;
  const std::int64_t tiles = ceil_div(p.m, Cfg::BM) * ceil_div(p.n, Cfg::BN);
  kernel<<<dim3(unsigned(tiles)), dim3(Cfg::kThreads), smem, ctx.stream()>>>(
      a, b, c, p.ldc, int(p.m), int(p.n), int(p.k), float(p.alpha), float(p.beta), c_vec);
  SKINNY_CHECK_LAUNCH();
}

}  // namespace

Support wmma_can_implement(const Problem& p) {
  if (p.in_type != DType::f16 || p.out_type != DType::f32)
    return Support::no("wmma: needs f16 inputs and f32 output (got " + std::string(to_string(p.in_type)) + " -> " +
                       std::string(to_string(p.out_type)) + ")");
  if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX)
    return Support::no("wmma: m, n and k must each be at most " + std::to_string(INT_MAX) +
                       " (got m=" + std::to_string(p.m) + ", n=" + std::to_string(p.n) + ", k=" + std::to_string(p.k) +
                       ")");
  // One block per 128x256 tile of C, on a one-dimensional grid (x allows 2^31 - 1 blocks).
  const std::int64_t tiles = ceil_div(p.m, Config::BM) * ceil_div(p.n, Config::BN);
  if (tiles > INT_MAX)
    return Support::no("wmma: m=" + std::to_string(p.m) + ", n=" + std::to_string(p.n) + " needs " +
                       std::to_string(tiles) + " blocks of " + std::to_string(Config::BM) + "x" +
                       std::to_string(Config::BN) + ", more than the " + std::to_string(INT_MAX) +
                       " CUDA allows along x");
  return Support::yes();
}

void wmma_launch(const Problem& p, Context& ctx) {
  with_operands<__half>(p, [&](auto a, auto b) {
    // 16-byte cp.async needs every 8-half chunk aligned: aligned bases and leading dimensions that are
    // multiples of 8. Otherwise the element-wise loader.
    const bool vec = aligned16(a.p) && a.ld % 8 == 0 && aligned16(b.p) && b.ld % 8 == 0;
    if (vec)
      launch_config<Config, true>(a, b, p, ctx);
    else
      launch_config<Config, false>(a, b, p, ctx);
  });
}

}  // namespace skinny::gemm::detail
