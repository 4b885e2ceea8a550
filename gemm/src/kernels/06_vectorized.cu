// 06 vectorized: 2D block tiling with 16-byte memory traffic. Each block computes a BM x BN tile of C
// with BM*BN/(TM*TN) threads, each holding TM x TN results in registers. A is stored transposed in shared
// memory (As[k][m]) so both operands are read along a row with 16-byte shared loads; global tiles are
// fetched with 16-byte loads where alignment and bounds allow. Two shared stages: the next tile is
// prefetched into registers while the current one is computed, one __syncthreads per k-tile.
//
// A thread's TM x TN results are (TM/V) x (TN/V) sub-blocks of V x V (V = elements per 16 bytes): rows
// ty*V + g*RS and columns tx*V + h*CS, where RS = V*BM/TM and CS = V*BN/TN (for float 128x128 with 8x8:
// rows ty*4 and ty*4+64, columns tx*4 and tx*4+64). The V-wide shared reads of a warp are then contiguous
// and conflict-free. Within a block, the threads of a warp form a 4 x 8 patch of (ty, tx), so a warp
// reads 4 distinct A vectors and 8 distinct B vectors per k: one shared wavefront each.
#include "common.cuh"
#include "launchers.hpp"

namespace skinny::gemm::detail {
namespace {

// ---- 16-byte vector types ---------------------------------------------------------------------------

template <class T>
struct Vec16;
template <>
struct Vec16<float> {
  using type = float4;
  static constexpr int width = 4;
  __device__ __forceinline__ static void unpack(const float4& v, float* r) {
    r[0] = v.x;
    r[1] = v.y;
    r[2] = v.z;
    r[3] = v.w;
  }
  __device__ __forceinline__ static float4 pack(const float* r) { return make_float4(r[0], r[1], r[2], r[3]); }
};
template <>
struct Vec16<double> {
  using type = double2;
  static constexpr int width = 2;
  __device__ __forceinline__ static void unpack(const double2& v, double* r) {
    r[0] = v.x;
    r[1] = v.y;
  }
  __device__ __forceinline__ static double2 pack(const double* r) { return make_double2(r[0], r[1]); }
};

template <class T>
__device__ __forceinline__ void load16(T* r, const T* src) {
  Vec16<T>::unpack(*reinterpret_cast<const typename Vec16<T>::type*>(src), r);
}
/// Read-only global loads (ld.global.nc): A and B are never written while the kernel runs.
template <class T>
__device__ __forceinline__ void load16_global(T* r, const T* src) {
  Vec16<T>::unpack(__ldg(reinterpret_cast<const typename Vec16<T>::type*>(src)), r);
}
template <class T>
__device__ __forceinline__ void store16(T* dst, const T* r) {
  *reinterpret_cast<typename Vec16<T>::type*>(dst) = Vec16<T>::pack(r);
}

// ---- Tile loaders -----------------------------------------------------------------------------------
//
// Both operands are staged in shared memory k-major: S[kk][w], with w the m index (A) or the n index (B).
// Element (kg, wg) of that view is A(wg, kg) or B(kg, wg). The 16-byte runs in global memory lie along k
// ("along_k": row-major A, column-major B; offset wg*ld + kg) or along w (column-major A, row-major B;
// offset kg*ld + wg). Run number v = tid + l*NT of a tile maps to
//   along k: kk = (v % (BK/V)) * V, w = v / (BK/V)   -> elements (kk..kk+V-1, w), scattered into S
//   along w: w = (v % (W/V)) * V,   kk = v / (W/V)   -> elements (kk, w..w+V-1), one 16-byte shared store
// so consecutive threads read consecutive 16-byte pieces of global memory. Either way a run is V
// consecutive elements in memory. Each thread keeps one pointer per run and advances it by one k-tile.

template <class T, bool IsA, class Op, int BK, int W, int NT>
struct TileLoader {
  static constexpr int V = Vec16<T>::width;
  static constexpr int kRuns = BK * W / V;
  static constexpr int kPerThread = kRuns / NT;
  static_assert(BK % V == 0 && W % V == 0, "tile extents must be multiples of the vector width");
  static_assert(kRuns % NT == 0, "each thread must load the same number of 16-byte runs");
  static constexpr bool along_k = IsA ? Op::row_major : !Op::row_major;

  const T* ptr[kPerThread];  // start of this thread's run l in the current k-tile
  std::int64_t step;         // elements between the same run of consecutive k-tiles
  int wrem;                  // rows (A) or columns (B) of this block's tile inside the matrix, at most W

  __device__ __forceinline__ static void coords(int tid, int l, int& kk, int& w) {
    const int v = tid + l * NT;
    if constexpr (along_k) {
      kk = (v % (BK / V)) * V;
      w = v / (BK / V);
    } else {
      w = (v % (W / V)) * V;
      kk = v / (W / V);
    }
  }

