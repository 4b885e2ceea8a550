// TSM2 for the H100: C (rows x cols) = alpha * A (rows x inner) * B (inner x cols) + beta * C, cols <= 64,
// at the memory-bandwidth limit (the floor is one read of A).
//
// Beyond the paper (3.2-3.5):
//  * A is streamed by cp.async into a per-thread ring of shared-memory stages, so the bytes in flight
//    cost no registers: every thread keeps (stages - 1) x 8 (column-major) or (stages - 1) x R
//    (row-major) 16-byte loads outstanding while it computes. Each thread reads back only what it
//    copied, so the ring needs no barriers.
//  * Column-major A (the paper's): a thread owns 4 (float) / 2 (double) consecutive rows and reads
//    them with one 16-byte copy per column; a warp covers 512 contiguous bytes of a column. The t2
//    columns of B for a chunk of the inner dimension sit in shared memory row by row, read as
//    broadcast 16-byte loads; t2 x rows-per-thread accumulators stay in registers.
//  * Row-major A (K-means data): a group of 8 lanes reads 8 x 16 contiguous bytes of each of R rows,
//    a warp 4 groups; B^T (t2 x chunk) in shared memory gives each lane the B values of its own 4/2
//    inner positions (8 distinct 16-byte words per warp: conflict-free, broadcast), shared by the R
//    rows; the 8 lanes' partial sums are combined by shuffles once at the end. On compute capability
//    >= 8.0 a tensor-core kernel (rm_mma_kernel.cuh: 3xTF32 float, DMMA double) and, for <= 8 columns,
//    a row-at-a-time kernel (rm_stream_kernel.cuh) are timed against it on a shape's first call and the
//    fastest is kept. Row-major kernels rotate their split by row group (tsm2_device.cuh,
//    rotated_split) so that the blocks running together read different columns. Column-major A with
//    3..16 columns has tensor-core candidates too (cm_mma_kernel.cuh: DMMA, float A converted to
//    double; 3xTF32 for float).
//  * When the rows alone cannot fill whole waves of the GPU, the inner dimension is split across
//    blocks (grid y); each split writes partial sums to the Context workspace [split][rows][cols] and a
//    second kernel adds them in split order (deterministic, no float atomics) and applies alpha/beta.
//    It is launched with programmatic dependent launch where available to hide its launch latency.
//    The split fills whole waves, or makes one lean wave of fewer, longer blocks (plans_at).
//  * Passes over columns (cols > t2) are neighbouring blocks (pass is the fastest grid index), so the
//    second read of a stripe of A mostly hits L2.
//  * t1 is picked per (device, type, layout, vector path, shape) by a short timed trial on the first
//    call (the paper's Alg. 5), writing only to the workspace; Tsm2Tuning::trial = false disables it. The
//    trial also times the kernels of the shape and, for each, the splits of plans_at. At 16 columns per
//    pass on column-major A it times the same kernel on half-width vectors too (half the accumulators).
//    For double A a kernel on the FMA pipes must beat the tensor cores by kFp64FmaMargin (its speed
//    follows the SM clock, which sustained runs lower). The choice is cached; later calls launch it
//    without planning again.
//
// B chunks are double buffered in shared memory and filled by cp.async in the same commit group as an
// A stage, so one barrier per chunk suffices.
#include "../kernels/common.cuh"
#include "../kernels/launchers.hpp"
#include "cm_mma_kernel.cuh"
#include "rm_mma_kernel.cuh"
#include "rm_stream_kernel.cuh"
#include "tall_skinny.hpp"
#include "tsm2_device.cuh"
#include "tsm2_plan.hpp"

#include <skinny/gemm/cuda_event.hpp>
#include <skinny/gemm/programmatic_launch.hpp>

