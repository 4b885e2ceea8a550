// The fused nearest-centre kernel (skinny/gemm/nearest.hpp): a tensor-core GEMM X C^T whose epilogue
// keeps, per point, the smallest ||x||^2 + ||c||^2 - 2 x.c over the centres, so the n x k distances
// are never stored.
//
//  * A block owns 128 points and walks over tiles of 128 centres (all of them, or a share when the
//    points alone cannot fill the GPU: grid y). Per tile, 8 warps (4 along points x 2 along centres)
//    each compute a 32 x 64 product:
//      - float points: mma.m16n8k8 in 3xTF32 (tensor_core.cuh), float accuracy (Math::exact), or in one
//        TF32 product (Math::fast: a third of the tensor-core work, as TF32 GEMMs and flash-kmeans compute
//        them: centres rounded to TF32, points truncated to it by the tensor cores);
//      - half or bfloat16 points: mma.m16n8k16 in their own type, at twice TF32's rate and with half the
//        bytes to read. Math::fast rounds the centres to that type (as 16-bit GEMMs take them);
//        Math::exact writes each centre, scaled by a power of two, as the sum of three 16-bit parts (24
//        significant bits and more), so every product is exact in float: float accuracy, three products.
//  * Both operands stream through a cp.async ring of 16-byte slots (8 per row and stage: 32 floats or
//    64 16-bit elements; 4 for 16-bit exact products, whose centres take three slots each), one barrier
//    per stage; three stages where a stage is at most 32 KB (two blocks per SM still fit), otherwise two.
//    The pipeline runs across tile boundaries. The centres' parts are prepared once per call
//    (centre_parts_kernel), so the ring holds them ready; float points are split as fragments are read.
//  * Fragments come from shared memory by ldmatrix.x4 (four 8 x 8 matrices of 16-byte rows, already in the
//    mma's register order: no moves before the tensor cores), both operands in the inner dimension's own
//    order. Slot s of row r is stored at slot s ^ swizzle(r), so the 8 rows of a matrix hit 8 distinct
//    bank groups.
//  * Exact products of each k-group go into a fresh accumulator (the tensor cores add by truncation),
//    added to the running sum by round-to-nearest float adds.
//  * After a tile, each thread turns its 4 rows x 16 columns into ||c||^2 - 2 x.c (one FMA each: ||x||^2
//    is the same for the whole row and is added at the end), ||c||^2 coming with the tile's last stage;
//    the minimum per row (ties: the lowest column) is combined over the lane quad by shuffles and kept
//    per warp column in shared memory. At the end one 64-bit atomicMin per row and block on (ordered
//    value, column) gives the same result whatever the order blocks finish in.
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
#include <type_traits>

