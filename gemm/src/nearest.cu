// The fused nearest-centre kernel (skinny/gemm/nearest.hpp): a tensor-core GEMM X C^T whose epilogue
// keeps, per point, the smallest ||x||^2 + ||c||^2 - 2 x.c over the centres, so the n x k distances
// are never stored.
//
//  * A block owns 128 points and walks over tiles of 128 centres (all of them, or a share when the
//    points alone cannot fill the GPU: grid y). Per tile, 8 warps (4 along points x 2 along centres)
//    each compute a 32 x 64 product with mma.m16n8k8 in 3xTF32 (tensor_core.cuh): float accuracy
//    (Math::exact), or in one TF32 product (Math::fast: a third of the tensor-core work, products
//    rounded to TF32's 11 bits, as TF32 GEMMs and flash-kmeans compute them).
//  * Both operands stream through a two-stage cp.async ring of 32-float slices of the inner
//    dimension, one barrier per stage; the pipeline runs across tile boundaries. The centres' TF32
//    halves are split once per call (centre_halves_kernel), so the ring holds them ready; the points
//    are split as fragments are read.
//  * Lane (g, t) reads the 16 bytes at 4t.. of each 16-float k-group of its rows: element e is the
//    mma's inner index t (e even) or t + 4 (e odd) of k8 step e / 2. Any order of the inner
//    dimension gives the same dot product as long as both operands use it. Slots are swizzled by
//    row parity so a quarter warp (rows g, g + 1) hits 32 distinct banks.
//  * Each k-group's products go into a fresh accumulator (the tensor cores add by truncation), added
//    to the running sum by round-to-nearest float adds.
//  * After a tile, each thread turns its 4 rows x 16 columns into distances; the minimum per row
//    (ties: the lowest column) is combined over the lane quad by shuffles and kept per warp column
//    in shared memory. At the end one 64-bit atomicMin per row and block on (ordered distance,
//    column) gives the same result whatever the order blocks finish in.
#include "kernels/common.cuh"
#include "tensor_core.cuh"

