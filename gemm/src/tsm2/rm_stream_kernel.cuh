// TSM2 for row-major A with few columns (k <= 8): C = alpha * A * B + beta * C, each row of C a handful
// of dot products along a contiguous row of A (the ABFT column checksums [e w]^T A of a column-major A).
//
// Why (measured on the H100, 20480 x 20480, k = 2): the FFMA and tensor-core row-major kernels read
// 128-256 bytes of each of many rows per stage and reached 88 % (float) / 93 % (double) of the read
// ceiling; a first version of this kernel that held its loads in registers (one 4 KB batch per warp
// in flight, 64 KB per SM) reached 89 % / 92 %. Here a warp reads one row at a time, 4 KB contiguous
// per stage, through its own cp.async ring in shared memory: three stages (12 KB) in flight per warp,
// 96 KB per SM at any t1, as the column-major kernel that reaches 98 % keeps. Each lane reads back only
// what it copied, so the ring needs no barriers; the few products per element cost little.
//
// A block owns rows_per_block rows and one split of the inner dimension; this split's B^T (16 KB) is
// copied into shared memory with the first stage. A lane's 16 bytes of A meet the 16 bytes of each
// B^T row at the same offset: conflict-free. At the end of a row the lanes' sums are combined by a
// butterfly of shuffles (fixed order: deterministic). Included only by tsm2.cu.
#pragma once

#include "tsm2_device.cuh"

#include <cstdint>

namespace skinny::gemm::detail::tsm2_device {

template <class T, int T2_>
struct RmStreamCfg {
  static constexpr int T2 = T2_;                    ///< columns of C per pass
  static constexpr int VEC = 16 / int(sizeof(T));
  using V = typename VecOf<T, VEC>::type;
  static constexpr int U = 8;                       ///< 16-byte copies per lane per stage
  static constexpr int WARP_STEP = 32 * VEC;        ///< inner elements of one warp-wide copy
  static constexpr int BATCH = U * WARP_STEP;       ///< inner elements of a stage: 4 KB of a row
  static constexpr int S = 4;                       ///< stages in each warp's ring (S - 1 in flight)
  /// Rows each warp walks. Measured on the H100 (float, 20480 x 20480, k = 2): 16 or 32 (longer-lived
  /// blocks that copy B^T less often) were 1-4 % slower than 8 at every t1.
  static constexpr int ROWS_PER_WARP = 8;
  /// Inner elements of B^T a block holds: 16 KB of shared memory, whole warp steps.
  static constexpr int KC = 16 * 1024 / (T2 * int(sizeof(T))) / WARP_STEP * WARP_STEP;
  static_assert(KC >= WARP_STEP, "B^T must hold at least one warp step");
  __host__ __device__ static std::size_t ring_bytes(int t1) { return std::size_t(t1 / 32) * S * BATCH * sizeof(T); }
  static std::size_t smem(int t1) { return ring_bytes(t1) + sizeof(T) * T2 * KC; }
  __host__ __device__ static int rows_per_block(int t1) { return t1 / 32 * ROWS_PER_WARP; }
  static int loads_in_flight() { return (S - 1) * U; }
  static int bytes_in_flight_per_thread() { return (S - 1) * U * 16; }
};

template <class T, int T2>
__global__ void __launch_bounds__(256) tsm2_rm_stream_kernel(const Args<T> g) {
  using Cfg = RmStreamCfg<T, T2>;
  using V = typename Cfg::V;
  constexpr int VEC = Cfg::VEC, U = Cfg::U, WARP_STEP = Cfg::WARP_STEP, BATCH = Cfg::BATCH, S = Cfg::S,
                KC = Cfg::KC;
  extern __shared__ __align__(16) unsigned char smem[];
  const int t1 = blockDim.x, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  V* ring = reinterpret_cast<V*>(smem) + warp * S * U * 32;    // this warp's [S][U][32 lanes]
  T* bt = reinterpret_cast<T*>(smem + Cfg::ring_bytes(t1));  // B^T of this split: [T2][KC]

  const int pass = static_cast<int>(blockIdx.x % static_cast<unsigned>(g.passes));
  const std::int64_t rg = blockIdx.x / static_cast<unsigned>(g.passes);
  const std::int64_t j0 = static_cast<std::int64_t>(pass) * T2;
  const int split = rotated_split(g.split, rg);
  const std::int64_t p_begin = static_cast<std::int64_t>(split) * g.chunk;
  const int len = static_cast<int>(min(g.inner, p_begin + g.chunk) - p_begin);  // <= KC (the planner)
  const std::int64_t row0 = (rg * (t1 / 32) + warp) * Cfg::ROWS_PER_WARP;
  const int rows_here =
      static_cast<int>(max(std::int64_t(0), min(std::int64_t(Cfg::ROWS_PER_WARP), g.rows - row0)));
  const int per_row = (len + BATCH - 1) / BATCH;  // stages per row
  const int stages = rows_here * per_row;

  // Stages are (row, batch) pairs in order; `next_row`/`next_batch` is the next one to copy.
  int next_row = 0, next_batch = 0;
  auto issue = [&](int slot) {
    if (next_row >= rows_here) return;
    const T* a_row = g.a + (row0 + next_row) * g.lda + p_begin;
    const int q0 = next_batch * BATCH + lane * VEC;
    V* dst = ring + slot * U * 32 + lane;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int q = q0 + u * WARP_STEP, left = len - q;
      const int nb = left <= 0 ? 0 : (left >= VEC ? VEC : left) * int(sizeof(T));
      copy_vector(dst + u * 32, nb > 0 ? a_row + q : g.a, nb, g.a);
    }
    if (++next_batch == per_row) {
      next_batch = 0;
      ++next_row;
    }
  };