namespace skinny::gemm {
namespace detail {
namespace {

constexpr int kThreads = 256;
constexpr int BM = 128;  ///< points per block
constexpr int BN = 128;  ///< centres per tile
constexpr int WARPS_M = 4, WARPS_N = 2;
constexpr int MT = BM / WARPS_M / 16;  ///< m16 tiles per warp (2)
constexpr int NT = BN / WARPS_N / 8;   ///< n8 tiles per warp (8)
static_assert(WARPS_M * WARPS_N * 32 == kThreads, "8 warps");

/// The ring's shape for points of type T and the products `exact` asks for.
template <class T, bool kExact>
struct Ring {
  static constexpr bool is_float = std::is_same_v<T, float>;
  static constexpr int elems = 16 / int(sizeof(T));  ///< elements per 16-byte slot
  /// Centre parts: TF32 high (and low) halves for float; the rounded centre, or three parts, for 16-bit.
  static constexpr int parts = is_float ? (kExact ? 2 : 1) : (kExact ? 3 : 1);
  static constexpr int ch = !is_float && kExact ? 4 : 8;  ///< slots per row and stage
  static constexpr int bk = ch * elems;                  ///< inner elements per stage
  /// Per stage: the points, the centre parts, then (kTileSlots) the tile's ||c||^2 and unscale factors.
  static constexpr int slots = (BM + parts * BN) * ch + 2 * BN / 4;
  static constexpr int stages = slots * 16 <= 33 * 1024 ? 3 : 2;
  static constexpr std::size_t smem =
      std::size_t(stages) * slots * 16 + BM * WARPS_N * (sizeof(float) + sizeof(int) + sizeof(double));
  static_assert(BM * ch % kThreads == 0 && BN * ch % kThreads == 0, "whole copies per thread");
  static_assert(ch % 4 == 0, "stages hold whole k-groups of 4 slots");
  /// Slot s of row r is stored at r * ch + (s ^ swizzle(r)): the 8 rows an 8 x 8 ldmatrix reads (16 bytes
  /// each, one slot) then fall in 8 distinct bank groups.
  __device__ static constexpr int swizzle(int r) { return ch == 8 ? (r & 7) : ((r >> 1) & 3); }
};

struct Params {
  const void* x;
  std::int64_t ldx, n, d;
  const void* c_parts;  ///< parts x k x ldi centre parts (Ring), zero past d
  std::int64_t part_stride;  ///< elements between parts
  const float* c_unscale;    ///< 16-bit exact: per centre, the inverse of the power of two its parts carry
  std::int64_t ldi, k;
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

template <class T>
__device__ __forceinline__ T to_16bit(float v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}
template <class T>
__device__ __forceinline__ float from_16bit(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else return __bfloat162float(v);
}

/// The centres' parts, one warp per centre, into out[part * part_stride + j * ldi + p], zero past d; for one
/// product per term (!kExact) also ||c||^2 of each centre as rounded: the kernel then compares exact-ish
/// distances to the rounded centres, where ||c||^2 of the centre as given would shift each centre's
/// distances by ||c||^2 - ||c rounded||^2, a bias the same for every point (at d = 2 and 8192 clusters it
/// emptied clusters).
/// Float points: TF32 high and (exact) low halves. 16-bit points, fast: the centre rounded to T. 16-bit
/// points, exact: the centre times 2^e, e chosen per centre so its largest element lies in [2^14, 2^15)
/// (half's low parts then stay clear of its subnormals), as hi + mid + lo, each the rounding to T of
/// what the parts before leave; unscale[j] = 2^-e.
template <class T, bool kExact>
__global__ void __launch_bounds__(256) centre_parts_kernel(const float* __restrict__ c, std::int64_t ldc, std::int64_t k,
                                                          std::int64_t d, std::int64_t ldi, T* __restrict__ out,
                                                          std::int64_t part_stride, float* __restrict__ unscale,
                                                          float* __restrict__ rounded_sq_norms) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t j = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; j < k; j += warps) {
    const float* row = c + j * ldc;
    float scale = 1.f;
    if constexpr (!std::is_same_v<T, float> && kExact) {
      float largest = 0.f;
      for (std::int64_t p = lane; p < d; p += 32) largest = fmaxf(largest, fabsf(row[p]));
      for (int off = 16; off > 0; off >>= 1) largest = fmaxf(largest, __shfl_xor_sync(0xffffffffu, largest, off));
      int exponent = 0;
      frexpf(largest, &exponent);  // largest = m 2^exponent, m in [0.5, 1)
      const int e = largest > 0.f && isfinite(largest) ? 15 - exponent : 0;
      scale = ldexpf(1.f, e);
      if (lane == 0) unscale[j] = ldexpf(1.f, -e);
    }
    double rounded_sq = 0;  // one product per term: ||c||^2 of the centre as rounded
    for (std::int64_t p = lane; p < ldi; p += 32) {
      const float v = p < d ? row[p] * scale : 0.f;
      T* at = out + j * ldi + p;
      if constexpr (std::is_same_v<T, float>) {
        const Tf32Pair s = split_tf32(v);
        at[0] = __uint_as_float(s.hi);
        if constexpr (kExact) at[part_stride] = __uint_as_float(s.lo);
        else rounded_sq += double(__uint_as_float(s.hi)) * double(__uint_as_float(s.hi));
      } else if constexpr (kExact) {
        const T hi = to_16bit<T>(v);
        const float r1 = v - from_16bit(hi);
        const T mid = to_16bit<T>(r1);
        at[0] = hi;
        at[part_stride] = mid;
        at[2 * part_stride] = to_16bit<T>(r1 - from_16bit(mid));
      } else {
        at[0] = to_16bit<T>(v);
        rounded_sq += double(from_16bit(at[0])) * double(from_16bit(at[0]));
      }
    }
    if constexpr (!kExact) {
      for (int off = 16; off > 0; off >>= 1) rounded_sq += __shfl_xor_sync(0xffffffffu, rounded_sq, off);
      if (lane == 0) rounded_sq_norms[j] = static_cast<float>(rounded_sq);
    }
  }
}

/// T: the points' type (float, __half, __nv_bfloat16); kExact: float-accurate products, otherwise one per
/// term (Math). kRowSums: also adds each point's cross terms into p.row_sums; kFault: and flips p's faulty
/// term (instances of their own: the plain kernel does no such work, and the fault's code costs registers
/// the checked kernel needs).
template <class T, bool kExact, bool kRowSums, bool kFault>
__global__ void __launch_bounds__(kThreads, 2) nearest_kernel(const Params p) {
  using R = Ring<T, kExact>;
  constexpr int CH = R::ch, kStages = R::stages;
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* ring = reinterpret_cast<uint4*>(smem);  // [kStages][R::slots]: points, then the centre parts
  float* best_val = reinterpret_cast<float*>(ring + kStages * R::slots);  // [BM][WARPS_N]
  int* best_col = reinterpret_cast<int*>(best_val + BM * WARPS_N);
  double* row_sum = reinterpret_cast<double*>(best_col + BM * WARPS_N);  // [BM][WARPS_N], when p.row_sums

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * BM;
  const std::int64_t tiles = (p.k + BN - 1) / BN;
  const std::int64_t tile_begin = static_cast<std::int64_t>(blockIdx.y) * p.tiles_per_split;
  const std::int64_t tile_end = min(tiles, tile_begin + p.tiles_per_split);
  const int ksteps = static_cast<int>((p.d + R::bk - 1) / R::bk);
  const std::int64_t nsteps = (tile_end - tile_begin) * ksteps;

  for (int i = tid; i < BM * WARPS_N; i += kThreads) row_sum[i] = 0;  // best_val, best_col: written at the end

  // Copies of a thread: rows tid / CH + kRowStep i of each tile, always slot tid % CH of the row, so the
  // inner offset and the bytes left at the edge are the same for all of them. Rows past the edge
  // copy nothing (zeros) and are never reported.
  constexpr int kCopies = BM * CH / kThreads;
  constexpr int kRowStep = kThreads / CH;  // rows between a thread's copies (even: same parity for all)
  constexpr int kTileSlots = (BM + R::parts * BN) * CH;  // where a stage's ||c||^2 and unscale factors start
  const int piece = tid % CH, rc = tid / CH;
  const std::int64_t rows_left = p.n - row0 - rc;  // copy i is inside X when i * kRowStep < rows_left
  const T* x = static_cast<const T*>(p.x);
  const T* parts = static_cast<const T*>(p.c_parts);
  const T* x_base = x + (rows_left > 0 ? (row0 + rc) * p.ldx : 0);
  const std::int64_t x_row_step = kRowStep * p.ldx, c_row_step = kRowStep * p.ldi;
  const int slot0 = rc * CH + (piece ^ R::swizzle(rc));  // kRowStep keeps the swizzle of every copy
  // The next stage to copy, (tile, k-step), advanced one step at a time: no 64-bit divisions in the loop.
  std::int64_t next_tile = tile_begin;
  int next_k = 0;
  auto issue_next = [&](int buf) {
    const std::int64_t tile = next_tile;
    const std::int64_t kofs = static_cast<std::int64_t>(next_k) * R::bk + piece * R::elems;
    const std::int64_t left = p.d - kofs;
    const int bytes = left <= 0 ? 0 : (left >= R::elems ? 16 : static_cast<int>(left * sizeof(T)));
    uint4* xs = ring + buf * R::slots + slot0;
    const std::int64_t col0 = tile * BN + rc;
    const T* x_at = x_base + kofs;
    const std::int64_t c_at = col0 * p.ldi + kofs;
#pragma unroll
    for (int i = 0; i < kCopies; ++i) {
      const bool xv = i * kRowStep < rows_left && bytes > 0;
      cp_async<16>(xs + i * kRowStep * CH, xv ? x_at + i * x_row_step : x, xv ? bytes : 0);
      const bool cv = col0 + i * kRowStep < p.k && bytes > 0;
      const std::int64_t off = cv ? c_at + i * c_row_step : 0;
#pragma unroll
      for (int q = 0; q < R::parts; ++q)
        cp_async<16>(xs + (BM + q * BN) * CH + i * kRowStep * CH, parts + q * p.part_stride + off, cv ? bytes : 0);
    }
    // The tile's last stage also brings its ||c||^2 (and, 16-bit exact, unscale factors) for the epilogue,
    // which reads them while that stage is still in hand. Zeros past k: the epilogue masks them.
    if (next_k == ksteps - 1 && tid < (!R::is_float && kExact ? 2 : 1) * BN) {
      const std::int64_t col = tile * BN + tid % BN;
      const float* src = tid < BN ? p.cn : p.c_unscale;
      cp_async<4>(reinterpret_cast<float*>(ring + buf * R::slots + kTileSlots) + tid, col < p.k ? src + col : p.cn,
                  col < p.k ? 4 : 0);
    }
    if (++next_k == ksteps) {
      next_k = 0;
      ++next_tile;
    }
  };

  float best_v[MT][2];  // per row of this lane (m16 tile, g or g + 8): the best value and column so far
  int best_j[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      best_v[mt][h] = INFINITY;
      best_j[mt][h] = INT_MAX;
    }
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

  // ldmatrix addresses: lane l gives row l % 8 of matrix l / 8. A (the points): matrices (rows 0-7, slot
  // 2j), (rows 8-15, 2j), (rows 0-7, 2j + 1), (rows 8-15, 2j + 1) of an m16 tile are the fragment of k-step j
  // (a0..a3, in order). B (the centres): matrices slots 4u..4u + 3 of an n8 tile are b0, b1 of k-steps 2u
  // and 2u + 1. A k-step is 8 inner float elements (m16n8k8, TF32) or 16 16-bit ones (m16n8k16).
  // The rows a lane addresses differ by multiples of 8 and share one swizzle; slots 4u + 2j + lmat / 2 (A) and
  // 4u + lmat (B) are those of even bases plus lmat's bits, so their swizzled slots are the base XOR a mask.
  const int lrow = lane & 7, lmat = lane >> 3, lswz = R::swizzle(lrow);
  const std::uint32_t a_lane = 16u * ((wm * (BM / WARPS_M) + (lmat & 1) * 8 + lrow) * CH);
  const std::uint32_t b_lane = 16u * ((BM + wn * (BN / WARPS_N) + lrow) * CH);  // the centres follow the points
  const int a_mask = (lmat >> 1) ^ lswz, b_mask = lmat ^ lswz;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nsteps) issue_next(s);
    cp_async_commit();
  }
  int buf = 0, k_in_tile = 0;  // the stage in hand, and its k-step within the tile
  std::int64_t tile = tile_begin;
  for (std::int64_t step = 0; step < nsteps; ++step) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // everyone's copies of this stage have landed; the stage read last time is free
    if (step + kStages - 1 < nsteps) issue_next(buf == 0 ? kStages - 1 : buf - 1);
    cp_async_commit();