#include <skinny/gemm/cp_async.cuh>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/nearest.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace skinny::gemm {
namespace detail {
namespace {

constexpr int kThreads = 256;
constexpr int BM = 128;              ///< points per block
constexpr int BN = 128;              ///< centres per tile
constexpr int BK = 32;               ///< inner elements per stage
constexpr int CH = BK / 4;           ///< 16-byte slots per row and stage
constexpr int WARPS_M = 4, WARPS_N = 2;
constexpr int MT = BM / WARPS_M / 16;  ///< m16 tiles per warp (2)
constexpr int NT = BN / WARPS_N / 8;   ///< n8 tiles per warp (8)
/// 16-byte slots of a stage: the points, the centres' TF32 high halves and, for exact products, their low
/// halves.
constexpr int stage_slots(bool exact) { return (BM + (exact ? 2 : 1) * BN) * CH; }
constexpr std::size_t smem_bytes(bool exact) {
  return 2 * stage_slots(exact) * sizeof(float4) + BM * WARPS_N * (sizeof(float) + sizeof(int) + sizeof(double));
}
static_assert(WARPS_M * WARPS_N * 32 == kThreads, "8 warps");
static_assert(BM * CH % kThreads == 0 && BN * CH % kThreads == 0, "whole copies per thread");
static_assert(BK % 16 == 0, "stages hold whole k-groups of 16");

struct Params {
  const float* x;
  std::int64_t ldx, n, d;
  const float* c_hi;  ///< k x ldi, TF32 high halves, zero past d
  const float* c_lo;  ///< low halves
  std::int64_t ldi, k;
  const float* xn;
  const float* cn;
  unsigned long long* keys;  ///< per point: (ordered distance << 32) | centre, min over blocks
  int tiles_per_split;
  double* row_sums;  ///< per point: += the sum of its cross terms (null: not wanted)
  std::int64_t fault_row, fault_col;  ///< NearestArguments' fault injection
  int fault_bit;
  float* fault_values;
};

/// Float bits mapped so that unsigned order is float order (finite values and infinities).
__device__ __forceinline__ std::uint32_t ordered_bits(float v) {
  const std::uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float from_ordered_bits(std::uint32_t o) {
  return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}

/// (v, j) < (bv, bj) lexicographically: the smaller distance, then the lower index.
__device__ __forceinline__ bool better(float v, int j, float bv, int bj) { return v < bv || (v == bv && j < bj); }

__global__ void __launch_bounds__(256) centre_halves_kernel(const float* __restrict__ c, std::int64_t ldc,
                                                            std::int64_t k, std::int64_t d, std::int64_t ldi,
                                                            float* __restrict__ hi, float* __restrict__ lo) {
  const std::int64_t total = k * ldi;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t j = idx / ldi, p = idx - j * ldi;
    const Tf32Pair s = split_tf32(p < d ? c[j * ldc + p] : 0.0f);
    hi[idx] = __uint_as_float(s.hi);
    if (lo) lo[idx] = __uint_as_float(s.lo);  // null for one-product (fast) runs
  }
}

/// kExact: 3xTF32 products (float accuracy); otherwise one TF32 product (Math::fast). kRowSums: also adds
/// each point's cross terms into p.row_sums; kFault: and flips p's faulty term (instances of their own: the
/// plain kernel does no such work, and the fault's code costs registers the checked kernel needs).
template <bool kExact, bool kRowSums, bool kFault>
__global__ void __launch_bounds__(kThreads, 2) nearest_kernel(const Params p) {
  constexpr int kStageSlots = stage_slots(kExact);
  extern __shared__ __align__(16) unsigned char smem[];
  float4* ring = reinterpret_cast<float4*>(smem);  // [2][kStageSlots]: points, high, low
  float* best_val = reinterpret_cast<float*>(ring + 2 * kStageSlots);  // [BM][WARPS_N]
  int* best_col = reinterpret_cast<int*>(best_val + BM * WARPS_N);
  double* row_sum = reinterpret_cast<double*>(best_col + BM * WARPS_N);  // [BM][WARPS_N], when p.row_sums

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * BM;
  const std::int64_t tiles = (p.k + BN - 1) / BN;
  const std::int64_t tile_begin = static_cast<std::int64_t>(blockIdx.y) * p.tiles_per_split;
  const std::int64_t tile_end = min(tiles, tile_begin + p.tiles_per_split);
  const std::int64_t ksteps = (p.d + BK - 1) / BK;
  const std::int64_t nsteps = (tile_end - tile_begin) * ksteps;

  for (int i = tid; i < BM * WARPS_N; i += kThreads) {
    best_val[i] = INFINITY;
    best_col[i] = INT_MAX;
    row_sum[i] = 0;
  }

  // Copies of a thread: rows tid / CH + 32 i of each tile, always slot tid % CH of the row, so the
  // inner offset and the bytes left at the edge are the same for all of them. Rows past the edge
  // copy nothing (zeros) and are never reported.
  constexpr int kCopies = BM * CH / kThreads;
  constexpr int kRowStep = kThreads / CH;  // rows between a thread's copies
  const int piece = tid % CH, rc = tid / CH;
  const std::int64_t rows_left = p.n - row0 - rc;  // copy i is inside X when i * kRowStep < rows_left
  const float* x_base = p.x + (rows_left > 0 ? (row0 + rc) * p.ldx : 0);
  const int slot0 = rc * CH + (piece ^ ((rc & 1) << 2));  // kRowStep is even: same parity for all i
  auto issue = [&](std::int64_t step, int buf) {
    const std::int64_t tile = tile_begin + step / ksteps;
    const std::int64_t kofs = (step % ksteps) * BK + piece * 4;
    const std::int64_t left = p.d - kofs;
    const int bytes = left <= 0 ? 0 : (left >= 4 ? 16 : static_cast<int>(left) * 4);
    float4* xs = ring + buf * kStageSlots + slot0;
    float4* hs = xs + BM * CH;
    float4* ls = hs + BN * CH;
    const std::int64_t col0 = tile * BN + rc;
#pragma unroll
    for (int i = 0; i < kCopies; ++i) {
      const bool xv = i * kRowStep < rows_left && bytes > 0;
      cp_async<16>(xs + i * kRowStep * CH, xv ? x_base + i * kRowStep * p.ldx + kofs : p.x, xv ? bytes : 0);
      const std::int64_t col = col0 + i * kRowStep;
      const bool cv = col < p.k && bytes > 0;
      const std::int64_t off = cv ? col * p.ldi + kofs : 0;
      cp_async<16>(hs + i * kRowStep * CH, p.c_hi + off, cv ? bytes : 0);
      if constexpr (kExact) cp_async<16>(ls + i * kRowStep * CH, p.c_lo + off, cv ? bytes : 0);
    }
  };

  float acc[MT][NT][4];
  auto clear = [&] {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;
  };
  clear();

  const int swz = (gq & 1) << 2;  // rows and columns g, g + 8 of every tile share g's parity
  issue(0, 0);
  cp_async_commit();
  for (std::int64_t step = 0; step < nsteps; ++step) {
    cp_async_wait<0>();
    __syncthreads();  // everyone's copies of this stage have landed; the other buffer is free
    if (step + 1 < nsteps) issue(step + 1, static_cast<int>((step + 1) & 1));
    cp_async_commit();

    const float4* xs = ring + (step & 1) * kStageSlots;
    const float4* hs = xs + BM * CH;
    const float4* ls = hs + BN * CH;
#pragma unroll
    for (int u = 0; u < BK / 16; ++u) {
      const int pc = (4 * u + tq) ^ swz;
      Tf32Pair a[MT][2][4];  // [m16 tile][row g, g + 8][element]
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int r = wm * (BM / WARPS_M) + mt * 16 + gq;
        split_tf32(xs[r * CH + pc], a[mt][0]);
        split_tf32(xs[(r + 8) * CH + pc], a[mt][1]);
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int col = wn * (BN / WARPS_N) + nt * 8 + gq;
        const float4 h = hs[col * CH + pc];
        if constexpr (kExact) {
          const float4 l = ls[col * CH + pc];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            float dk[4];
            k_group_3xtf32(dk, a[mt][0], a[mt][1], h, l);
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][nt][e] += dk[e];
          }
        } else {
          // One TF32 product per k8 step, accumulated in the tensor cores as TF32 GEMMs do.
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) k_group_tf32(acc[mt][nt], a[mt][0], a[mt][1], h);
        }
      }
    }

    if (step % ksteps != ksteps - 1) continue;
    // The tile is complete: acc[mt][nt][2h + c] is row 16 mt + g + 8h, column 8 nt + 2t + c of the
    // warp's part.
    const std::int64_t tile = tile_begin + step / ksteps;
    if (kFault && p.fault_row >= row0 && p.fault_row < row0 + BM && p.fault_col / BN == tile) {
      // An injected fault in this block's tile (rare, block-uniform): its holder flips the bit in place.
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c)
              if (row0 + wm * (BM / WARPS_M) + mt * 16 + gq + 8 * h == p.fault_row &&
                  tile * BN + wn * (BN / WARPS_N) + nt * 8 + 2 * tq + c == p.fault_col) {
                float& term = acc[mt][nt][2 * h + c];
                p.fault_values[0] = term;
                term = __uint_as_float(__float_as_uint(term) ^ (1u << p.fault_bit));
                p.fault_values[1] = term;
              }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm * (BM / WARPS_M) + mt * 16 + gq + 8 * h;
        const float xn = row0 + r < p.n ? p.xn[row0 + r] : 0.f;
        float bv = INFINITY;
        int bj = INT_MAX;
        float lane_sum = 0;  // this lane's 16 terms of the row (for the checksum test)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const std::int64_t col = tile * BN + wn * (BN / WARPS_N) + nt * 8 + 2 * tq + c;
            if (col >= p.k) continue;
            const float dist = xn + p.cn[col] - 2.f * acc[mt][nt][2 * h + c];
            if (kRowSums) lane_sum += acc[mt][nt][2 * h + c];
            if (better(dist, static_cast<int>(col), bv, bj)) {
              bv = dist;
              bj = static_cast<int>(col);
            }
          }
        if (kRowSums) {  // the lane quad's shares in double, in a fixed order, into the slot of (row, warp column)
          double rs = lane_sum;
          rs += __shfl_xor_sync(0xffffffffu, rs, 1);
          rs += __shfl_xor_sync(0xffffffffu, rs, 2);
          if (tq == 0) row_sum[r * WARPS_N + wn] += rs;
        }