#include <skinny/gemm/tsm2_model.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace skinny::gemm::detail {
namespace {

using namespace tsm2_device;

// ---------------------------------------------------------------------------------------------------
// Column-major A.

template <class T, int VEC, int T2>
struct CmCfg {
  using V = typename VecOf<T, VEC>::type;
  static constexpr int G = 8;          ///< columns of A per stage (one 16-byte copy each)
  static constexpr int S = 4;          ///< stages in the ring (S - 1 in flight while one is used)
  static constexpr int KC = 64;        ///< inner elements per B chunk
  static constexpr int SPC = KC / G;   ///< stages per chunk (a power of two, >= S - 1)
  static constexpr int BV = 16 / int(sizeof(T));  ///< B elements per broadcast load
  static_assert(SPC >= S - 1 && (SPC & (SPC - 1)) == 0, "a chunk's B must arrive within S - 1 stages");
  static_assert(T2 % BV == 0, "B rows are read in 16-byte words");
  static std::size_t smem(int t1) { return sizeof(V) * S * G * t1 + sizeof(T) * 2 * KC * T2; }
  static int rows_per_block(int t1) { return t1 * VEC; }
  static int loads_in_flight() { return (S - 1) * G; }
  static int bytes_in_flight_per_thread() { return (S - 1) * G * int(sizeof(V)); }
};

template <class T, int VEC, int T2>
__global__ void __launch_bounds__(256) tsm2_cm_kernel(const Args<T> g) {
  using Cfg = CmCfg<T, VEC, T2>;
  using V = typename Cfg::V;
  using BVec = typename VecOf<T, Cfg::BV>::type;
  constexpr int G = Cfg::G, S = Cfg::S, KC = Cfg::KC, SPC = Cfg::SPC, BV = Cfg::BV;
  extern __shared__ __align__(16) unsigned char smem[];
  const int t1 = blockDim.x, tid = threadIdx.x;
  V* as = reinterpret_cast<V*>(smem);                               // [S][G][t1]
  T* bs = reinterpret_cast<T*>(smem + sizeof(V) * S * G * t1);      // [2][KC][T2]

  const int pass = static_cast<int>(blockIdx.x % static_cast<unsigned>(g.passes));
  const std::int64_t rg = blockIdx.x / static_cast<unsigned>(g.passes);
  const std::int64_t r0 = (rg * t1 + tid) * VEC;
  const std::int64_t j0 = static_cast<std::int64_t>(pass) * T2;
  const std::int64_t p_begin = static_cast<std::int64_t>(blockIdx.y) * g.chunk;
  const std::int64_t p_end = min(g.inner, p_begin + g.chunk);
  const std::int64_t nsteps = (p_end - p_begin + G - 1) / G;
  const std::int64_t nrem = g.rows - r0;
  const int nvalid = nrem <= 0 ? 0 : (nrem >= VEC ? VEC : static_cast<int>(nrem));
  const int row_bytes = nvalid * static_cast<int>(sizeof(T));
  const T* a_col = g.a + (nvalid > 0 ? r0 : 0);  // A(r0, p) = a_col[p * lda]
  const std::int64_t lda = g.lda;

  // Queues stage `step` (columns p_begin + step*G ..) into ring slot `slot`. Threads past the last row
  // copy nothing (their accumulators are never stored).
  auto issue = [&](std::int64_t step, int slot) {
    if (step >= nsteps || nvalid == 0) return;
    const std::int64_t p = p_begin + step * G;
    const T* src = a_col + p * lda;
    V* dst = as + slot * G * t1 + tid;
    if (p + G <= p_end) {
#pragma unroll
      for (int i = 0; i < G; ++i) copy_vector(dst + i * t1, src + i * lda, row_bytes, g.a);
    } else {
#pragma unroll
      for (int i = 0; i < G; ++i) {
        const bool ok = p + i < p_end;
        copy_vector(dst + i * t1, ok ? src + i * lda : g.a, ok ? row_bytes : 0, g.a);
      }
    }
  };

  T acc[VEC][T2];
#pragma unroll
  for (int v = 0; v < VEC; ++v)
#pragma unroll
    for (int j = 0; j < T2; ++j) acc[v][j] = T(0);

  fill_b<T, KC, T2, false, 0>(bs, g, p_begin, p_end, j0, tid, t1);
  auto fill_chunk = [&](std::int64_t c) {
    const std::int64_t p0 = p_begin + c * KC;
    if (p0 < p_end) fill_b<T, KC, T2, false, 0>(bs + (c & 1) * KC * T2, g, p0, p_end, j0, tid, t1);
  };
  run_stages<S, SPC, StageSync::own>(nsteps, issue, fill_chunk, [&](int slot, int kstep, std::int64_t chunk) {
    const V* a_s = as + slot * G * t1 + tid;
    const T* b_s = bs + (chunk & 1) * KC * T2 + kstep * G * T2;
#pragma unroll
    for (int i = 0; i < G; ++i) {
      const V av = a_s[i * t1];
      const BVec* brow = reinterpret_cast<const BVec*>(b_s + i * T2);
#pragma unroll
      for (int jb = 0; jb < T2 / BV; ++jb) {
        const BVec bv = brow[jb];
#pragma unroll
        for (int e = 0; e < BV; ++e)
#pragma unroll
          for (int v = 0; v < VEC; ++v)
            acc[v][jb * BV + e] = fma(elem<T>(av, v), elem<T>(bv, e), acc[v][jb * BV + e]);
      }
    }
  });

#pragma unroll
  for (int v = 0; v < VEC; ++v)
    if (v < nvalid)
#pragma unroll
      for (int j = 0; j < T2; ++j)
        if (j0 + j < g.cols) store_result(g, static_cast<int>(blockIdx.y), r0 + v, j0 + j, acc[v][j]);
}

// ---------------------------------------------------------------------------------------------------
// Row-major A.

// Measured on the H100 (262144 x 4096, k = 16): a whole warp per row (LG = 32), 16 lanes, or 4 rows per
// group with 4-5 stages were all slower than 8 lanes x 8 rows x 3 stages (float 53-70 % against 84 % of
// the read ceiling): fewer rows per group re-read B from shared memory more often than the extra warps gain.
template <class T, int VEC, int T2>
struct RmCfg {
  using V = typename VecOf<T, VEC>::type;
  static constexpr int LG = 8;                   ///< lanes sharing a row (8 x 16 bytes = a 128-byte line)
  static constexpr int STEP = LG * VEC;          ///< inner elements a lane group covers per stage
  static constexpr int S = 3;                    ///< stages in the ring
  static constexpr int SPC = 4;                  ///< stages per B chunk
  static constexpr int KC = SPC * STEP;          ///< inner elements per B chunk
  static constexpr int LDT = KC + 16 / int(sizeof(T));  ///< padded row of the B^T tile (16-byte aligned)
  /// Rows per lane group: accumulators R x T2 within 128 32-bit registers (64 at t2 = 32, where the
  /// B words of a stage need more), at most 8.
  static constexpr int R_raw = (T2 >= 32 ? 64 : 128) / (T2 * int(sizeof(T)) / 4);
  static constexpr int R = R_raw > 8 ? 8 : (R_raw < 1 ? 1 : R_raw);
  static_assert(SPC >= S - 1, "a chunk's B must arrive within S - 1 stages");
  static std::size_t smem(int t1) { return sizeof(V) * S * R * t1 + sizeof(T) * 2 * T2 * LDT; }
  __host__ __device__ static int rows_per_block(int t1) { return t1 / LG * R; }
  static int loads_in_flight() { return (S - 1) * R; }
  static int bytes_in_flight_per_thread() { return (S - 1) * R * int(sizeof(V)); }
};

template <class T, int VEC, int T2>
__global__ void __launch_bounds__(256, 1) tsm2_rm_kernel(const Args<T> g) {
  using Cfg = RmCfg<T, VEC, T2>;
  using V = typename Cfg::V;
  constexpr int LG = Cfg::LG, STEP = Cfg::STEP, S = Cfg::S, SPC = Cfg::SPC, KC = Cfg::KC, LDT = Cfg::LDT,
                R = Cfg::R;
  extern __shared__ __align__(16) unsigned char smem[];
  const int t1 = blockDim.x, tid = threadIdx.x;
  V* as = reinterpret_cast<V*>(smem);                           // [S][R][t1]
  T* bt = reinterpret_cast<T*>(smem + sizeof(V) * S * R * t1);  // [2][T2][LDT]

  const int q = tid & (LG - 1);  // lane within its group: inner offset q * VEC
  const int set = tid / LG;      // lane group within the block: rows rb .. rb + R - 1
  const int pass = static_cast<int>(blockIdx.x % static_cast<unsigned>(g.passes));
  const std::int64_t rg = blockIdx.x / static_cast<unsigned>(g.passes);
  const std::int64_t rb = rg * Cfg::rows_per_block(t1) + static_cast<std::int64_t>(set) * R;
  const std::int64_t j0 = static_cast<std::int64_t>(pass) * T2;
  const int split = rotated_split(g.split, rg);
  const std::int64_t p_begin = static_cast<std::int64_t>(split) * g.chunk;
  const std::int64_t p_end = min(g.inner, p_begin + g.chunk);
  const std::int64_t nsteps = (p_end - p_begin + STEP - 1) / STEP;
  const std::int64_t lda = g.lda;
  // Rows past the edge read the last row (no guards in the loop) and are never stored. Row rb + r is
  // a_base + min(r, r_last) * lda: one pointer instead of R.
  const std::int64_t rb_c = min(rb, g.rows - 1);
  const T* a_base = g.a + rb_c * lda;
  const std::int64_t rows_left = g.rows - 1 - rb_c;
  const int r_last = rows_left < R - 1 ? static_cast<int>(rows_left) : R - 1;

  auto issue = [&](std::int64_t step, int slot) {
    if (step >= nsteps) return;
    const std::int64_t p = p_begin + step * STEP + q * VEC;
    const std::int64_t left = p_end - p;
    const int nb = left <= 0 ? 0 : (left >= VEC ? VEC : static_cast<int>(left)) * static_cast<int>(sizeof(T));
    V* dst = as + slot * R * t1 + tid;
#pragma unroll
    for (int r = 0; r < R; ++r)
      copy_vector(dst + r * t1, nb > 0 ? a_base + (r < r_last ? r : r_last) * lda + p : g.a, nb, g.a);
  };

  T acc[R][T2];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < T2; ++j) acc[r][j] = T(0);