    const uint4* xs = ring + buf * R::slots;
    buf = buf + 1 == kStages ? 0 : buf + 1;
    const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(xs));
#pragma unroll
    for (int u = 0; u < CH / 4; ++u) {
      uint4 a[MT][2];  // [m16 tile][k-step 2u, 2u + 1]: a0..a3
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < 2; ++j)
          a[mt][j] = ldmatrix_x4(base + a_lane + 16u * (mt * 16 * CH + ((4 * u + 2 * j) ^ a_mask)));
      // The centres' part q of n8 tile nt: b0, b1 of k-steps 2u and 2u + 1.
      const auto centres = [&](int q, int nt) {
        return ldmatrix_x4(base + b_lane + 16u * ((q * BN + nt * 8) * CH + ((4 * u) ^ b_mask)));
      };
      if constexpr (R::is_float) {
        // Rows g, g + 8; element e: k-step e / 2, inner t (e even) or t + 4. Exact products split the points
        // into TF32 halves; one product reads their float bits as they are (the tensor cores ignore the low 13
        // bits: each point element truncated to TF32).
        Tf32Pair ag[MT][4], ag8[MT][4];
        const auto operand = [](std::uint32_t bits) {
          if constexpr (kExact) return split_tf32(__uint_as_float(bits));
          else return Tf32Pair{bits, 0u};
        };
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            ag[mt][2 * j] = operand(a[mt][j].x);
            ag8[mt][2 * j] = operand(a[mt][j].y);
            ag[mt][2 * j + 1] = operand(a[mt][j].z);
            ag8[mt][2 * j + 1] = operand(a[mt][j].w);
          }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const uint4 hb = centres(0, nt);
          const float4 h = make_float4(__uint_as_float(hb.x), __uint_as_float(hb.y), __uint_as_float(hb.z),
                                       __uint_as_float(hb.w));
          if constexpr (kExact) {
            const uint4 lb = centres(1, nt);
            const float4 l = make_float4(__uint_as_float(lb.x), __uint_as_float(lb.y), __uint_as_float(lb.z),
                                         __uint_as_float(lb.w));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              float dk[4];
              k_group_3xtf32(dk, ag[mt], ag8[mt], h, l);
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[mt][nt][e] += dk[e];
            }
          } else {
            // One TF32 product per k8 step, accumulated in the tensor cores as TF32 GEMMs do.
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) k_group_tf32(acc[mt][nt], ag[mt], ag8[mt], h);
          }
        }
      } else {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          if constexpr (kExact) {
            // The small parts first, into a fresh accumulator: x lo + x mid + x hi, each product exact.
            const uint4 hi = centres(0, nt), mid = centres(1, nt), lo = centres(2, nt);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              float dk[4] = {0.f, 0.f, 0.f, 0.f};
              k_group_16bit<T>(dk, a[mt][0], a[mt][1], lo);
              k_group_16bit<T>(dk, a[mt][0], a[mt][1], mid);
              k_group_16bit<T>(dk, a[mt][0], a[mt][1], hi);
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[mt][nt][e] += dk[e];
            }
          } else {
            const uint4 b = centres(0, nt);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) k_group_16bit<T>(acc[mt][nt], a[mt][0], a[mt][1], b);
          }
        }
      }
    }

    if (++k_in_tile < ksteps) continue;
    k_in_tile = 0;
    // The tile is complete: acc[mt][nt][2h + c] is row 16 mt + g + 8h, column 8 nt + 2t + c of the
    // warp's part.
    // This thread's 16 columns: their ||c||^2 from the stage in hand, +infinity past k (never nearer).
    const std::int64_t col0 = tile * BN + wn * (BN / WARPS_N) + 2 * tq;
    const float* tile_cn = reinterpret_cast<const float*>(xs + kTileSlots);
    float cn[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const float2 v = reinterpret_cast<const float2*>(tile_cn)[(wn * (BN / WARPS_N) + nt * 8 + 2 * tq) / 2];
      cn[nt][0] = col0 + nt * 8 < p.k ? v.x : INFINITY;
      cn[nt][1] = col0 + nt * 8 + 1 < p.k ? v.y : INFINITY;
    }
    if constexpr (!R::is_float && kExact) {  // undo the centres' powers of two (exact: no rounding)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const float2 u = reinterpret_cast<const float2*>(tile_cn + BN)[(wn * (BN / WARPS_N) + nt * 8 + 2 * tq) / 2];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            acc[mt][nt][2 * h] *= u.x;
            acc[mt][nt][2 * h + 1] *= u.y;
          }
      }
    }
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
    // Per row, the smallest ||c||^2 - 2 x.c over this lane's columns so far (||x||^2 is the row's own:
    // finish_kernel adds it). Columns come in increasing order, so a strict < keeps the lowest of tied ones;
    // lanes and warps combine their minima once, after the last tile.
    const int colb = static_cast<int>(col0);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float bv = best_v[mt][h];
        int bj = best_j[mt][h];
        float lane_sum = 0;  // this lane's 16 terms of the row (for the checksum test)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const float v = fmaf(-2.f, acc[mt][nt][2 * h + c], cn[nt][c]);
            if (kRowSums && cn[nt][c] != INFINITY) lane_sum += acc[mt][nt][2 * h + c];
            if (v < bv) {
              bv = v;
              bj = colb + nt * 8 + c;
            }
          }
        best_v[mt][h] = bv;
        best_j[mt][h] = bj;
        if (kRowSums) {  // the lane quad's shares in double, in a fixed order, into the slot of (row, warp column)
          double rs = lane_sum;
          rs += __shfl_xor_sync(0xffffffffu, rs, 1);
          rs += __shfl_xor_sync(0xffffffffu, rs, 2);
          const int r = wm * (BM / WARPS_M) + mt * 16 + gq + 8 * h;
          if (tq == 0) row_sum[r * WARPS_N + wn] += rs;
        }
      }
    clear();
    ++tile;
  }
  // Each row's minimum over the lane quad, then (below) over the warp columns.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float bv = best_v[mt][h];
      int bj = best_j[mt][h];