  /// Positions the runs on k-tile 0 of the block tile that starts at w0; `wmax` is m (A) or n (B).
  __device__ __forceinline__ TileLoader(const Op& op, int tid, std::int64_t w0, std::int64_t wmax) {
    wrem = int(wmax - w0 < W ? wmax - w0 : W);
    step = along_k ? BK : BK * op.ld;
#pragma unroll
    for (int l = 0; l < kPerThread; ++l) {
      int kk, w;
      coords(tid, l, kk, w);
      // Runs with w >= wrem are never dereferenced (vector loads need a full tile, scalar ones are guarded).
      ptr[l] = op.p + (along_k ? (w0 + w) * op.ld + kk : std::int64_t(kk) * op.ld + w0 + w);
    }
  }

  /// Global -> registers for the current k-tile, whose first `krem` k indices lie inside the matrix.
  /// 16-byte loads when the operand allows them and the whole tile lies inside the matrix; otherwise
  /// guarded scalar loads that zero-fill. Then steps to the next k-tile.
  __device__ __forceinline__ void load_and_advance(T (&r)[kPerThread][V], int tid, int krem, bool vec_ok) {
    if (vec_ok && krem >= BK && wrem == W) {
#pragma unroll
      for (int l = 0; l < kPerThread; ++l) load16_global(r[l], ptr[l]);
    } else {
#pragma unroll
      for (int l = 0; l < kPerThread; ++l) {
        int kk, w;
        coords(tid, l, kk, w);
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const bool in = along_k ? (kk + e < krem && w < wrem) : (kk < krem && w + e < wrem);
          r[l][e] = in ? __ldg(ptr[l] + e) : T(0);
        }
      }
    }
#pragma unroll
    for (int l = 0; l < kPerThread; ++l) ptr[l] += step;
  }

  /// Registers -> shared stage S (BK rows of LD elements).
  template <int LD>
  __device__ __forceinline__ static void store(T (*s)[LD], const T (&r)[kPerThread][V], int tid) {
#pragma unroll
    for (int l = 0; l < kPerThread; ++l) {
      int kk, w;
      coords(tid, l, kk, w);
      if constexpr (along_k) {
#pragma unroll
        for (int e = 0; e < V; ++e) s[kk + e][w] = r[l][e];
      } else {
        store16(&s[kk][w], r[l]);
      }
    }
  }
};

/// threadIdx.x / blockIdx.x / blockIdx.y through volatile asm, so the compiler cannot reuse values it
/// computed before the main loop (which would keep them in registers across it).
__device__ __forceinline__ int fresh_tid_x() {
  int v;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(v));
  return v;
}
__device__ __forceinline__ int fresh_ctaid_x() {
  int v;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(v));
  return v;
}
__device__ __forceinline__ int fresh_ctaid_y() {
  int v;
  asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(v));
  return v;
}

// ---- Kernel -----------------------------------------------------------------------------------------