  fill_b<T, KC, T2, true, LDT>(bt, g, p_begin, p_end, j0, tid, t1);
  auto fill_chunk = [&](std::int64_t c) {
    const std::int64_t p0 = p_begin + c * KC;
    if (p0 < p_end) fill_b<T, KC, T2, true, LDT>(bt + (c & 1) * T2 * LDT, g, p0, p_end, j0, tid, t1);
  };
  run_stages<S, SPC, StageSync::own>(nsteps, issue, fill_chunk, [&](int slot, int kstep, std::int64_t chunk) {
    const V* a_s = as + slot * R * t1 + tid;
    V a[R];
#pragma unroll
    for (int r = 0; r < R; ++r) a[r] = a_s[r * t1];
    const T* b_s = bt + (chunk & 1) * T2 * LDT + kstep * STEP + q * VEC;
#pragma unroll
    for (int j = 0; j < T2; ++j) {
      const V bv = *reinterpret_cast<const V*>(b_s + j * LDT);
#pragma unroll
      for (int e = 0; e < VEC; ++e)
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r][j] = fma(elem<T>(a[r], e), elem<T>(bv, e), acc[r][j]);
    }
  });

  // The 8 lanes of a group hold partial sums over their inner positions: butterfly, so each lane has
  // the (bit-identical) total, then lane q stores the columns j with j % 8 == q.
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < T2; ++j)
#pragma unroll
      for (int off = 1; off < LG; off <<= 1) acc[r][j] += __shfl_xor_sync(0xffffffffu, acc[r][j], off);

#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::int64_t i = rb + r;
    if (i >= g.rows) break;