#pragma unroll
      for (int off = 1; off < 4; off <<= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
        const int oj = __shfl_xor_sync(0xffffffffu, bj, off);
        if (better(ov, oj, bv, bj)) {
          bv = ov;
          bj = oj;
        }
      }
      const int r = wm * (BM / WARPS_M) + mt * 16 + gq + 8 * h;
      if (tq == 0) {
        best_val[r * WARPS_N + wn] = bv;
        best_col[r * WARPS_N + wn] = bj;
      }
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

/// Keys -> labels and distances (||x||^2 plus the key's ||c||^2 - 2 x.c) clamped at 0. A point whose
/// distances were all NaN keeps the initial all-ones key: label 0, distance NaN.
__global__ void finish_kernel(const unsigned long long* __restrict__ keys, const float* __restrict__ x_sq_norms,
                              std::int64_t n, std::int32_t* __restrict__ labels, float* __restrict__ sq_distances) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const unsigned long long key = keys[i];
    const bool none = key == ~0ull;
    if (labels) labels[i] = none ? 0 : static_cast<std::int32_t>(key & 0xffffffffu);
    if (sq_distances) {
      const float v = none ? NAN : x_sq_norms[i] + from_ordered_bits(static_cast<std::uint32_t>(key >> 32));
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
  if (a.x_type != Element::f32 && a.x_type != Element::f16 && a.x_type != Element::bf16)
    return Support::no("nearest: unknown point element type " + to_string(static_cast<int>(a.x_type)));
  if (a.n < 1 || a.d < 1 || a.k < 1)
    return Support::no("nearest: need n, d, k >= 1 (got n = " + to_string(a.n) + ", d = " + to_string(a.d) +
                       ", k = " + to_string(a.k) + ")");
  if (a.k > INT32_MAX - detail::BN)
    return Support::no("nearest: k = " + to_string(a.k) + " exceeds 2^31 - 129 (labels and column indices are 32-bit)");
  const std::int64_t ldx = a.ldx ? a.ldx : a.d, ldc = a.ldc ? a.ldc : a.d;
  if (ldx < a.d || ldc < a.d)
    return Support::no("nearest: leading dimensions must be >= d = " + to_string(a.d) + " (got ldx = " +
                       to_string(ldx) + ", ldc = " + to_string(ldc) + ")");
  const std::int64_t per_copy = a.x_type == Element::f32 ? 4 : 8;  // elements in 16 bytes
  if (ldx % per_copy != 0 || reinterpret_cast<std::uintptr_t>(a.x) % 16 != 0)
    return Support::no("nearest: points are read with 16-byte copies: ldx = " + to_string(ldx) +
                       " must be a multiple of " + to_string(per_copy) + " and x 16-byte aligned");
  if (a.row_sums && a.fault_row >= 0 &&
      (a.fault_row >= a.n || a.fault_col < 0 || a.fault_col >= a.k || a.fault_bit < 0 || a.fault_bit > 31 || !a.fault_values))
    return Support::no("nearest: a fault needs fault_row < n, 0 <= fault_col < k, 0 <= fault_bit < 32 and fault_values");
  if (detail::ceil_div(a.n, detail::BM) > INT_MAX)
    return Support::no("nearest: n = " + to_string(a.n) + " points need more than 2^31 - 1 blocks");
  if (ctx.properties().major < 8)
    return Support::no("nearest: needs TF32, half and bfloat16 tensor cores (compute capability >= 8.0, this device "
                       "has " + to_string(ctx.properties().major) + "." + to_string(ctx.properties().minor) + ")");
  return Support::yes();
}