template <class T, int BM, int BN, int BK, int TM, int TN, int MinBlocks, class OpA, class OpB>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MinBlocks)
    vectorized_kernel(OpA a, OpB b, T* __restrict__ c, std::int64_t ldc, int m, int n, int k, T alpha, T beta,
                      bool a_vec_ok, bool b_vec_ok, bool c_vec_ok) {
  constexpr int V = Vec16<T>::width;
  constexpr int TX = BN / TN;  // threads along n
  constexpr int TY = BM / TM;  // threads along m
  constexpr int NT = TX * TY;
  constexpr int RS = V * TY;            // row distance between a thread's V x V sub-blocks
  constexpr int CS = V * TX;            // column distance
  constexpr int WX = TX >= 8 ? 8 : TX;  // a warp is a WY x WX patch of (ty, tx)
  constexpr int WY = 32 / WX;
  constexpr int PAD = V;  // keeps rows 16-byte aligned, makes the along-k scatter conflict-free
  static_assert(BM % TM == 0 && BN % TN == 0, "tile must divide evenly among threads");
  static_assert(TM % V == 0 && TN % V == 0, "per-thread results must be whole 16-byte sub-blocks");
  static_assert(NT % 32 == 0 && 32 % WX == 0 && TX % WX == 0 && TY % WY == 0, "warp shape must tile the block");
  static_assert(BK % V == 0, "BK must be a multiple of the vector width");

  using LoadA = TileLoader<T, true, OpA, BK, BM, NT>;
  using LoadB = TileLoader<T, false, OpB, BK, BN, NT>;

  __shared__ __align__(16) T As[2][BK][BM + PAD];
  __shared__ __align__(16) T Bs[2][BK][BN + PAD];

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int ty = (warp / (TX / WX)) * WY + lane / WX;
  const int tx = (warp % (TX / WX)) * WX + lane % WX;

  const std::int64_t m0 = std::int64_t(blockIdx.x) * BM;
  const std::int64_t n0 = std::int64_t(blockIdx.y) * BN;
  LoadA load_a(a, tid, m0, m);
  LoadB load_b(b, tid, n0, n);

  T ra[LoadA::kPerThread][V];
  T rb[LoadB::kPerThread][V];
  T acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = T(0);

  load_a.load_and_advance(ra, tid, k, a_vec_ok);
  load_b.load_and_advance(rb, tid, k, b_vec_ok);
  LoadA::store(As[0], ra, tid);
  LoadB::store(Bs[0], rb, tid);
  __syncthreads();

  // krem: k indices left after the current tile (no overflow: it stays within [k - BK*tiles, k)).
  for (int cur = 0, krem = k - BK;; cur ^= 1, krem -= BK) {
    const bool more = krem > 0;
    if (more) {
      load_a.load_and_advance(ra, tid, krem, a_vec_ok);
      load_b.load_and_advance(rb, tid, krem, b_vec_ok);
    }

#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      T af[TM], bf[TN];
#pragma unroll
      for (int g = 0; g < TM / V; ++g) load16(&af[g * V], &As[cur][kk][g * RS + ty * V]);
#pragma unroll
      for (int h = 0; h < TN / V; ++h) load16(&bf[h * V], &Bs[cur][kk][h * CS + tx * V]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += af[i] * bf[j];
    }

    if (!more) break;  // uniform across the block
    // The other stage was last read in the previous iteration, which every thread finished before
    // the barrier that ended it, so it can be overwritten now.
    LoadA::store(As[cur ^ 1], ra, tid);
    LoadB::store(Bs[cur ^ 1], rb, tid);
    __syncthreads();
  }

  // Epilogue: V-wide stores where C allows them and the run is inside C, else scalar. The thread and
  // block coordinates are read again here rather than kept live (in registers) across the main loop.
  {
    const int tid = fresh_tid_x();
    const int warp = tid / 32, lane = tid % 32;
    const int ty = (warp / (TX / WX)) * WY + lane / WX;
    const int tx = (warp % (TX / WX)) * WX + lane % WX;
    const std::int64_t m0 = std::int64_t(fresh_ctaid_x()) * BM;
    const std::int64_t n0 = std::int64_t(fresh_ctaid_y()) * BN;
#pragma unroll
    for (int g = 0; g < TM / V; ++g) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const int ti = g * V + e;
        const std::int64_t i = m0 + g * RS + ty * V + e;
        if (i >= m) continue;
#pragma unroll
        for (int h = 0; h < TN / V; ++h) {
          const std::int64_t j = n0 + h * CS + tx * V;
          if (c_vec_ok && n - j >= V) {
            T* out = c + i * ldc + j;
            T r[V];
            if (beta == T(0)) {
#pragma unroll
              for (int f = 0; f < V; ++f) r[f] = alpha * acc[ti][h * V + f];
            } else {
              load16(r, out);
#pragma unroll
              for (int f = 0; f < V; ++f) r[f] = alpha * acc[ti][h * V + f] + beta * r[f];
            }
            store16(out, r);
          } else {
#pragma unroll
            for (int f = 0; f < V; ++f)
              if (j + f < n) store_result(c, ldc, i, j + f, acc[ti][h * V + f], alpha, beta);
          }
        }
      }
    }
  }
}

// ---- Tile configurations ----------------------------------------------------------------------------

template <class T>
struct Config;
template <>
struct Config<float> {  // 256 threads, 8x8 floats each, two blocks per SM
  static constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8, MinBlocks = 2;
};
template <>
struct Config<double> {  // 256 threads, 4x4 doubles each: 8x8 or 8x4 doubles spill at 128 registers
  static constexpr int BM = 64, BN = 64, BK = 8, TM = 4, TN = 4, MinBlocks = 2;
};

template <class T>
bool vec16_ok(const void* p, std::int64_t ld) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && ld % Vec16<T>::width == 0;
}

}  // namespace

Support vectorized_can_implement(const Problem& p) {
  const int bn = p.in_type == DType::f64 ? Config<double>::BN : Config<float>::BN;
  return ladder_support(p, "vectorized", ceil_div(p.n, bn));
}

void vectorized_launch(const Problem& p, Context& ctx) {
  if (p.m <= 0 || p.n <= 0) return;
  with_float_or_double(p, [&](auto zero) {
    using T = decltype(zero);
    using Cfg = Config<T>;
    const bool a_vec = vec16_ok<T>(p.a, p.lda);
    const bool b_vec = vec16_ok<T>(p.b, p.ldb);
    const bool c_vec = vec16_ok<T>(p.c, p.ldc);
    with_operands<T>(p, [&](auto a, auto b) {
      using OpA = decltype(a);
      using OpB = decltype(b);
      const dim3 grid(unsigned(ceil_div(p.m, Cfg::BM)), unsigned(ceil_div(p.n, Cfg::BN)));
      const dim3 block((Cfg::BM / Cfg::TM) * (Cfg::BN / Cfg::TN));
      vectorized_kernel<T, Cfg::BM, Cfg::BN, Cfg::BK, Cfg::TM, Cfg::TN, Cfg::MinBlocks, OpA, OpB>
          <<<grid, block, 0, ctx.stream()>>>(a, b, static_cast<T*>(p.c), p.ldc, int(p.m), int(p.n), int(p.k),
                                             T(p.alpha), T(p.beta), a_vec, b_vec, c_vec);
    });
  });
  SKINNY_CHECK_LAUNCH();
}

}  // namespace skinny::gemm::detail