#pragma unroll
        for (int off = 1; off < 4; off <<= 1) {
          const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
          const int oj = __shfl_xor_sync(0xffffffffu, bj, off);
          if (better(ov, oj, bv, bj)) {
            bv = ov;
            bj = oj;
          }
        }
        // Slot (r, wn) belongs to lane t = 0 of this warp alone: no barrier needed until the end.
        if (tq == 0 && better(bv, bj, best_val[r * WARPS_N + wn], best_col[r * WARPS_N + wn])) {
          best_val[r * WARPS_N + wn] = bv;
          best_col[r * WARPS_N + wn] = bj;
        }
      }
    clear();
  }
  cp_async_wait<0>();
  __syncthreads();
  for (int r = tid; r < BM; r += kThreads) {
    if (row0 + r >= p.n) break;
    float bv = best_val[r * WARPS_N];
    int bj = best_col[r * WARPS_N];
#pragma unroll
    for (int w = 1; w < WARPS_N; ++w)
      if (better(best_val[r * WARPS_N + w], best_col[r * WARPS_N + w], bv, bj)) {
        bv = best_val[r * WARPS_N + w];
        bj = best_col[r * WARPS_N + w];
      }
    if (bj != INT_MAX)
      atomicMin(p.keys + row0 + r,
                (static_cast<unsigned long long>(ordered_bits(bv)) << 32) | static_cast<std::uint32_t>(bj));
    if (kRowSums) {
      double rs = 0;
#pragma unroll
      for (int w = 0; w < WARPS_N; ++w) rs += row_sum[r * WARPS_N + w];
      atomicAdd(p.row_sums + row0 + r, rs);  // one block per point unless the centre tiles are split (grid y)
    }
  }
}