namespace detail {
namespace {

/// Queues the centres' parts and the fused kernel for points of type T (ctx's workspace holds the keys,
/// the parts and the scales); the keys are reset here and read by finish_kernel.
template <class T, bool kExact>
void launch_nearest(Context& ctx, const NearestArguments& a, unsigned long long* keys, unsigned char* scratch) {
  using R = Ring<T, kExact>;
  const cudaStream_t stream = ctx.stream();
  const std::int64_t ldc = a.ldc ? a.ldc : a.d;
  const std::int64_t ldi = round_up(a.d, R::elems);
  const std::int64_t part_stride = round_up(a.k * ldi, 128);
  T* parts = reinterpret_cast<T*>(scratch);
  float* unscale = reinterpret_cast<float*>(scratch + round_up(R::parts * part_stride * std::int64_t(sizeof(T)), 256));
  float* rounded_sq_norms = unscale + round_up(a.k, 64);
  const int sms = ctx.properties().multiProcessorCount;

  const unsigned part_blocks = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(a.k, 8), 4LL * sms));
  centre_parts_kernel<T, kExact>
      <<<part_blocks, 256, 0, stream>>>(a.c, ldc, a.k, a.d, ldi, parts, part_stride, unscale, rounded_sq_norms);
  SKINNY_CHECK_LAUNCH();