#pragma unroll
    for (int j = 0; j < T2; ++j) {
      if ((j & (LG - 1)) != q || j0 + j >= g.cols) continue;
      store_result(g, split, i, j0 + j, acc[r][j]);
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Sum of the splits, in split order, and the alpha/beta epilogue.

/// N consecutive elements of C per thread (16 bytes where rows x cols is a multiple of N, so that every
/// split's plane starts aligned, else 1). A thread queues the loads of up to kQueuedSplits splits before
/// its first add: one wait on L2 instead of one per split. Measured side by side on the H100 (float n = 10240,
/// column-major, bench/results/h100/2026-11-24_vector-reduce/steps/02): k = 16 92.2 % of the read
/// ceiling against 91.2-91.7 % with one element and one split at a time, k = 4 93.1-93.3 against 92.1 %.
template <class T, int N>
__global__ void __launch_bounds__(256) tsm2_reduce_kernel(const Args<T> g) {
  using V = typename VecOf<T, N>::type;
  constexpr int kQueuedSplits = 8;
  wait_for_previous_grid();  // the partial sums of the main kernel
  const std::int64_t plane = g.rows * g.cols / N;  // vectors per split
  const V* ws = reinterpret_cast<const V*>(g.ws);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  auto add_splits = [&](std::int64_t v) {
    V x[kQueuedSplits];
#pragma unroll
    for (int k = 0; k < kQueuedSplits; ++k)
      if (k < g.split) x[k] = ws[k * plane + v];
    T s[N];
#pragma unroll
    for (int e = 0; e < N; ++e) s[e] = elem<T>(x[0], e);
#pragma unroll
    for (int k = 1; k < kQueuedSplits; ++k)
      if (k < g.split)
#pragma unroll
        for (int e = 0; e < N; ++e) s[e] += elem<T>(x[k], e);
    for (int k = kQueuedSplits; k < g.split; ++k) {
      const V y = ws[k * plane + v];
#pragma unroll
      for (int e = 0; e < N; ++e) s[e] += elem<T>(y, e);
    }
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const std::int64_t idx = v * N + e, i = idx / g.cols;
      store_c(g, i, idx - i * g.cols, s[e]);
    }
  };
  // Once read, the partial sums are dropped from L2 where whole 128-byte lines lie in one plane (eight
  // vectors, read by eight lanes of one warp): written back, they would cost DRAM bandwidth during the
  // next stream of A. Measured side by side on the H100 (float n = 10240, k = 16: 3.9 MB of partial sums,
  // bench/results/h100/2026-11-24_t1-512/steps/06): 1.4 us less per product, 92.5-93.5 % of the read
  // ceiling against 90.9-92.5 %. Whole warps iterate, so that the warp can sync before a line is dropped.
  constexpr bool kVectorLines = N * sizeof(T) == 16;
  const bool discard = kVectorLines && plane % 8 == 0 && reinterpret_cast<std::uintptr_t>(g.ws) % 128 == 0;
  const int lane = static_cast<int>(threadIdx.x & 31);
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v - lane < plane;
       v += stride) {
    if (v < plane) add_splits(v);
    if (discard) {
      __syncwarp();  // the eight lanes' loads of each line are done
      if (v < plane && v % 8 == 0)
        for (int k = 0; k < g.split; ++k) discard_l2_line(ws + k * plane + v);
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Host side: the kernel table.

/// One instantiated kernel and the figures the planner needs about it.
struct KernelInfo {
  const void* fn = nullptr;
  int t2 = 0, vec = 1;
  bool row_major = false;
  const char* name = "ffma";  ///< Tsm2Plan::kernel
  bool tensor_cores = false;  ///< runs its products on the tensor cores (else on the FMA pipes)
  /// Tensor-core kernel: elements of the B image it reads (tsm2_b_image_kernel, launched first).
  std::int64_t (*b_image)(std::int64_t inner, int passes) = nullptr;
  const void* b_image_fn = nullptr;
  int loads_in_flight = 0;             ///< per thread
  int bytes_in_flight_per_thread = 0;  ///< A bytes per thread in flight
  int kc = 0;                          ///< B chunk: the split granularity along inner
  int max_chunk = 0;                   ///< most inner elements one split may cover (0: no limit)
  std::size_t (*smem)(int t1) = nullptr;
  int (*rows_per_block)(int t1) = nullptr;
};

/// The figures every kernel's configuration C gives the planner.
template <class C>
void set_config_figures(KernelInfo& k) {
  k.loads_in_flight = C::loads_in_flight();
  k.bytes_in_flight_per_thread = C::bytes_in_flight_per_thread();
  k.kc = C::KC;
  k.smem = &C::smem;
  k.rows_per_block = &C::rows_per_block;
}

template <class T, bool RM, int VEC, int T2>
KernelInfo info() {
  KernelInfo k;
  k.t2 = T2;
  k.vec = VEC;
  k.row_major = RM;
  if constexpr (RM) {
    k.fn = reinterpret_cast<const void*>(&tsm2_rm_kernel<T, VEC, T2>);
    set_config_figures<RmCfg<T, VEC, T2>>(k);
  } else {
    k.fn = reinterpret_cast<const void*>(&tsm2_cm_kernel<T, VEC, T2>);
    set_config_figures<CmCfg<T, VEC, T2>>(k);
  }
  return k;
}

/// The tensor-core row-major kernel (rm_mma_kernel.cuh) with 8 * NT columns per pass.
template <class T, int NT>
KernelInfo info_mma() {
  using C = RmMmaCfg<T, NT>;
  KernelInfo k;
  k.fn = reinterpret_cast<const void*>(&tsm2_rm_mma_kernel<T, NT>);
  k.b_image = &C::image_elems;
  k.b_image_fn = reinterpret_cast<const void*>(&tsm2_b_image_kernel<T, NT>);
  k.t2 = C::T2;
  k.vec = C::VEC;
  k.row_major = true;
  k.name = std::is_same_v<T, float> ? "3xtf32" : "dmma";
  k.tensor_cores = true;
  set_config_figures<C>(k);
  return k;
}

/// The row-at-a-time row-major kernel (rm_stream_kernel.cuh) with T2 columns per pass: splits in whole
/// warp steps, each at most the B^T its shared memory holds.
template <class T, int T2>
KernelInfo info_stream() {
  using C = RmStreamCfg<T, T2>;
  KernelInfo k;
  k.fn = reinterpret_cast<const void*>(&tsm2_rm_stream_kernel<T, T2>);
  k.t2 = T2;
  k.vec = C::VEC;
  k.row_major = true;
  k.name = "stream";
  set_config_figures<C>(k);
  k.kc = C::WARP_STEP;
  k.max_chunk = C::KC;
  return k;
}

template <class T>
KernelInfo pick_stream_kernel(std::int64_t cols) {
  if (cols <= 2) return info_stream<T, 2>();
  if (cols <= 4) return info_stream<T, 4>();
  return info_stream<T, 8>();
}
constexpr std::int64_t kMaxStreamCols = 8;

/// A column-major kernel on the tensor cores (cm_mma_kernel.cuh), 8 * NT columns per pass.
template <class T, CmMath M, int NT>
KernelInfo info_cm_mma() {
  using C = CmMmaCfg<T, M, NT>;
  KernelInfo k;
  k.fn = reinterpret_cast<const void*>(&tsm2_cm_mma_kernel<T, M, NT>);
  k.t2 = C::T2;
  k.vec = C::VEC;
  k.name = C::kTf32 ? "3xtf32" : "dmma";
  k.tensor_cores = true;
  set_config_figures<C>(k);
  return k;
}

/// DMMA: 8 columns per pass up to 8, else 16: beyond 16 the DMMA issues per element of A (a quarter per
/// 8 columns and lane) approach the FFMA kernel's cost, and the double accumulators its registers.
template <class T>
KernelInfo pick_cm_dmma_kernel(std::int64_t cols) {
  return cols <= 8 ? info_cm_mma<T, CmMath::dmma, 1>() : info_cm_mma<T, CmMath::dmma, 2>();
}
/// 3xTF32: one m16 tile, 16 columns per pass (fewer columns cost no more issues, only idle tensor work).
KernelInfo pick_cm_tf32_kernel() { return info_cm_mma<float, CmMath::tf32x3, 2>(); }
/// The column widths they are timed for by default. From 3 columns: at 3 and 4 every kernel does the
/// work of 4 (FFMA) or of a whole tile (DMMA 8, 3xTF32 16), and with the tensor-core kernels among the
/// candidates (from 5 before) the trial took float k = 4 from 92.2-92.7 to 94.1-94.4 % of the read
/// ceiling at n = 10240 (3xTF32) and double k = 4 from 93.8-96.6 to 96.6-97.5 % (DMMA), three
/// processes each side by side (H100, bench/results/h100/2026-11-24_dmma-block-copies/steps/12). 1 and 2
/// columns were not measured with them (the FFMA kernel reads at 92.8-93.8 % there at n = 10240).
constexpr std::int64_t kMinCmMmaCols = 3, kMaxCmMmaCols = 16;

/// The instantiated set: per type and layout, t2 in {4, 8, 16, 32} on the 16-byte path and {8, 32}
/// on the scalar fallback (24 main kernels; the reductions: 16-byte and element-wise per type). `t2` is
/// rounded up to the set.
template <class T, bool RM>
KernelInfo pick_kernel(bool vec, int t2) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  if (!vec) return t2 <= 8 ? info<T, RM, 1, 8>() : info<T, RM, 1, 32>();
  if (t2 <= 4) return info<T, RM, kVec, 4>();
  if (t2 <= 8) return info<T, RM, kVec, 8>();
  if (t2 <= 16) return info<T, RM, kVec, 16>();
  return info<T, RM, kVec, 32>();
}

/// Row-major A on the 16-byte path runs on the tensor cores, as wide as the columns need (8, 16 or
/// 32 per pass: the products cost little there, so fewer passes over A win).
template <class T>
KernelInfo pick_mma_kernel(std::int64_t cols) {
  if (cols <= 8) return info_mma<T, 1>();
  if (cols <= 16) return info_mma<T, 2>();
  return info_mma<T, 4>();
}

template <class T>
KernelInfo pick_kernel(bool row_major, bool vec, int t2) {
  return row_major ? pick_kernel<T, true>(vec, t2) : pick_kernel<T, false>(vec, t2);
}

/// Column-major A with 16 columns per pass: the same kernel on half-width vectors (8 bytes per copy:
/// float2 / double), half the accumulators per thread (32 floats / 16 doubles instead of 64 / 32) and
/// so about twice the warps per SM. The full-width kernel runs at 8-12 warps per SM there, issue-bound
/// on its 4 FMAs per byte (ncu, float n = 20480: 54 % issue-active, 12 % of the warp slots).
template <class T>
KernelInfo pick_narrow_kernel() {
  return info<T, false, 8 / static_cast<int>(sizeof(T)), 16>();
}

// ---------------------------------------------------------------------------------------------------
// Host side: planning.

constexpr int kMaxT2 = 32;                 ///< widest instantiated pass
constexpr double kInFlightSafety = 2.5;    ///< model latency (600 cycles) is the unloaded one; HBM3 under load is higher
constexpr double kMaxPartialFraction = 0.03;  ///< split * rows * cols * bytes * 2 / bytes(A) cap (partials mostly stay in L2)
constexpr int kMaxSplit = 128;
constexpr double kTrialMinBytes = 16e6;    ///< smaller A: no trial (first candidate)

/// What the planner needs to know about the device, computed once per device.
struct DeviceFacts {
  int sms = 1;
  std::size_t smem_optin = 48 * 1024;
  double needed_bytes_in_flight = 0;  ///< whole GPU
  tsm2::GpuSpec spec;
  bool spec_ok = false;
  bool tensor_cores = false;  ///< TF32 and double mma (compute capability >= 8.0)
};

std::mutex g_mutex;  // guards the maps below

const DeviceFacts& device_facts(Context& ctx) {
  static std::map<int, DeviceFacts> facts;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = facts.find(ctx.device());
  if (it != facts.end()) return it->second;
  const cudaDeviceProp& props = ctx.properties();
  DeviceFacts f;
  f.sms = std::max(1, props.multiProcessorCount);
  f.tensor_cores = props.major >= 8;
  f.smem_optin = props.sharedMemPerBlockOptin > 0 ? props.sharedMemPerBlockOptin : props.sharedMemPerBlock;
  double per_sm = 12.8 * 600;  // H100 figures if the model cannot run
  try {
    f.spec = tsm2::spec_from_device(props);
    f.spec_ok = true;
    per_sm = tsm2::bytes_in_flight_needed_per_sm(f.spec, tsm2::ModelConstants{});
  } catch (const std::exception&) {
    f.spec_ok = false;
  }
  f.needed_bytes_in_flight = per_sm * kInFlightSafety * f.sms;
  return facts.emplace(ctx.device(), f).first->second;
}

int occupancy(const KernelInfo& k, int t1, std::size_t smem, std::size_t smem_optin) {
  // The launch limit goes to the device maximum, not to this candidate's need: every candidate of a
  // kernel sets it, and the trial may pick one that needs more than the last one set.
  if (smem > 48 * 1024)
    SKINNY_CUDA_TRY(cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_optin)));
  int blocks = 0;
  SKINNY_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.fn, t1, smem));
  return blocks;
}