/// Keys -> labels and distances clamped at 0. A point whose distances were all NaN keeps the
/// initial all-ones key: label 0, distance NaN.
__global__ void finish_kernel(const unsigned long long* __restrict__ keys, std::int64_t n,
                              std::int32_t* __restrict__ labels, float* __restrict__ sq_distances) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const unsigned long long key = keys[i];
    const bool none = key == ~0ull;
    if (labels) labels[i] = none ? 0 : static_cast<std::int32_t>(key & 0xffffffffu);
    if (sq_distances) {
      const float v = none ? NAN : from_ordered_bits(static_cast<std::uint32_t>(key >> 32));
      sq_distances[i] = v > 0.f ? v : (v == v ? 0.f : v);
    }
  }
}

std::int64_t round_up(std::int64_t v, std::int64_t m) { return ceil_div(v, m) * m; }

}  // namespace
}  // namespace detail

Support nearest_can_implement(const Context& ctx, const NearestArguments& a) {
  using std::to_string;
  if (!a.x || !a.c || !a.x_sq_norms || !a.c_sq_norms)
    return Support::no("nearest: x, c and both norm vectors must be non-null");
  if (!a.labels && !a.sq_distances) return Support::no("nearest: neither labels nor sq_distances is requested");
  if (a.n < 1 || a.d < 1 || a.k < 1)
    return Support::no("nearest: need n, d, k >= 1 (got n = " + to_string(a.n) + ", d = " + to_string(a.d) +
                       ", k = " + to_string(a.k) + ")");
  if (a.k > INT32_MAX) return Support::no("nearest: k = " + to_string(a.k) + " exceeds 2^31 - 1 (labels are 32-bit)");
  const std::int64_t ldx = a.ldx ? a.ldx : a.d, ldc = a.ldc ? a.ldc : a.d;
  if (ldx < a.d || ldc < a.d)
    return Support::no("nearest: leading dimensions must be >= d = " + to_string(a.d) + " (got ldx = " +
                       to_string(ldx) + ", ldc = " + to_string(ldc) + ")");
  if (ldx % 4 != 0 || reinterpret_cast<std::uintptr_t>(a.x) % 16 != 0)
    return Support::no("nearest: points are read with 16-byte copies: ldx = " + to_string(ldx) +
                       " must be a multiple of 4 and x 16-byte aligned");
  if (a.row_sums && a.fault_row >= 0 &&
      (a.fault_row >= a.n || a.fault_col < 0 || a.fault_col >= a.k || a.fault_bit < 0 || a.fault_bit > 31 || !a.fault_values))
    return Support::no("nearest: a fault needs fault_row < n, 0 <= fault_col < k, 0 <= fault_bit < 32 and fault_values");
  if (detail::ceil_div(a.n, detail::BM) > INT_MAX)
    return Support::no("nearest: n = " + to_string(a.n) + " points need more than 2^31 - 1 blocks");
  if (ctx.properties().major < 8)
    return Support::no("nearest: needs TF32 tensor cores (compute capability >= 8.0, this device has " +
                       to_string(ctx.properties().major) + "." + to_string(ctx.properties().minor) + ")");
  return Support::yes();
}