  // Centre tiles are shared out over grid y only when the point blocks alone fill less than two
  // waves of two resident blocks per SM.
  const std::int64_t blocks_x = ceil_div(a.n, BM), tiles = ceil_div(a.k, BN);
  const std::int64_t want = 4LL * sms;
  std::int64_t split = std::min<std::int64_t>({tiles, std::max<std::int64_t>(1, ceil_div(want, blocks_x)), 65535});
  const std::int64_t tiles_per_split = ceil_div(tiles, split);
  split = ceil_div(tiles, tiles_per_split);

  // One product per term compares distances to the centres as rounded (centre_parts_kernel).
  const float* cn = kExact ? a.c_sq_norms : rounded_sq_norms;
  Params p{a.x, a.ldx ? a.ldx : a.d, a.n, a.d, parts, part_stride, unscale, ldi, a.k, cn, keys,
           static_cast<int>(tiles_per_split), a.row_sums, a.row_sums ? a.fault_row : -1, a.fault_col,
           a.fault_bit, a.fault_values};
  if (a.row_sums)
    SKINNY_CUDA_TRY(cudaMemsetAsync(a.row_sums, 0, static_cast<std::size_t>(a.n) * sizeof(double), stream));
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(split));
  const auto launch = [&](auto kernel) {
    SKINNY_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(R::smem)));
    kernel<<<grid, kThreads, R::smem, stream>>>(p);
    SKINNY_CHECK_LAUNCH();
  };
  if (a.row_sums && a.fault_row >= 0) launch(nearest_kernel<T, kExact, true, true>);
  else if (a.row_sums) launch(nearest_kernel<T, kExact, true, false>);
  else launch(nearest_kernel<T, kExact, false, false>);
}