/// The shape a plan is made for.
struct Shape {
  std::int64_t rows, inner, cols;
  int elem_bytes;
  bool row_major, vec;
};

/// How plans_at splits the inner dimension (every way caps the partial-sum traffic):
///  * filling waves: the smallest split whose waves of resident blocks are >= 95 % full, else the fullest;
///  * a lean wave: the largest split whose grid is one wave of at most kLeanBlocksPerSm blocks per SM.
/// Measured on the H100 (column-major n = 10240, bench/results/h100/2026-11-24_lean-waves/steps): fewer,
/// longer blocks can beat fuller waves. Float k = 2 / 4: FFMA at t1 = 64 93 / 92 % of the read ceiling
/// with split 8 (320 blocks, 2.4 per SM) against 90 / 88 % with split 18 (one 91 % full wave); 3xTF32
/// at t1 = 256 93-94 % with split 6 (one wave, 1.8 blocks per SM) against 91 % with split 13 (two). Double k = 16:
/// DMMA at t1 = 64 93 % with split 2 (640 blocks, 4.8 per SM) against 86-90 % with 4 or 6. Which wins
/// depends on the kernel and the shape, and neighbouring splits can differ by 15 points (one SM's
/// bytes in flight, uneven blocks per SM): the trial times the wave-filling split and the lean waves
/// of kLeanBlocksPerSm where they differ.
constexpr double kLeanBlocksPerSm[] = {2.5, 5.0};

/// The plans for kernel k at t1, one per distinct split: the wave-filling one first, then those of the
/// lean waves whose grid the rows alone do not overflow (only those with Tsm2SplitRule::lean,
/// where there are any). Empty when the kernel cannot run at t1.
std::vector<Tsm2Plan> plans_at(const KernelInfo& k, int t1, const Shape& s, const DeviceFacts& dev,
                               const Tsm2Tuning& tu) {
  Tsm2Plan p;
  const std::size_t smem = k.smem(t1);
  if (smem > dev.smem_optin) return {};
  const int occ = occupancy(k, t1, smem, dev.smem_optin);
  if (occ < 1) return {};
  p.t1 = t1;
  p.t2 = k.t2;
  p.t3 = k.loads_in_flight;
  p.vec = k.vec;
  p.a_row_major = k.row_major;
  p.kernel = k.name;
  p.rows_per_block = k.rows_per_block(t1);
  p.passes = static_cast<int>(ceil_div(s.cols, k.t2));
  p.blocks_per_sm = occ;
  p.smem_bytes = smem;
  p.bytes_in_flight_needed = dev.needed_bytes_in_flight;

  const std::int64_t blocks_per_split = ceil_div(s.rows, p.rows_per_block) * p.passes;
  const std::int64_t capacity = static_cast<std::int64_t>(occ) * dev.sms;  // resident blocks
  const double bif_block = static_cast<double>(t1) * k.bytes_in_flight_per_thread;
  // The split fills the GPU in whole waves of resident blocks: a partial last wave leaves SMs idle
  // while the others finish (H100, double row-major n = 20480: 160 blocks on 132 one-block SMs ran at
  // 58-71 % of the read ceiling). The smallest split whose waves are >= 95 % full wins, else the
  // fullest; ncu at n = 30720 float k = 16 had shown that one under-filled wave (8.75 % occupancy)
  // also costs, which the same measure counts. Splits cost partial-sum traffic (capped) and whole B
  // chunks per split.
  const double a_bytes = static_cast<double>(s.rows) * s.inner * s.elem_bytes;
  const double partial_per_split = 2.0 * s.rows * s.cols * s.elem_bytes;
  const double cap_fraction = tu.partial_cap > 0 ? tu.partial_cap : kMaxPartialFraction;
  const auto traffic_cap = static_cast<std::int64_t>(cap_fraction * a_bytes / partial_per_split);
  const std::int64_t inner = std::max<std::int64_t>(s.inner, 1);
  const std::int64_t min_split = k.max_chunk > 0 ? ceil_div(inner, k.max_chunk) : 1;
  const std::int64_t max_split = std::max(min_split, std::min({std::max<std::int64_t>(1, traffic_cap),
                                                               ceil_div(inner, k.kc),
                                                               static_cast<std::int64_t>(kMaxSplit)}));
  auto chunk_for = [&](std::int64_t split) { return ceil_div(ceil_div(inner, split), k.kc) * k.kc; };
  // Whole B chunks per split: the splits a split's chunk size really makes (never more).
  auto splits_of = [&](std::int64_t split) { return ceil_div(inner, chunk_for(split)); };
  auto wave_fill = [&](std::int64_t split) {
    const double blocks = static_cast<double>(blocks_per_split * splits_of(split));
    return blocks / (std::ceil(blocks / static_cast<double>(capacity)) * static_cast<double>(capacity));
  };
  p.grid_x = blocks_per_split;
  auto with_split = [&](std::int64_t split) {
    if (tu.split > 0) split = std::max(min_split, std::min<std::int64_t>(tu.split, ceil_div(inner, k.kc)));
    Tsm2Plan q = p;
    q.inner_per_split = chunk_for(split);
    split = splits_of(split);
    q.split = static_cast<int>(split);
    q.bytes_in_flight = static_cast<double>(std::min(blocks_per_split * split, capacity)) * bif_block;
    q.partial_fraction = split > 1 ? split * partial_per_split / a_bytes : 0.0;
    return q;
  };

  std::int64_t split = min_split;
  for (std::int64_t c = min_split; c <= max_split; ++c) {
    if (wave_fill(c) > wave_fill(split) + 1e-9) split = c;
    if (wave_fill(split) >= 0.95) break;
  }
  std::vector<Tsm2Plan> plans{with_split(split)};
  if (plans[0].split == 1) return plans;
  for (double blocks_per_sm : kLeanBlocksPerSm) {
    const double wave = std::min(static_cast<double>(capacity), blocks_per_sm * dev.sms);
    if (static_cast<double>(blocks_per_split * splits_of(min_split)) > wave) continue;
    std::int64_t lean = min_split;
    for (std::int64_t c = min_split; c <= max_split; ++c)
      if (static_cast<double>(blocks_per_split * splits_of(c)) <= wave) lean = c;
    const Tsm2Plan q = with_split(lean);
    if (std::none_of(plans.begin(), plans.end(), [&](const Tsm2Plan& r) { return r.split == q.split; }))
      plans.push_back(q);
  }
  if (tu.split_rule == Tsm2SplitRule::lean && plans.size() > 1) plans.erase(plans.begin());
  return plans;
}