  fill_b<T, KC, T2, true, KC>(bt, g, p_begin, p_begin + len, j0, tid, t1);
  issue(0);
  cp_async_commit();
#pragma unroll
  for (int s = 1; s < S - 1; ++s) {
    issue(s);
    cp_async_commit();
  }
  cp_async_wait<S - 2>();  // B^T (with stage 0) from every thread
  __syncthreads();

  T acc[T2];
#pragma unroll
  for (int j = 0; j < T2; ++j) acc[j] = T(0);
  int slot = 0, islot = S - 1, row = 0, batch = 0;
  for (int st = 0; st < stages; ++st) {
    cp_async_wait<S - 2>();  // this lane's copies of stage st have landed
    issue(islot);
    cp_async_commit();
    islot = islot + 1 == S ? 0 : islot + 1;

    const int q0 = batch * BATCH + lane * VEC;
    const V* a_s = ring + slot * U * 32 + lane;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (q0 + u * WARP_STEP >= len) break;  // past the split (zeros; B^T may end before)
      const V av = a_s[u * 32];
#pragma unroll
      for (int j = 0; j < T2; ++j) {
        const V bv = *reinterpret_cast<const V*>(bt + j * KC + q0 + u * WARP_STEP);
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[j] = fma(elem<T>(av, v), elem<T>(bv, v), acc[j]);
      }
    }
    slot = slot + 1 == S ? 0 : slot + 1;
    if (++batch < per_row) continue;

    // Row done: combine the lanes' sums (uniform across the warp), store, start the next row.
    const std::int64_t i = row0 + row;
    batch = 0;
    ++row;
#pragma unroll
    for (int j = 0; j < T2; ++j)
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
#pragma unroll
    for (int j = 0; j < T2; ++j) {
      if (lane == j && j0 + j < g.cols) {
        store_result(g, split, i, j0 + j, acc[j]);
      }
      acc[j] = T(0);
    }
  }
  cp_async_wait<0>();
}

}  // namespace skinny::gemm::detail::tsm2_device