/// Bytes of scratch launch_nearest<T, kExact> takes beyond the keys.
template <class T, bool kExact>
std::int64_t scratch_bytes(const NearestArguments& a) {
  using R = Ring<T, kExact>;
  const std::int64_t part_stride = round_up(a.k * round_up(a.d, R::elems), 128);
  return round_up(R::parts * part_stride * std::int64_t(sizeof(T)), 256) + 2 * round_up(a.k, 64) * std::int64_t(sizeof(float));
}

template <class T>
void nearest_of(Context& ctx, const NearestArguments& a) {
  const bool exact = a.math == Math::exact;
  const std::int64_t keys_bytes = round_up(a.n * static_cast<std::int64_t>(sizeof(unsigned long long)), 256);
  const std::int64_t scratch = exact ? scratch_bytes<T, true>(a) : scratch_bytes<T, false>(a);
  auto* ws = static_cast<unsigned char*>(ctx.workspace(static_cast<std::size_t>(keys_bytes + scratch)));
  auto* keys = reinterpret_cast<unsigned long long*>(ws);
  const cudaStream_t stream = ctx.stream();
  SKINNY_CUDA_TRY(cudaMemsetAsync(keys, 0xff, static_cast<std::size_t>(a.n) * sizeof(unsigned long long), stream));
  if (exact) launch_nearest<T, true>(ctx, a, keys, ws + keys_bytes);
  else launch_nearest<T, false>(ctx, a, keys, ws + keys_bytes);
  const int sms = ctx.properties().multiProcessorCount;
  const unsigned finish_blocks = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(a.n, 256), 8LL * sms));
  finish_kernel<<<finish_blocks, 256, 0, stream>>>(keys, a.x_sq_norms, a.n, a.labels, a.sq_distances);
  SKINNY_CHECK_LAUNCH();
}

}  // namespace
}  // namespace detail

void nearest(Context& ctx, const NearestArguments& a) {
  if (const Support s = nearest_can_implement(ctx, a); !s) throw std::invalid_argument(s.reason);
  switch (a.x_type) {
    case Element::f32: detail::nearest_of<float>(ctx, a); break;
    case Element::f16: detail::nearest_of<__half>(ctx, a); break;
    case Element::bf16: detail::nearest_of<__nv_bfloat16>(ctx, a); break;
  }
}

}  // namespace skinny::gemm