void nearest(Context& ctx, const NearestArguments& a) {
  using namespace detail;
  if (const Support s = nearest_can_implement(ctx, a); !s) throw std::invalid_argument(s.reason);
  const cudaStream_t stream = ctx.stream();
  const std::int64_t ldx = a.ldx ? a.ldx : a.d, ldc = a.ldc ? a.ldc : a.d;
  const std::int64_t ldi = round_up(a.d, 4);
  const std::int64_t keys_bytes = round_up(a.n * static_cast<std::int64_t>(sizeof(unsigned long long)), 256);
  const std::int64_t half_elems = round_up(a.k * ldi, 64);
  const bool exact = a.math == Math::exact;
  auto* ws = static_cast<unsigned char*>(ctx.workspace(
      static_cast<std::size_t>(keys_bytes + (exact ? 2 : 1) * half_elems * static_cast<std::int64_t>(sizeof(float)))));
  auto* keys = reinterpret_cast<unsigned long long*>(ws);
  auto* c_hi = reinterpret_cast<float*>(ws + keys_bytes);
  float* c_lo = exact ? c_hi + half_elems : nullptr;
  const int sms = ctx.properties().multiProcessorCount;

  const unsigned split_blocks = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(a.k * ldi, 256), 4LL * sms));
  centre_halves_kernel<<<split_blocks, 256, 0, stream>>>(a.c, ldc, a.k, a.d, ldi, c_hi, c_lo);
  SKINNY_CHECK_LAUNCH();
  SKINNY_CUDA_TRY(cudaMemsetAsync(keys, 0xff, static_cast<std::size_t>(a.n) * sizeof(unsigned long long), stream));

  // Centre tiles are shared out over grid y only when the point blocks alone fill less than two
  // waves of two resident blocks per SM.
  const std::int64_t blocks_x = ceil_div(a.n, BM), tiles = ceil_div(a.k, BN);
  const std::int64_t want = 4LL * sms;
  std::int64_t split = std::min<std::int64_t>({tiles, std::max<std::int64_t>(1, ceil_div(want, blocks_x)), 65535});
  const std::int64_t tiles_per_split = ceil_div(tiles, split);
  split = ceil_div(tiles, tiles_per_split);

  Params p{a.x, ldx, a.n, a.d, c_hi, c_lo, ldi, a.k, a.x_sq_norms, a.c_sq_norms, keys,
           static_cast<int>(tiles_per_split), a.row_sums, a.row_sums ? a.fault_row : -1, a.fault_col,
           a.fault_bit, a.fault_values};
  if (a.row_sums)
    SKINNY_CUDA_TRY(cudaMemsetAsync(a.row_sums, 0, static_cast<std::size_t>(a.n) * sizeof(double), stream));
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(split));
  const auto launch = [&](auto kernel) {
    const std::size_t smem = smem_bytes(exact);
    SKINNY_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    kernel<<<grid, kThreads, smem, stream>>>(p);
    SKINNY_CHECK_LAUNCH();
  };
  const bool fault = a.row_sums && a.fault_row >= 0;
  if (exact) {
    if (fault) launch(nearest_kernel<true, true, true>);
    else if (a.row_sums) launch(nearest_kernel<true, true, false>);
    else launch(nearest_kernel<true, false, false>);
  } else {
    if (fault) launch(nearest_kernel<false, true, true>);
    else if (a.row_sums) launch(nearest_kernel<false, true, false>);
    else launch(nearest_kernel<false, false, false>);
  }
  const unsigned finish_blocks = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(a.n, 256), 8LL * sms));
  finish_kernel<<<finish_blocks, 256, 0, stream>>>(keys, a.n, a.labels, a.sq_distances);
  SKINNY_CHECK_LAUNCH();
}

}  // namespace skinny::gemm