/// Kernel k's t1 candidates in trial order (the first is the no-trial choice): 512 as well where its
/// launch bound allows it. Tsm2Tuning::t1 leaves one, for the kernels that can run it.
std::vector<int> t1_candidates(const KernelInfo& k, const Tsm2Tuning& tu) {
  cudaFuncAttributes attr{};
  SKINNY_CUDA_TRY(cudaFuncGetAttributes(&attr, k.fn));
  const int max_t1 = attr.maxThreadsPerBlock;  // the launch bound the kernel was compiled with
  if (tu.t1 > 0 && tu.t1 <= max_t1) return {tu.t1};
  std::vector<int> t1s = k.row_major ? std::vector<int>{128, 64, 256} : std::vector<int>{64, 128, 256};
  if (max_t1 >= 512) t1s.push_back(512);
  return t1s;
}

using PlanKey = std::tuple<int, int, bool, bool, std::int64_t, std::int64_t, std::int64_t, std::string>;

/// A shape's plan and the kernel it runs, kept after the first call: a cached call goes straight to
/// the launch (the planning queries the occupancy of every candidate, which cost ~15 us of host time
/// per call, all of it inside the call's measured time: 10 % of a 0.15 ms product at n = 10240).
struct ChosenPlan {
  Tsm2Plan plan;
  KernelInfo kernel;
};
std::map<PlanKey, ChosenPlan>& plan_cache() {
  static std::map<PlanKey, ChosenPlan> cache;
  return cache;
}

/// The 16-byte path needs A 16-byte aligned and lda a multiple of the vector.
template <class T>
bool can_vectorize(const TallSkinny<T>& t) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  return reinterpret_cast<std::uintptr_t>(t.a) % 16 == 0 && t.lda % kVec == 0;
}

template <class T>
PlanKey key_of(const TallSkinny<T>& t, const Context& ctx) {
  return PlanKey{ctx.device(), static_cast<int>(sizeof(T)), t.a_layout == Layout::row_major, can_vectorize(t),
                 t.rows, t.inner, t.cols, ctx.tsm2_tuning_key()};
}

/// The cached choice for this key, if the shape was launched before.
bool find_cached(const PlanKey& key, ChosenPlan& out) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = plan_cache().find(key);
  if (it == plan_cache().end()) return false;
  out = it->second;
  return true;
}

template <class T>
struct Prepared {
  TallSkinny<T> t;
  Shape shape;
  std::vector<ChosenPlan> candidates;  ///< in trial order; the first is the no-trial choice
  PlanKey key;
  int model_t2 = 0, model_t3 = 0;
};

template <class T>
Prepared<T> prepare(const Problem& prob, Context& ctx) {
  Prepared<T> pr;
  pr.t = to_tall_skinny<T>(prob);
  const TallSkinny<T>& t = pr.t;
  const bool rm = t.a_layout == Layout::row_major;
  const bool vec = can_vectorize(t);
  pr.shape = Shape{t.rows, t.inner, t.cols, static_cast<int>(sizeof(T)), rm, vec};
  pr.key = key_of(t, ctx);
  const DeviceFacts& dev = device_facts(ctx);
  const Tsm2Tuning& tu = ctx.tsm2_tuning();

  // The model's t2 (columns per pass) mapped up to the instantiated set; its t3 is reported only: the
  // kernels' loads in flight are set by their cp.async rings, not by registers.
  int t2 = static_cast<int>(std::min<std::int64_t>(t.cols, kMaxT2));
  if (dev.spec_ok && t.rows > 0 && t.cols > 0) {
    try {
      const auto prec = sizeof(T) == 8 ? tsm2::Precision::f64 : tsm2::Precision::f32;
      const tsm2::Params mp = tsm2::choose_t2_t3(dev.spec, tsm2::ModelConstants{}, prec, t.rows, t.cols);
      pr.model_t2 = mp.t2;
      pr.model_t3 = mp.t3;
      t2 = std::max(1, std::min(mp.t2, kMaxT2));
    } catch (const std::exception&) {
    }
  }
  if (tu.max_t2 > 0) t2 = std::min(t2, tu.max_t2);
  // Row-major A has up to three kernels and the trial times them all. Measured on the H100, the tensor
  // cores win on the K-means shape (k = 16: double 98 %, float 96 % against the FFMA kernel's 87 %;
  // elsewhere the trial decides); with <= 8 columns the row-at-a-time kernel reads A in longer runs.
  // Column-major A with 3..16 columns has the FFMA kernel at full and half width and the tensor-core
  // kernels (DMMA; 3xTF32 for float). Without a trial the first candidate runs: the tensor cores for
  // row-major double, else the FFMA kernel (no B image to build for small problems).
  std::vector<KernelInfo> kernels{pick_kernel<T>(rm, vec, t2)};
  if (!rm && vec && kernels[0].t2 == 16) kernels.push_back(pick_narrow_kernel<T>());
  const Tsm2ColMajorKernel cm_only = tu.col_major_kernel;
  if (!rm && vec && dev.tensor_cores && cm_only != Tsm2ColMajorKernel::ffma) {
    std::vector<KernelInfo> mma{pick_cm_dmma_kernel<T>(t.cols)};
    if (std::is_same_v<T, float>) mma.push_back(pick_cm_tf32_kernel());
    if (cm_only == Tsm2ColMajorKernel::dmma)
      kernels = {mma[0]};
    else if (cm_only == Tsm2ColMajorKernel::tf32)
      kernels = {mma.back()};  // double: DMMA
    else if (t.cols >= kMinCmMmaCols && t.cols <= kMaxCmMmaCols)
      kernels.insert(kernels.end(), mma.begin(), mma.end());
  }
  const Tsm2RowMajorKernel only = tu.row_major_kernel;
  if (rm && vec && dev.tensor_cores && only != Tsm2RowMajorKernel::ffma && only != Tsm2RowMajorKernel::stream) {
    const KernelInfo mma = pick_mma_kernel<T>(tu.max_t2 > 0 ? std::min<std::int64_t>(t.cols, tu.max_t2) : t.cols);
    if (only == Tsm2RowMajorKernel::mma)
      kernels = {mma};
    else
      kernels.insert(sizeof(T) == 8 ? kernels.begin() : kernels.end(), mma);
  }
  if (rm && vec && t.cols <= kMaxStreamCols && only != Tsm2RowMajorKernel::ffma && only != Tsm2RowMajorKernel::mma) {
    const KernelInfo stream = pick_stream_kernel<T>(t.cols);
    if (only == Tsm2RowMajorKernel::stream)
      kernels = {stream};
    else
      kernels.push_back(stream);
  }
  for (const KernelInfo& k : kernels)
    for (int t1 : t1_candidates(k, tu))
      for (Tsm2Plan& p : plans_at(k, t1, pr.shape, dev, tu)) {
        p.model_t2 = pr.model_t2;
        p.model_t3 = pr.model_t3;
        pr.candidates.push_back(ChosenPlan{p, k});
      }
  if (pr.candidates.empty())
    throw std::runtime_error("tsm2: no t1 candidate fits on " + std::string(ctx.properties().name));
  return pr;
}

/// Workspace elements of the partial sums (split > 1), rounded up so that the B image after them
/// starts 256-byte aligned (it is read by 16-byte copies).
std::int64_t partials_elems(const Tsm2Plan& p, std::int64_t rows, std::int64_t cols) {
  return p.split > 1 ? ceil_div(p.split * rows * cols, 64) * 64 : 0;
}

/// Workspace elements plan p of kernel k needs: the partial sums, then the B image.
template <class T>
std::int64_t workspace_elems(const Tsm2Plan& p, const KernelInfo& k, const TallSkinny<T>& t) {
  return partials_elems(p, t.rows, t.cols) + (k.b_image ? k.b_image(t.inner, p.passes) : 0);
}

/// Launches plan `p`: the B image where the kernel reads one, the main kernel, and the reduction when
/// split > 1. `ws` holds workspace_elems(p, k, t) elements.
template <class T>
void run(const Tsm2Plan& p, const KernelInfo& k, Args<T> g, T* ws, cudaStream_t stream, int sms) {
  g.ws = ws;
  g.chunk = p.inner_per_split;
  g.passes = p.passes;
  g.split = p.split;
  if (k.b_image) {
    T* image = ws + partials_elems(p, g.rows, g.cols);
    const std::int64_t total = k.b_image(g.inner, p.passes);
    const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(total, 256), 4LL * sms));
    void* image_params[] = {&g, &image};
    SKINNY_CUDA_TRY(cudaLaunchKernel(k.b_image_fn, dim3(blocks), dim3(256), image_params, 0, stream));
    g.b_image = image;
  }
  void* params[] = {&g};
  const dim3 grid(static_cast<unsigned>(p.grid_x), static_cast<unsigned>(p.split));
  SKINNY_CUDA_TRY(cudaLaunchKernel(k.fn, grid, dim3(p.t1), params, p.smem_bytes, stream));
  if (p.split == 1) return;

  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  const std::int64_t total = g.rows * g.cols;
  const bool vectors = total % kVec == 0;
  const std::int64_t threads = vectors ? total / kVec : total;
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(threads, 256), 8LL * sms));
  const void* reduce = vectors ? reinterpret_cast<const void*>(&tsm2_reduce_kernel<T, kVec>)
                               : reinterpret_cast<const void*>(&tsm2_reduce_kernel<T, 1>);
  launch_after_previous(reduce, dim3(blocks), dim3(256), params, stream);
}

template <class T>
Args<T> make_args(const TallSkinny<T>& t) {
  Args<T> g{};
  g.a = t.a;
  g.lda = t.lda;
  g.b = t.b;
  g.b_rs = t.b_row_stride;
  g.b_cs = t.b_col_stride;
  g.c = t.c;
  g.c_rs = t.c_row_stride;
  g.c_cs = t.c_col_stride;
  g.rows = t.rows;
  g.inner = t.inner;
  g.cols = t.cols;
  g.alpha = t.alpha;
  g.beta = t.beta;
  return g;
}

/// Times the candidates, writing C to scratch in the workspace with beta = 0, and returns the index of
/// the fastest: one warm-up launch each (which also loads its kernel), then rounds that time every
/// candidate once, interleaved so that a drift of the clocks during the trial favours none; each
/// candidate's median time counts. (Two back-to-back timings per candidate had kept a 1-2 % slower t1
/// for the double column-major K-means shape in one process of three; the best of three rounds then
/// kept, on the H100, a split 2 % slower than another for float n = 10240, k = 4, and the FFMA kernel
/// at 91 % of the read ceiling over DMMA at 97 % for the double column-major K-means shape.) As many
/// rounds as fit in about kTrialBudgetMs, from kTrialMinRounds to kTrialMaxRounds.
constexpr int kTrialMinRounds = 3, kTrialMaxRounds = 15;
constexpr double kTrialBudgetMs = 50;
constexpr double kTrialBytesPerMs = 2.5e9;  ///< to estimate a round's time: ~2.5 TB/s
/// Double A: a kernel on the FP64 FMA pipes must beat a tensor-core candidate by this fraction of its
/// time. The FFMA kernels spend k multiply-adds per element of A there, so their speed follows the SM
/// clock, which the power cap lowers in a sustained run; the tensor cores' hardly. Measured on the H100,
/// double column-major K-means shape (bench/results/h100/2026-11-24_dmma-block-copies/steps): the FFMA
/// kernel drew 661-668 W with the clock falling to 1815 MHz where DMMA drew 645-651 W at 1965 MHz; at
/// the base clock (1.59 GHz, under ncu) FFMA took 2.98-3.00 ms and DMMA 2.89; at full clock FFMA led
/// by under 1 %. A short interleaved trial does not see the sustained clock: on one lease it picked the
/// FFMA kernel, which then ran at 91.4-94.6 % of the read ceiling (…/2026-11-24_vector-reduce/steps/09).
constexpr double kFp64FmaMargin = 0.02;
template <class T>
std::size_t trial(const Prepared<T>& pr, Context& ctx) {
  std::int64_t ws_elems = 0;
  for (const auto& c : pr.candidates) ws_elems = std::max(ws_elems, workspace_elems(c.plan, c.kernel, pr.t));
  const std::int64_t rc = pr.t.rows * pr.t.cols;
  T* ws = static_cast<T*>(ctx.workspace(static_cast<std::size_t>(ws_elems + rc) * sizeof(T)));
  T* scratch = ws + ws_elems;
  Args<T> g = make_args(pr.t);
  g.c = scratch;
  g.c_rs = pr.t.cols;
  g.c_cs = 1;
  g.beta = T(0);
  const cudaStream_t stream = ctx.stream();
  const int sms = ctx.properties().multiProcessorCount;
  for (const ChosenPlan& c : pr.candidates) run(c.plan, c.kernel, g, ws, stream, sms);  // warm-up
  CudaEvent start, stop;
  const double a_bytes = static_cast<double>(pr.t.rows) * pr.t.inner * sizeof(T);
  const double round_ms = static_cast<double>(pr.candidates.size()) * a_bytes / kTrialBytesPerMs;
  const int rounds = std::clamp(static_cast<int>(kTrialBudgetMs / round_ms), kTrialMinRounds, kTrialMaxRounds);
  std::vector<std::vector<float>> ms(pr.candidates.size());
  for (int round = 0; round < rounds; ++round)
    for (std::size_t i = 0; i < pr.candidates.size(); ++i) {
      const ChosenPlan& c = pr.candidates[i];
      start.record(stream);
      run(c.plan, c.kernel, g, ws, stream, sms);
      stop.record(stream);
      ms[i].push_back(stop.ms_since(start));
    }
  std::vector<float> median_ms;
  for (std::vector<float>& m : ms) {
    std::nth_element(m.begin(), m.begin() + m.size() / 2, m.end());
    median_ms.push_back(m[m.size() / 2]);
  }
  const bool tensor_candidate = std::any_of(pr.candidates.begin(), pr.candidates.end(),
                                            [](const ChosenPlan& c) { return c.kernel.tensor_cores; });
  std::vector<double> score(median_ms.begin(), median_ms.end());
  for (std::size_t i = 0; i < pr.candidates.size(); ++i) {
    if (std::is_same_v<T, double> && tensor_candidate && !pr.candidates[i].kernel.tensor_cores)
      score[i] *= 1 + kFp64FmaMargin;
    if (ctx.tsm2_tuning().verbose)
      std::fprintf(stderr, "  trial, median of %d: %.4f ms (score %.4f) %s\n", rounds, median_ms[i], score[i],
                   pr.candidates[i].plan.describe().c_str());
  }
  return static_cast<std::size_t>(std::min_element(score.begin(), score.end()) - score.begin());
}

template <class T>
Tsm2Plan plan_typed(const Problem& prob, Context& ctx) {
  ChosenPlan cached;
  if (find_cached(key_of(to_tall_skinny<T>(prob), ctx), cached)) return cached.plan;
  return prepare<T>(prob, ctx).candidates[0].plan;
}

/// Plans a shape on its first call: the candidates, the trial among them, the cache entry.
template <class T>
ChosenPlan choose_plan(const Problem& prob, Context& ctx) {
  Prepared<T> pr = prepare<T>(prob, ctx);
  const TallSkinny<T>& t = pr.t;
  ChosenPlan chosen = pr.candidates[0];
  const double a_bytes = static_cast<double>(t.rows) * t.inner * sizeof(T);
  if (pr.candidates.size() > 1 && ctx.tsm2_tuning().trial && a_bytes >= kTrialMinBytes) {
    chosen = pr.candidates[trial(pr, ctx)];
    chosen.plan.from_trial = true;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  // A concurrent first call may have won; both keep its choice.
  const auto [it, inserted] = plan_cache().emplace(pr.key, chosen);
  if (inserted && ctx.tsm2_tuning().verbose)
    std::fprintf(stderr, "%lld x %lld x %lld: %s\n", static_cast<long long>(t.rows), static_cast<long long>(t.inner),
                 static_cast<long long>(t.cols), chosen.plan.describe().c_str());
  return it->second;
}

template <class T>
void launch_typed(const Problem& prob, Context& ctx) {
  const TallSkinny<T> t = to_tall_skinny<T>(prob);
  if (t.rows == 0 || t.cols == 0) return;
  ChosenPlan chosen;
  if (!find_cached(key_of(t, ctx), chosen)) chosen = choose_plan<T>(prob, ctx);
  T* ws = nullptr;
  if (const std::int64_t elems = workspace_elems(chosen.plan, chosen.kernel, t); elems > 0)
    ws = static_cast<T*>(ctx.workspace(static_cast<std::size_t>(elems) * sizeof(T)));
  run(chosen.plan, chosen.kernel, make_args(t), ws, ctx.stream(), ctx.properties().multiProcessorCount);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

std::string Tsm2Plan::describe() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "tsm2 %s %s vec=%d t1=%d t2=%d t3=%d split=%d passes=%d rows/block=%d inner/split=%lld grid=%lldx%d "
                "occ=%d/SM smem=%zuB in-flight=%.2fMB (need %.2fMB) partials=%.2f%% model(t2=%d,t3=%d)%s",
                a_row_major ? "row-major" : "col-major", kernel, vec, t1, t2, t3, split, passes,
                rows_per_block, static_cast<long long>(inner_per_split), static_cast<long long>(grid_x), split,
                blocks_per_sm, smem_bytes, bytes_in_flight / 1e6, bytes_in_flight_needed / 1e6,
                partial_fraction * 100, model_t2, model_t3, from_trial ? " trial" : "");
  return buf;
}

Tsm2Plan plan_tsm2(const Problem& p, Context& ctx) {
  if (p.in_type == DType::f64) return plan_typed<double>(p, ctx);
  return plan_typed<float>(p, ctx);
}

Support tsm2_can_implement(const Problem& p) {
  Support s = tsm2_support(p, "tsm2");
  if (!s) return s;
  // Smallest block: 64 rows (column-major scalar at t1 = 64; row-major at t1 = 64 covers >= 64 rows).
  const std::int64_t rows = skinny_side(p) == p.n ? p.m : p.n;
  const std::int64_t passes = ceil_div(skinny_side(p), kMaxT2) * (kMaxT2 / 4);  // worst case: t2 = 4
  if (ceil_div(rows, 64) * passes > INT_MAX)
    return Support::no("tsm2: " + std::to_string(rows) + " rows need more than 2^31 - 1 blocks");
  return Support::yes();
}

void tsm2_launch(const Problem& p, Context& ctx) {
  if (p.in_type == DType::f64)
    launch_typed<double>(p, ctx);
  else
    launch_typed<float>(p, ctx);
  SKINNY_CHECK_LAUNCH();
}

}  // namespace skinny::gemm::detail
