// The fused nearest-centre kernel (skinny/gemm/nearest.hpp): a tensor-core GEMM X C^T whose epilogue
// keeps, per point, the smallest ||x||^2 + ||c||^2 - 2 x.c over the centres, so the n x k distances
// are never stored.
//
//  * A block owns 128 points and walks over tiles of 128 centres (all of them, or a share when the
//    points alone cannot fill the GPU or their rows are long: split_for). Per tile, 8 warps (4 along
//    points x 2 along centres) each compute a 32 x 64 product:
//      - float points: mma.m16n8k8 in 3xTF32 (tensor_core.cuh), float accuracy (Math::exact), or in one
//        TF32 product (Math::fast: a third of the tensor-core work, as TF32 GEMMs and flash-kmeans compute
//        them: centres rounded to TF32, points truncated to it by the tensor cores);
//      - half or bfloat16 points: mma.m16n8k16 in their own type, at twice TF32's rate and with half the
//        bytes to read. Math::fast rounds the centres to that type (as 16-bit GEMMs take them);
//        Math::exact writes each centre, scaled by a power of two, as the sum of three 16-bit parts (24
//        significant bits and more), so every product is exact in float: float accuracy, three products.
//  * One product per term on Hopper (sm_90a builds; nearest_uses_wgmma): wgmma instead of mma.sync. The two
//    warpgroups each multiply 64 points by the tile's 128 centres, reading both straight from the ring
//    through descriptors (its rows are 128 bytes, swizzled as wgmma's 128-byte mode expects), 4 k-steps
//    per stage, left running while the next stage is waited for (two blocks per SM interleave; a 6-stage
//    ring with one block per SM was slower). Each warp then holds 16 rows x 128 columns, in mma.sync's
//    fragment order. Float's exact products take wgmma too: per k-step x^ c_hi and x^ c_lo from the ring
//    (x^ the point truncated to TF32 by the tensor cores) and x_lo c_hi with x_lo = x - x^ rounded to TF32,
//    from registers (the warp's rows by ldmatrix), all into the running sums (the tensor cores add by
//    truncation: at d = 1000 the distances' error reached 8.6 float epsilons of ||x||^2 + max ||c||^2, 0.135
//    of the tests' bound). 16-bit exact products run their three parts on wgmma too, from cp.async stages
//    of 64-byte rows (the 64-byte swizzle mode); exact products with row sums stay on mma.sync. A tile
//    with at most 64 or 32 live centres (k <= 64, or k's last tile) takes m64n64 or m64n32 wgmmas.
//    H200, 2^20 blobs, float distances ms per iteration, three products mma.sync / wgmma: d = 128, k = 1024
//    4.37 / 2.15; d = 512 16.9 / 8.25; d = 16 1.37 / 0.82; d = 2 1.39 / 1.00.
//  * Both operands stream through a ring of 16-byte slots (8 per row and stage: 32 floats or 64 16-bit
//    elements; 4 for 16-bit exact products, whose centres take three slots each), one barrier per stage;
//    three stages where a stage is at most 32 KB (two blocks per SM still fit), otherwise two. mma.sync's
//    stages come by cp.async, every thread copying its slots; wgmma's by the TMA, one thread queueing the
//    points' and the centres' boxes (the same swizzle) and the stage's mbarrier counting their bytes: the
//    copies' instructions had bound the kernel (distances at 1M x 128, k = 1024: 1.12 ms, 1.50 by cp.async).
//    Rows under 32 bytes (d = 2 to 7 float) with up to 1024 centres are the exception: cp.async stages
//    take half the TMA's time there (a box is then mostly zero fill), but more at k >= 2048.
//    The pipeline runs across tile boundaries. The centres' parts are prepared once per call
//    (centre_parts_kernel), so the ring holds them ready; float points are split as fragments are read.
//    Rows of one stage or less (d <= 32 float) copy their points in the ring's first round only: every
//    later stage would bring the same ones (H200, 1M x 2, k = 8192, fast: distances 4.0 -> 2.8 ms).
//  * Fragments come from shared memory by ldmatrix.x4 (four 8 x 8 matrices of 16-byte rows, already in the
//    mma's register order: no moves before the tensor cores), both operands in the inner dimension's own
//    order. Slot s of row r is stored at slot s ^ swizzle(r), so the 8 rows of a matrix hit 8 distinct
//    bank groups.
//  * Exact products of each k-group go into a fresh accumulator (the tensor cores add by truncation),
//    added to the running sum by round-to-nearest float adds.
//  * After a tile, each thread turns its 4 rows x 16 columns (wgmma: 2 x 32) into ||c||^2 - 2 x.c (one FMA
//    each: ||x||^2 is the same for the whole row and is added at the end), ||c||^2 coming with the tile's
//    last stage (+infinity past k, so no column needs a test). The epilogue bounds the kernel where rows
//    are short: wgmma's rows take their minima in four independent chains merged after the tile, the
//    accumulators are not cleared (a tile's first wgmma does not add to them), and the stage's products
//    past d are skipped (H200, 1M points, fast, ms per iteration at 6ca2044: d = 16, k = 8192 4.54 ->
//    3.26; d = 2, k = 1024 0.82 -> 0.65; d = 128, k = 1024 1.35 -> 1.30; d = 512, k = 1024 4.90 -> 5.00,
//    before full stages committed their products on their own path, below).
//    The minimum per row (ties: the lowest column) is combined over the lane quad by shuffles and kept
//    per warp column in shared memory. At the end each block stores, per row, its (ordered value, column)
//    for its share of the centres; finish_kernel takes the least over the shares, so the result does not
//    depend on the order blocks finish in. With one share and no certificate the block writes the labels
//    and distances itself.
//  * Math::exact by ExactMethod::fast_then_recheck: the one-product kernel also keeps each point's second
//    smallest distance. A point whose best two differ by more than twice a bound on the one-product error
//    (from ||x||, the centres' own rounding and the arithmetic: CertificateBound) has the exact argmin's
//    label; float points it leaves are certified again with their own ||x^ - x|| (recertify_kernel); the
//    others are gathered and run again through the exact kernel. Float and bfloat16 points with a half copy
//    (NearestArguments::x_half) take the first pass on the copy, 16-bit products certified with each
//    point's own ||x^ - x|| (bfloat16 points: their centres rounded to half's 11 bits, not to 8), and the
//    re-check on the points themselves.
#include "kernels/common.cuh"
#include "nearest_certificate.hpp"
#include "nearest_rules.hpp"
#include "tensor_core.cuh"
#include "wgmma.cuh"

#include <skinny/gemm/cp_async.cuh>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/nearest.hpp>

#include <cuda.h>  // CUtensorMap; the driver's encoder is fetched at run time (no link to libcuda)

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace skinny::gemm {
namespace detail {
namespace {

constexpr int kThreads = 256;
constexpr int BM = 128;  ///< points per block
constexpr int BN = 128;  ///< centres per tile
/// How the 8 warps share a block's tile of 128 points x 128 centres: with mma.sync, 4 x 2 warps of 32 x 64;
/// with wgmma, two warpgroups of 64 x 128, each warp 16 rows of all the columns (the accumulators' layout).
template <bool kWgmma>
struct Warps {
  static constexpr int m = kWgmma ? 8 : 4, n = kWgmma ? 1 : 2;
  static constexpr int mt = BM / m / 16;  ///< m16 tiles per warp
  static constexpr int nt = BN / n / 8;   ///< n8 tiles per warp
  static_assert(m * n * 32 == kThreads, "8 warps");
};
constexpr int kMaxWarpsN = 2;  ///< the most warp columns of either layout (the per-row scratch's width)
/// wgmma: rows of X narrower than this are staged by cp.async where k is at most kNarrowCpAsyncMaxK. H200,
/// 1M points, fast, distances ms per iteration, TMA / cp.async: d = 2, k = 128 0.27 / 0.14, k = 1024 0.88 /
/// 0.72, k = 2048 1.32 / 1.37, k = 8192 4.30 / 5.33; d = 8 half, k = 128 0.27 / 0.14; d = 8 float (32
/// bytes), k = 128 0.13 / 0.14 (bench/results/h200/2026-11-28_narrow-rows-and-binned-sums).
constexpr std::int64_t kTmaMinRowBytes = 32;
constexpr std::int64_t kNarrowCpAsyncMaxK = 1024;

/// Candidates a point may have in a collecting pass (kCollect): a point with more is re-checked by three
/// products over all the centres.
constexpr int kCandidateSlots = 16;

/// Centre rows of a stage in the rings of few centres (k <= 32 or 64, TMA stages): the stage shrinks from 32
/// KB (16-bit, or float with one product) to 20 or 24 KB, so five or four stages fit where three did, and
/// each block keeps four or three stages of X in flight instead of two (H200, 262144 x 4096, k = 16, half:
/// the wide ring's stages waited on their copies 76 % of the time, at 47 % of the read rate).
constexpr int kFewCentres = 32, kSomeCentres = 64;
/// Shared memory one of two resident blocks a SM may take (228 KB a SM, 1 KB of it reserved per block).
constexpr std::size_t kSmemPerBlock = 233472 / 2 - 1024;

/// The ring's shape for points of type T, the products `exact` asks for and kCentres centre rows a stage.
template <class T, bool kExact, int kCentres = BN>
struct Ring {
  static constexpr bool is_float = std::is_same_v<T, float>;
  static constexpr int elems = 16 / int(sizeof(T));  ///< elements per 16-byte slot
  /// Centre parts: TF32 high (and low) halves for float; the rounded centre, or three parts, for 16-bit.
  static constexpr int parts = is_float ? (kExact ? 2 : 1) : (kExact ? 3 : 1);
  static constexpr int ch = !is_float && kExact ? 4 : 8;  ///< slots per row and stage
  static constexpr int bk = ch * elems;                  ///< inner elements per stage
  static constexpr int bn = kCentres;  ///< centre rows of a stage: BN, or the tile's first 32 or 64
  static_assert(bn == BN || bn == kFewCentres || bn == kSomeCentres, "the wide ring, or a ring of few centres");
  /// Per stage: the points, the centre parts, then (tile_slots) the tile's ||c||^2 and unscale factors,
  /// BN of each (+infinity and 0 past k).
  static constexpr int tile_slots = (BM + parts * bn) * ch;
  static constexpr int slots = tile_slots + 2 * BN / 4;
  /// Per row and warp column the best value, column, row sum and second best.
  static constexpr std::size_t best_bytes =
      BM * kMaxWarpsN * (sizeof(float) + sizeof(int) + sizeof(double) + sizeof(float));
  /// The wide ring: three stages where they fit 33 KB; a ring of few centres: as many as two blocks a SM
  /// leave room for, with wgmma's extras (below).
  static constexpr int stages =
      bn == BN ? (slots * 16 <= 33 * 1024 ? 3 : 2)
               : static_cast<int>((kSmemPerBlock - best_bytes - 1024) / (slots * 16 + sizeof(std::uint64_t)));
  static constexpr std::size_t smem = std::size_t(stages) * slots * 16 + best_bytes;
  /// wgmma also needs the ring 1024-byte aligned (its swizzle's period), which the kernel does by hand, and
  /// an mbarrier a stage.
  static constexpr std::size_t smem_wgmma = smem + 1024 + stages * sizeof(std::uint64_t);
  static_assert(bn == BN || smem_wgmma <= kSmemPerBlock, "two blocks a SM");
  static_assert(BM * ch % kThreads == 0 && BN * ch % kThreads == 0, "whole copies per thread");
  static_assert(stages >= 2 && (slots * 16) % 1024 == 0, "a ring of stages, each 1024-byte aligned for wgmma");
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
  /// Per share of the centre tiles and point, [share][n]: the nearest as (ordered distance << 32) |
  /// centre, all ones when none; with kSecond also the second smallest distance (finish_kernel combines
  /// the shares).
  unsigned long long* keys;
  float* second;
  /// With one share and no second best: each point's label and distance written here directly
  /// (write_result, as finish_kernel would), not its key. Null: keys.
  std::int32_t* labels;
  float* sq_distances;
  const float* x_sq_norms;
  int tiles_per_split;
  int shares;  ///< block b takes share b % shares of the centre tiles for point block b / shares
  double* row_sums;  ///< per point: += the sum of its cross terms (null: not wanted)
  std::int64_t fault_row, fault_col;  ///< NearestArguments' fault injection
  int fault_bit;
  float* fault_values;
  /// kCollect: per point, the largest value (||c^||^2 - 2 x.c^) a centre may have and still be the exact
  /// argmin (collect_below); each such centre's index goes to the point's next slot of candidates
  /// ([point][kCandidateSlots]), counted in candidate_counts (zeroed before; counts past the slots are kept,
  /// the indices not).
  const float* collect_below;
  std::int32_t* candidates;
  unsigned* candidate_counts;
  /// wgmma's TMA stages: the points (n x d, ldx) and the centre part (k x d, ldi) as TMA tensors of stage
  /// boxes.
  CUtensorMap x_map, c_map, c_lo_map;  ///< c_lo_map: exact, the centres' TF32 low halves
};

/// Float bits mapped so that unsigned order is float order (finite values and infinities).
__device__ __forceinline__ std::uint32_t ordered_bits(float v) {
  const std::uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float from_ordered_bits(std::uint32_t o) {
  return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}

/// Point o's label and distance from its least key (all ones: no key, label 0 and distance NaN): the
/// distance ||x||^2 + the key's ||c||^2 - 2 x.c, clamped at 0.
__device__ void write_result(std::int64_t o, unsigned long long key, const float* __restrict__ x_sq_norms,
                             std::int32_t* __restrict__ labels, float* __restrict__ sq_distances) {
  const bool none = key == ~0ull;
  if (labels) labels[o] = none ? 0 : static_cast<std::int32_t>(key & 0xffffffffu);
  if (sq_distances) {
    const float v = x_sq_norms[o] + (none ? NAN : from_ordered_bits(static_cast<std::uint32_t>(key >> 32)));
    sq_distances[o] = v > 0.f ? v : (v == v ? 0.f : v);
  }
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
/// bounds (one product per term, optional; zeros before the call): [0] the largest ||c||, [1] the largest
/// ||c^ - c|| (c^ the centre as rounded), each rounded up, as float bits, or +infinity's when a rounded
/// element is not finite (the certificate then holds for no point).
template <class T, bool kExact>
__global__ void __launch_bounds__(256) centre_parts_kernel(const float* __restrict__ c, std::int64_t ldc, std::int64_t k,
                                                          std::int64_t d, std::int64_t ldi, T* __restrict__ out,
                                                          std::int64_t part_stride, float* __restrict__ unscale,
                                                          float* __restrict__ rounded_sq_norms,
                                                          unsigned* __restrict__ bounds) {
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
    double rounded_sq = 0, sq = 0;  // one product per term: ||c||^2 of the centre as rounded, and as given,
    double error_sq = 0;            // ||c^ - c||^2 (each difference and its square exact in double)
    bool finite = true;             // and whether every rounded element is finite
    for (std::int64_t p = lane; p < ldi; p += 32) {
      const float v = p < d ? row[p] * scale : 0.f;
      T* at = out + j * ldi + p;
      if (!kExact) sq += double(v) * double(v);
      if constexpr (std::is_same_v<T, float>) {
        const Tf32Pair s = split_tf32(v);
        at[0] = __uint_as_float(s.hi);
        if constexpr (kExact) {
          at[part_stride] = __uint_as_float(s.lo);
        } else {
          rounded_sq += double(__uint_as_float(s.hi)) * double(__uint_as_float(s.hi));
          error_sq += (double(__uint_as_float(s.hi)) - double(v)) * (double(__uint_as_float(s.hi)) - double(v));
        }
        finite = finite && isfinite(__uint_as_float(s.hi));
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
        error_sq += (double(from_16bit(at[0])) - double(v)) * (double(from_16bit(at[0])) - double(v));
        finite = finite && isfinite(from_16bit(at[0]));
      }
    }
    if constexpr (!kExact) {
      for (int off = 16; off > 0; off >>= 1) {
        rounded_sq += __shfl_xor_sync(0xffffffffu, rounded_sq, off);
        sq += __shfl_xor_sync(0xffffffffu, sq, off);
        error_sq += __shfl_xor_sync(0xffffffffu, error_sq, off);
      }
      finite = __all_sync(0xffffffffu, finite);
      if (lane == 0) {
        rounded_sq_norms[j] = static_cast<float>(rounded_sq);
        // Non-negative float bits order as unsigned integers (a NaN norm lands above infinity: no certificate).
        // The double sums of d squares are within d 2^-53 of theirs: 2^-20 more covers that.
        if (bounds) {
          atomicMax(bounds, finite ? __float_as_uint(__double2float_ru(__dsqrt_ru(sq) * (1 + 0x1p-20))) : 0x7f800000u);
          atomicMax(bounds + 1,
                    finite ? __float_as_uint(__double2float_ru(__dsqrt_ru(error_sq) * (1 + 0x1p-20))) : 0x7f800000u);
        }
      }
    }
  }
}

/// The lowest two of {b, s} and {ob, os} (each a best and a second best): the loser's best competes for second.
/// (b, j) becomes the better of the two bests (ties: the lower column).
__device__ __forceinline__ void merge_best_two(float& b, int& j, float& s, float ob, int oj, float os) {
  const bool other_wins = better(ob, oj, b, j);
  s = fminf(fminf(s, os), other_wins ? b : ob);
  if (other_wins) {
    b = ob;
    j = oj;
  }
}

/// T: the points' type (float, __half, __nv_bfloat16); kExact: float-accurate products, otherwise one per
/// term (Math). kRowSums: also adds each point's cross terms into p.row_sums; kFault: and flips p's faulty
/// term (instances of their own: the plain kernel does no such work, and the fault's code costs registers
/// the checked kernel needs). kSecond: also keeps each point's second smallest distance (the certificate
/// of ExactMethod::fast_then_recheck). kWgmma: Hopper's wgmma (sm_90a) instead of mma.sync (one product per
/// term, or the three exact ones); kTma: its stages loaded by the TMA, else by cp.async (narrow rows,
/// kTmaMinRowBytes; 16-bit exact products' 64-byte rows); kCentres: centre rows of a stage, fewer than BN for
/// k <= kCentres (TMA stages). kCollect: writes no results, but lists each point's centres whose value is
/// at most its p.collect_below (the candidates of an exact re-check).
template <class T, bool kExact, bool kRowSums, bool kFault, bool kSecond, bool kWgmma, bool kTma, int kCentres = BN,
          bool kCollect = false>
__global__ void __launch_bounds__(kThreads, 2) nearest_kernel(const __grid_constant__ Params p) {
  static_assert(kWgmma || !kTma, "the TMA feeds wgmma's stages");
  static_assert(kTma || kCentres == BN, "the rings of few centres have TMA stages");
  using R = Ring<T, kExact, kCentres>;
  static_assert(!kTma || R::ch == 8, "the TMA's boxes are 128-byte rows");
  constexpr int CH = R::ch, kStages = R::stages;
  constexpr int WARPS_M = Warps<kWgmma>::m, WARPS_N = Warps<kWgmma>::n, MT = Warps<kWgmma>::mt, NT = Warps<kWgmma>::nt;
  extern __shared__ __align__(16) unsigned char smem_base[];
  unsigned char* smem = smem_base;
  if constexpr (kWgmma) {  // the ring 1024-byte aligned: the swizzle's period (smem_wgmma has the room)
    const std::uint32_t at = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem_base));
    smem += (1024u - (at & 1023u)) & 1023u;
  }
  uint4* ring = reinterpret_cast<uint4*>(smem);  // [kStages][R::slots]: points, then the centre parts
  float* best_val = reinterpret_cast<float*>(ring + kStages * R::slots);  // [BM][WARPS_N]
  int* best_col = reinterpret_cast<int*>(best_val + BM * WARPS_N);
  double* row_sum = reinterpret_cast<double*>(best_col + BM * WARPS_N);  // [BM][WARPS_N], when p.row_sums
  float* best_second = reinterpret_cast<float*>(row_sum + BM * WARPS_N);  // [BM][WARPS_N], kSecond
  std::uint64_t* stage_full = reinterpret_cast<std::uint64_t*>(smem + R::smem);  // wgmma: per stage, its TMA

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const std::int64_t share = blockIdx.x % p.shares;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x / p.shares) * BM;
  const std::int64_t tiles = (p.k + BN - 1) / BN;
  const std::int64_t tile_begin = share * p.tiles_per_split;
  const std::int64_t tile_end = min(tiles, tile_begin + p.tiles_per_split);
  const int ksteps = static_cast<int>((p.d + R::bk - 1) / R::bk);
  const std::int64_t nsteps = (tile_end - tile_begin) * ksteps;

  for (int i = tid; i < BM * WARPS_N; i += kThreads) row_sum[i] = 0;  // best_val, best_col: written at the end

  // Copies of a thread: rows tid / CH + kRowStep i of each tile, always slot tid % CH of the row, so the
  // inner offset and the bytes left at the edge are the same for all of them. Rows past the edge
  // copy nothing (zeros) and are never reported.
  constexpr int kCopies = BM * CH / kThreads;
  constexpr int kRowStep = kThreads / CH;  // rows between a thread's copies (even: same parity for all)
  constexpr int kTileSlots = R::tile_slots;  // where a stage's ||c||^2 and unscale factors start
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
    // Rows of one stage or less: every stage holds the same points, copied in the ring's first round only.
    const bool copy_points = ksteps > 1 || tile - tile_begin < kStages;
    if constexpr (kTma) {  // one thread: the points' and the centres' boxes, zeros past the edges
      if (tid == 0) {
        uint4* stage = ring + buf * R::slots;
        mbarrier_expect_bytes(stage_full + buf, ((copy_points ? BM : 0) + R::parts * R::bn) * CH * 16);
        if (copy_points) tma_load_2d(stage, &p.x_map, next_k * R::bk, static_cast<int>(row0), stage_full + buf);
        tma_load_2d(stage + BM * CH, &p.c_map, next_k * R::bk, static_cast<int>(tile * BN), stage_full + buf);
        if constexpr (R::parts == 2)  // exact: the centres' low halves
          tma_load_2d(stage + (BM + R::bn) * CH, &p.c_lo_map, next_k * R::bk, static_cast<int>(tile * BN),
                      stage_full + buf);
      }
    } else {  // every thread its slots
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
        if (copy_points) cp_async<16>(xs + i * kRowStep * CH, xv ? x_at + i * x_row_step : x, xv ? bytes : 0);
        const bool cv = col0 + i * kRowStep < p.k && bytes > 0;
        const std::int64_t off = cv ? c_at + i * c_row_step : 0;
#pragma unroll
        for (int q = 0; q < R::parts; ++q)
          cp_async<16>(xs + (BM + q * BN) * CH + i * kRowStep * CH, parts + q * p.part_stride + off, cv ? bytes : 0);
      }
    }
    // The tile's last stage also brings its ||c||^2 (and, 16-bit exact, unscale factors) for the epilogue,
    // which reads them while that stage is still in hand. Past k: ||c||^2 = +infinity, so that those
    // columns (zero products: the centres' rows are zeros there) are never nearer, unscale factors 0.
    if (next_k == ksteps - 1 && tid < (!R::is_float && kExact ? 2 : 1) * BN) {
      const std::int64_t col = tile * BN + tid % BN;
      float* to = reinterpret_cast<float*>(ring + buf * R::slots + kTileSlots) + tid;
      if (col < p.k) cp_async<4>(to, (tid < BN ? p.cn : p.c_unscale) + col, 4);
      else *to = tid < BN ? INFINITY : 0.f;  // read after the barriers that also land the copies
    }
    if (++next_k == ksteps) {
      next_k = 0;
      ++next_tile;
    }
  };

  float best_v[MT][2];  // per row of this lane (m16 tile, g or g + 8): the best value and column so far
  int best_j[MT][2];
  float second_v[MT][2];  // kSecond: the second smallest value so far (unused otherwise, optimised away)
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      best_v[mt][h] = INFINITY;
      best_j[mt][h] = INT_MAX;
      second_v[mt][h] = INFINITY;
    }
  // kCollect: each row's bound on its candidates' values (-infinity past n: none).
  float collect_below[MT][2];
  if constexpr (kCollect) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const std::int64_t row = row0 + wm * (BM / WARPS_M) + mt * 16 + gq + 8 * h;
        collect_below[mt][h] = row < p.n ? p.collect_below[row] : -INFINITY;
      }
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
  if constexpr (kTma) {  // the stages' mbarriers (cp.async stages wait at the block barrier instead)
    if (tid == 0)
      for (int s = 0; s < kStages; ++s) mbarrier_init(stage_full + s, 1);
    __syncthreads();
  }
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nsteps) issue_next(s);
    cp_async_commit();
  }
  int buf = 0, k_in_tile = 0;  // the stage in hand, and its k-step within the tile
  unsigned phase = 0;          // wgmma: the parity of the stage's mbarrier phase this round of the ring
  std::int64_t tile = tile_begin;
  for (std::int64_t step = 0; step < nsteps; ++step) {
    cp_async_wait<kStages - 2>();
    const uint4* xs = ring + buf * R::slots;
    const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(xs));
    if constexpr (kWgmma) {
      if constexpr (kTma) {
        mbarrier_wait(stage_full + buf, phase);  // the TMA writes in the async proxy wgmma reads in: no fence
      } else {
        fence_proxy_async_shared();  // cp.async's copies before the tensor cores' async-proxy reads
        __syncthreads();             // everyone's copies have landed
      }
      // The warpgroup's 64 points and the tile's 128 centres, one k-step (32 bytes of each row) at a time,
      // left running while the next stage is waited for; the previous stage's are complete before the
      // barrier below frees its slot for copying into.
      const std::uint32_t a_tile = base + 16u * ((warp / 4) * 64 * CH), b_tile = base + 16u * (BM * CH);
      // Exact: x c = x^ c_hi + x^ c_lo + x_lo c_hi, x^ the point as the tensor cores read it from shared
      // memory (truncated to TF32), x_lo = x - x^ (exact in float) rounded to TF32, from registers: this
      // warp's 16 rows by ldmatrix, as mma.sync's fragments (one k-step per fragment).
      constexpr bool kSplitPoints = kExact && R::is_float;
      std::uint32_t x_lo[kSplitPoints ? CH / 2 : 1][4];
      if constexpr (kSplitPoints) {
#pragma unroll
        for (int kk = 0; kk < CH / 2; ++kk) {
          const uint4 a = ldmatrix_x4(base + a_lane + 16u * ((2 * kk) ^ a_mask));
          const std::uint32_t bits[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
          for (int e = 0; e < 4; ++e)
            x_lo[kk][e] = tf32_rounded_bits(
                __float_as_uint(__uint_as_float(bits[e]) - __uint_as_float(tf32_truncated_bits(bits[e]))));
        }
      }
      wgmma_fence();
      // The tiles' descriptors once a stage, their k-steps and parts by offsets.
      const std::uint64_t a_desc0 = wgmma_descriptor<16 * CH>(a_tile), b_desc0 = wgmma_descriptor<16 * CH>(b_tile);
      // One k-step of the stage (32 bytes of each row): products(kk).
      // wgmmas over the first N of the tile's 128 centres (width: N), the others' accumulators untouched.
      const auto products = [&](int kk, auto width) {
        constexpr int N = decltype(width)::value;
        // The parts' descriptors: part q of the centres follows part q - 1.
        const auto part = [&](int q) { return wgmma_descriptor_plus(b_desc0, 16u * (q * R::bn * CH) + 32u * kk); };
        const std::uint64_t a_desc = wgmma_descriptor_plus(a_desc0, 32u * kk);
        // A tile's first product starts its sums (the accumulators are not cleared between tiles).
        const bool sum_on = kk > 0 || k_in_tile > 0;
        if constexpr (kSplitPoints) {  // the small terms first
          wgmma_m64n_tf32_regs<N>(acc[0], x_lo[kk], part(0), sum_on);
          wgmma_m64n<T, N>(acc[0], a_desc, part(1));
        } else if constexpr (kExact) {  // 16-bit: the centres' low, middle, then high parts (64-byte rows)
          wgmma_m64n<T, N>(acc[0], a_desc, part(2), sum_on);
          wgmma_m64n<T, N>(acc[0], a_desc, part(1));
        }
        wgmma_m64n<T, N>(acc[0], a_desc, part(0), kExact || sum_on);
      };
      // Past d a stage holds zeros: the k-steps of a row's last, partial stage that are all zeros are
      // skipped (d = 2: three of four). Full stages keep one unbranched run of products, committed on
      // their own path: committed after the join, the branches made ptxas close each path with an empty
      // wgmma group, and the wait below then waited for this stage's products, not the previous stage's.
      constexpr int kSteps = CH / 2, kStepElems = R::bk / kSteps;
      const std::int64_t inner_left = p.d - static_cast<std::int64_t>(k_in_tile) * R::bk;
      const auto stage_products = [&](auto width) {
        if (inner_left >= R::bk) {
#pragma unroll
          for (int kk = 0; kk < kSteps; ++kk) products(kk, width);
          wgmma_commit();
        } else {
#pragma unroll
          for (int kk = 0; kk < kSteps; ++kk)
            if (kk * kStepElems < inner_left) products(kk, width);
          wgmma_commit();
        }
      };
      // A tile of at most 64 or 32 live centres (k = 16: the whole problem) multiplies only those, a
      // half or a quarter of the tensor cores' work (H200: 4M x 128 half, k = 16, 1.77 -> 1.59 ms an
      // iteration). Columns past them keep an earlier tile's sums (or the first clear's zeros), and
      // ||c||^2 = +infinity there, so they are never nearer.
      const std::int64_t live = p.k - tile * BN;
      // A ring of few centres holds only its kCentres rows of the tile: no wider products.
      if constexpr (kCentres == kFewCentres) {
        stage_products(std::integral_constant<int, kFewCentres>{});
      } else {
        if (kCentres == BN && live > 64) stage_products(std::integral_constant<int, 128>{});
        else if (live > 32) stage_products(std::integral_constant<int, 64>{});
        else stage_products(std::integral_constant<int, 32>{});
      }
      wgmma_wait<1>();
    }
    __syncthreads();  // everyone's copies of this stage have landed; the stage read last time is free
    if (step + kStages - 1 < nsteps) issue_next(buf == 0 ? kStages - 1 : buf - 1);
    cp_async_commit();
    buf = buf + 1 == kStages ? 0 : buf + 1;
    if (buf == 0) phase ^= 1u;
    if constexpr (!kWgmma) {
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
    }

    if (++k_in_tile < ksteps) continue;
    k_in_tile = 0;
    if constexpr (kWgmma) {  // the tile's products complete
      wgmma_wait<0>();
      wgmma_settled(acc[0]);
    }
    // The tile is complete: acc[mt][nt][2h + c] is row 16 mt + g + 8h, column 8 nt + 2t + c of the
    // warp's part.
    // This thread's 16 columns: their ||c||^2 from the stage in hand, +infinity past k (never nearer).
    const std::int64_t col0 = tile * BN + wn * (BN / WARPS_N) + 2 * tq;
    const float* tile_cn = reinterpret_cast<const float*>(xs + kTileSlots);
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
    // lanes and warps combine their minima once, after the last tile. Each pair of columns' ||c||^2 comes
    // from the stage in hand, +infinity past k (never nearer).
    const int colb = static_cast<int>(col0);
    float lane_sum[MT][2] = {};  // this lane's terms of each row (for the checksum test)
    // Per row, kChains minima over consecutive runs of n8 tiles, merged in column order after the tile: a
    // row's compares form kChains independent chains, not one, for the schedulers to interleave (wgmma's
    // warps hold 2 rows of 32 columns a thread). Column indices within the tile until the merge.
    constexpr int kChains = kWgmma ? 4 : 1, kTilesPerChain = NT / kChains;
    static_assert(NT % kChains == 0, "whole n8 tiles per chain");
    float chain_v[MT][2][kChains], chain_s[MT][2][kChains];  // best and (kSecond) second best of each run
    int chain_j[MT][2][kChains];
    const auto each_chain = [](auto&& f) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int q = 0; q < kChains; ++q) f(mt, h, q);
    };
    each_chain([&](int mt, int h, int q) {
      chain_v[mt][h][q] = INFINITY;
      chain_s[mt][h][q] = INFINITY;
      chain_j[mt][h][q] = 0;
    });
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int q = nt / kTilesPerChain;
      const float2 v = reinterpret_cast<const float2*>(tile_cn)[(wn * (BN / WARPS_N) + nt * 8 + 2 * tq) / 2];
      const float cn[2] = {v.x, v.y};  // +infinity past k
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const float term = acc[mt][nt][2 * h + c], d = fmaf(-2.f, term, cn[c]);
            if (kRowSums && cn[c] != INFINITY) lane_sum[mt][h] += term;
            if constexpr (kCollect) {
              if (d <= collect_below[mt][h]) {  // rare: a handful of a point's k centres
                const std::int64_t row = row0 + wm * (BM / WARPS_M) + mt * 16 + gq + 8 * h;
                const unsigned slot = atomicAdd(p.candidate_counts + row, 1u);
                if (slot < kCandidateSlots) p.candidates[row * kCandidateSlots + slot] = colb + nt * 8 + c;
              }
            }
            // d wins: the old best is second; else d may be.
            if (kSecond) chain_s[mt][h][q] = fminf(chain_s[mt][h][q], fmaxf(d, chain_v[mt][h][q]));
            if (d < chain_v[mt][h][q]) {
              chain_v[mt][h][q] = d;
              chain_j[mt][h][q] = nt * 8 + c;
            }
          }
    }
    // Each run's columns follow the best's so far: a strict < keeps the lowest of tied columns, and the
    // loser of the two bests competes for second.
    each_chain([&](int mt, int h, int q) {
      const float v = chain_v[mt][h][q];
      if (kSecond) second_v[mt][h] = fminf(second_v[mt][h], fminf(chain_s[mt][h][q], fmaxf(v, best_v[mt][h])));
      if (v < best_v[mt][h]) {
        best_v[mt][h] = v;
        best_j[mt][h] = colb + chain_j[mt][h][q];
      }
    });
    if (kRowSums) {  // the lane quad's shares in double, in a fixed order, into the slot of (row, warp column)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          double rs = lane_sum[mt][h];
          rs += __shfl_xor_sync(0xffffffffu, rs, 1);
          rs += __shfl_xor_sync(0xffffffffu, rs, 2);
          const int r = wm * (BM / WARPS_M) + mt * 16 + gq + 8 * h;
          if (tq == 0) row_sum[r * WARPS_N + wn] += rs;
        }
    }
    if constexpr (!kWgmma) clear();
    ++tile;
  }
  // Each row's minimum over the lane quad, then (below) over the warp columns.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float bv = best_v[mt][h], sv = second_v[mt][h];
      int bj = best_j[mt][h];
#pragma unroll
      for (int off = 1; off < 4; off <<= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
        const int oj = __shfl_xor_sync(0xffffffffu, bj, off);
        if constexpr (kSecond) {
          merge_best_two(bv, bj, sv, ov, oj, __shfl_xor_sync(0xffffffffu, sv, off));
        } else if (better(ov, oj, bv, bj)) {
          bv = ov;
          bj = oj;
        }
      }
      const int r = wm * (BM / WARPS_M) + mt * 16 + gq + 8 * h;
      if (tq == 0) {
        best_val[r * WARPS_N + wn] = bv;
        best_col[r * WARPS_N + wn] = bj;
        if (kSecond) best_second[r * WARPS_N + wn] = sv;
      }
    }
  cp_async_wait<0>();
  __syncthreads();
  for (int r = tid; r < BM && !kCollect; r += kThreads) {  // a collecting pass writes its candidates only
    if (row0 + r >= p.n) break;
    float bv = best_val[r * WARPS_N], sv = kSecond ? best_second[r * WARPS_N] : INFINITY;
    int bj = best_col[r * WARPS_N];
#pragma unroll
    for (int w = 1; w < WARPS_N; ++w) {
      if constexpr (kSecond) {
        merge_best_two(bv, bj, sv, best_val[r * WARPS_N + w], best_col[r * WARPS_N + w], best_second[r * WARPS_N + w]);
      } else if (better(best_val[r * WARPS_N + w], best_col[r * WARPS_N + w], bv, bj)) {
        bv = best_val[r * WARPS_N + w];
        bj = best_col[r * WARPS_N + w];
      }
    }
    const std::int64_t at = share * p.n + row0 + r;
    const unsigned long long key =
        bj == INT_MAX ? ~0ull : (static_cast<unsigned long long>(ordered_bits(bv)) << 32) | static_cast<std::uint32_t>(bj);
    if (p.labels || p.sq_distances) write_result(row0 + r, key, p.x_sq_norms, p.labels, p.sq_distances);
    else p.keys[at] = key;
    if (kSecond) p.second[at] = sv;
    if (kRowSums) {
      double rs = 0;
#pragma unroll
      for (int w = 0; w < WARPS_N; ++w) rs += row_sum[r * WARPS_N + w];
      atomicAdd(p.row_sums + row0 + r, rs);  // one block per point unless the centre tiles are shared out
    }
  }
}

/// What finish_kernel needs to certify one-product labels (ExactMethod::fast_then_recheck); second null:
/// no certificate.
struct Certificate {
  const float* second = nullptr;  ///< [share][m] second smallest distances
  CertificateBound bound;
  double sqrt_d = 0;
  /// Float bits of the largest ||c|| and the largest ||c^ - c|| (centre_parts_kernel).
  const unsigned* centre_bounds = nullptr;
  std::int32_t* flagged = nullptr;  ///< out: the points left to re-check, in no particular order
  unsigned* flagged_count = nullptr;
  /// Out, optional: per listed point, its key and second best (for recertify_kernel).
  unsigned long long* flagged_key = nullptr;
  float* flagged_second = nullptr;
  /// Out, optional: per listed point, its collect_bound (for a collecting pass).
  float* flagged_below = nullptr;
  /// Optional: per point, ||x^ - x|| rounded up (points multiplied as a half copy of float points), in
  /// place of the bound's u_x ||x||.
  const float* x_errors = nullptr;
};

/// The certificate's terms, with the centres' bounds centre_parts_kernel found.
__device__ CertificateTerms terms_of(const Certificate& cert) {
  return {cert.bound, cert.sqrt_d, __uint_as_float(cert.centre_bounds[0]), __uint_as_float(cert.centre_bounds[1])};
}

/// Labels and distances from the keys of `shares` shares of the centre tiles ([share][m]): the least key,
/// its distance ||x||^2 + the key's ||c||^2 - 2 x.c clamped at 0. A point whose distances were all NaN has
/// no key (all ones): label 0, distance NaN. rows (optional): where point i's results go (a re-check's
/// gathered points). With a certificate, a point whose best two distances are within twice its bound is
/// not written but listed in cert.flagged.
__global__ void finish_kernel(const unsigned long long* __restrict__ keys, int shares, std::int64_t m,
                              const std::int32_t* __restrict__ rows, const float* __restrict__ x_sq_norms,
                              std::int32_t* __restrict__ labels, float* __restrict__ sq_distances,
                              const Certificate cert) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < m;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    unsigned long long key = keys[i];
    float second = cert.second ? cert.second[i] : INFINITY;
    for (int s = 1; s < shares; ++s) {
      const unsigned long long other = keys[s * m + i];
      const unsigned long long loser = other < key ? key : other;  // its best competes for second (NaN if none)
      key = other < key ? other : key;
      if (cert.second)
        second = fminf(fminf(second, cert.second[s * m + i]), from_ordered_bits(static_cast<std::uint32_t>(loser >> 32)));
    }
    const std::int64_t o = rows ? rows[i] : i;
    const bool none = key == ~0ull;
    const float best = none ? NAN : from_ordered_bits(static_cast<std::uint32_t>(key >> 32));
    if (cert.second) {
      // No key (every one-product distance NaN, e.g. centres beyond half's range): the exact kernel decides.
      const double x_error = cert.x_errors ? static_cast<double>(cert.x_errors[o]) : -1.0;
      const bool flag = none || !certified(terms_of(cert), static_cast<double>(x_sq_norms[o]), best, second, x_error);
      // One atomic per warp: a tenth of a million points can be listed, all on one counter.
      const unsigned active = __activemask(), flags = __ballot_sync(active, flag);
      if (flags) {
        const int lane = threadIdx.x & 31, leader = __ffs(flags) - 1;
        unsigned base = 0;
        if (lane == leader) base = atomicAdd(cert.flagged_count, static_cast<unsigned>(__popc(flags)));
        base = __shfl_sync(active, base, leader);
        const unsigned slot = base + __popc(flags & ((1u << lane) - 1));
        if (flag) {
          cert.flagged[slot] = static_cast<std::int32_t>(o);
          if (cert.flagged_key) {
            cert.flagged_key[slot] = key;
            cert.flagged_second[slot] = second;
          }
          if (cert.flagged_below)
            cert.flagged_below[slot] = collect_bound(terms_of(cert), x_sq_norms[o], best, x_error);
        }
      }
      if (flag) continue;
    }
    write_result(o, key, x_sq_norms, labels, sq_distances);
  }
}

/// Float points finish_kernel listed, certified again with their own ||x^ - x|| (about 0.4 of its bound
/// u_x ||x|| on random data) instead of the bound: those certified get their results, the others are
/// listed in `left` (*left_count, zero before) for the exact kernel, with their collect_bound in left_below
/// (optional). A warp takes 32 listed points, one after the other (its lanes along the row), and lists those
/// left with one atomic.
__global__ void recertify_kernel(const float* __restrict__ x, std::int64_t ldx, std::int64_t d,
                                 const float* __restrict__ x_sq_norms, const Certificate cert,
                                 std::int32_t* __restrict__ labels, float* __restrict__ sq_distances,
                                 std::int32_t* __restrict__ left, unsigned* __restrict__ left_count,
                                 float* __restrict__ left_below) {
  const int lane = threadIdx.x & 31;
  const std::int64_t listed = *cert.flagged_count;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t q0 = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * 32; q0 < listed;
       q0 += 32 * warps) {
    double mine = 0;  // lane i: ||x^ - x||^2 of point q0 + i
    for (int i = 0; i < 32 && q0 + i < listed; ++i) {
      const float* row = x + static_cast<std::int64_t>(cert.flagged[q0 + i]) * ldx;
      double error_sq = 0;  // each difference and its square exact in double
      for (std::int64_t p = lane; p < d; p += 32) {
        const float v = row[p];
        const double diff = double(v) - double(__uint_as_float(tf32_truncated_bits(__float_as_uint(v))));
        error_sq += diff * diff;
      }
      for (int off = 16; off > 0; off >>= 1) error_sq += __shfl_xor_sync(0xffffffffu, error_sq, off);
      if (lane == i) mine = error_sq;
    }
    const std::int64_t q = q0 + lane;
    bool left_over = false;
    float below = NAN;
    if (q < listed) {
      const std::int32_t o = cert.flagged[q];
      const unsigned long long key = cert.flagged_key[q];
      const float best = from_ordered_bits(static_cast<std::uint32_t>(key >> 32));
      // The double sum of d squares is within d 2^-53 of theirs: 2^-20 more covers that.
      const double x_error = __dsqrt_ru(mine) * (1 + 0x1p-20);
      const double x_sq = x_sq_norms[o];
      const bool ok = key != ~0ull && certified(terms_of(cert), x_sq, best, cert.flagged_second[q], x_error);
      if (ok) write_result(o, key, x_sq_norms, labels, sq_distances);
      else if (left_below && key != ~0ull) below = collect_bound(terms_of(cert), x_sq, best, x_error);
      left_over = !ok;
    }
    const unsigned lefts = __ballot_sync(0xffffffffu, left_over);
    unsigned base = 0;
    if (lane == 0 && lefts) base = atomicAdd(left_count, static_cast<unsigned>(__popc(lefts)));
    base = __shfl_sync(0xffffffffu, base, 0);
    if (left_over) {
      const unsigned slot = base + __popc(lefts & ((1u << lane) - 1));
      left[slot] = cert.flagged[q];
      if (left_below) left_below[slot] = below;
    }
  }
}

/// out row i = x row rows[i], as whole 16-byte copies (rows of both are multiples of 16 bytes), a warp a row.
__global__ void gather_rows_kernel(const uint4* __restrict__ x, std::int64_t ldx_copies, const std::int32_t* __restrict__ rows,
                                   std::int64_t m, std::int64_t copies, uint4* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; i < m; i += warps) {
    const uint4* from = x + rows[i] * ldx_copies;
    for (std::int64_t q = lane; q < copies; q += 32) out[i * copies + q] = from[q];
  }
}

template <class T>
__device__ __forceinline__ double widened(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return from_16bit(v);
}

/// One step of candidates_kernel's reduce-scatter: sums [0, kHalf) become this lane's and its partner's
/// (lane ^ 2 kHalf) sums of the half its lane bit 2 kHalf selects.
template <int kHalf>
__device__ __forceinline__ void keep_half(double (&part)[kCandidateSlots], int lane) {
  const bool upper = lane & (2 * kHalf);
#pragma unroll
  for (int q = 0; q < kHalf; ++q) {
    const double give = upper ? part[q] : part[q + kHalf], keep = upper ? part[q + kHalf] : part[q];
    part[q] = keep + __shfl_xor_sync(0xffffffffu, give, 2 * kHalf);
  }
}

/// The exact re-check of points with few candidates (a collecting pass, kCollect): a warp per point
/// rows[i], its lanes along the row, every candidate's x.c_j summed in double at once (every product exact,
/// the sum far within float's accuracy): the loads of all of a point's candidates are in flight together
/// instead of one candidate's after another's, and the partial sums meet in one reduce-scatter over the lanes
/// (16 shuffles for 16 candidates, not 5 each). The label and distance of the least ||c_j||^2 - 2 x.c_j,
/// rounded to float (ties: the lowest j; the candidates' order does not matter). A point with no candidate
/// (no best: NaN distances) or more than kCandidateSlots is listed in `left` (*left_count) for three products.
template <class T>
__global__ void candidates_kernel(const T* __restrict__ x, std::int64_t ldx, std::int64_t d,
                                  const float* __restrict__ c, std::int64_t ldc, const float* __restrict__ c_sq_norms,
                                  const float* __restrict__ x_sq_norms, const std::int32_t* __restrict__ rows,
                                  std::int64_t m, const std::int32_t* __restrict__ candidates,
                                  const unsigned* __restrict__ counts, std::int32_t* __restrict__ labels,
                                  float* __restrict__ sq_distances, std::int32_t* __restrict__ left,
                                  unsigned* __restrict__ left_count) {
  static_assert(kCandidateSlots == 16, "the reduce-scatter below halves 16 sums four times over 32 lanes");
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; i < m; i += warps) {
    const unsigned count = counts[i];
    const std::int64_t o = rows[i];
    if (count == 0 || count > kCandidateSlots) {
      if (lane == 0) left[atomicAdd(left_count, 1u)] = static_cast<std::int32_t>(o);
      continue;
    }
    std::int32_t j[kCandidateSlots];  // past count: unused (those slots were not written)
#pragma unroll
    for (int q = 0; q < kCandidateSlots; ++q) j[q] = q < count ? candidates[i * kCandidateSlots + q] : 0;
    const T* xr = x + o * ldx;
    double part[kCandidateSlots] = {};  // this lane's share of each candidate's x.c_j
    for (std::int64_t p = lane; p < d; p += 32) {
      const double xv = widened(xr[p]);
#pragma unroll
      for (int q = 0; q < kCandidateSlots; ++q)
        if (q < count) part[q] = fma(xv, static_cast<double>(c[static_cast<std::int64_t>(j[q]) * ldc + p]), part[q]);
    }
    // Reduce-scatter: each step a lane keeps half of its sums (the upper half where its lane bit is set)
    // and adds its partner's share of them; after four steps lane l holds candidate (l >> 1) & 15 summed
    // over 16 lanes, and its neighbour l ^ 1 the other 16.
    keep_half<8>(part, lane);
    keep_half<4>(part, lane);
    keep_half<2>(part, lane);
    keep_half<1>(part, lane);
    const double dot = part[0] + __shfl_xor_sync(0xffffffffu, part[0], 1);
    const unsigned q = (lane >> 1) & (kCandidateSlots - 1);
    unsigned long long best = ~0ull;
    if (q < count) {
      const std::int32_t jq = candidates[i * kCandidateSlots + q];  // (j[q] would be a dynamic index: local memory)
      const float v = static_cast<float>(static_cast<double>(c_sq_norms[jq]) - 2 * dot);
      best = (static_cast<unsigned long long>(ordered_bits(v)) << 32) | static_cast<std::uint32_t>(jq);
    }
    for (int off = 16; off > 0; off >>= 1) {
      const unsigned long long other = __shfl_xor_sync(0xffffffffu, best, off);
      best = other < best ? other : best;
    }
    if (lane == 0) write_result(o, best, x_sq_norms, labels, sq_distances);
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
  const int recheck_outputs = (a.rechecked_rows != nullptr) + (a.rechecked_row_sums != nullptr) +
                              (a.rechecked_count != nullptr);
  if (recheck_outputs != 0 && (recheck_outputs != 3 || !a.row_sums))
    return Support::no("nearest: rechecked_rows, rechecked_row_sums and rechecked_count go together, with row_sums");
  if (a.math == Math::exact && a.exact_method == ExactMethod::fast_then_recheck &&
      ((a.row_sums && recheck_outputs == 0) || a.n > INT32_MAX))
    return Support::no("nearest: ExactMethod::fast_then_recheck takes at most 2^31 - 1 points (n = " + to_string(a.n) +
                       ") and, with row_sums, the re-check's outputs (rechecked_rows, rechecked_row_sums, "
                       "rechecked_count)");
  if (a.x_half) {
    const std::int64_t ldh = a.ldx_half;
    if (a.x_type == Element::f16 || !a.x_half_sq_norms || !a.x_half_errors || ldh < a.d || ldh % 8 != 0 ||
        reinterpret_cast<std::uintptr_t>(a.x_half) % 16 != 0)
      return Support::no("nearest: a half copy (x_half) serves float or bfloat16 points, with its norms and errors, rows of "
                         "ldx_half >= d = " + to_string(a.d) + " values, a multiple of 8 (got " + to_string(ldh) +
                         "), 16-byte aligned");
  }
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

/// Scratch carved out of one allocation: first counted (base null), then taken in the same order.
struct Carve {
  unsigned char* base = nullptr;
  std::int64_t used = 0;
  template <class U>
  U* take(std::int64_t count) {
    U* at = base ? reinterpret_cast<U*>(base + used) : nullptr;
    used += round_up(count * static_cast<std::int64_t>(sizeof(U)), 256);
    return at;
  }
};

/// What layout(Carve&) takes, out of ctx's workspace: counted once, then taken.
template <class Layout>
auto carve_workspace(Context& ctx, const Layout& layout) {
  Carve size;
  layout(size);
  Carve scratch{static_cast<unsigned char*>(ctx.workspace(static_cast<std::size_t>(size.used)))};
  return layout(scratch);
}

/// The centres as one kernel instance reads them (centre_parts_kernel): parts, per-centre unscale factors
/// (16-bit exact) and ||c||^2 as rounded (one product per term).
template <class T>
struct CentreParts {
  T* parts = nullptr;
  std::int64_t ldi = 0, part_stride = 0;
  float* unscale = nullptr;
  float* rounded_sq_norms = nullptr;
};

template <class T, bool kExact>
CentreParts<T> take_parts(Carve& scratch, const NearestArguments& a) {
  using R = Ring<T, kExact>;
  CentreParts<T> c;
  c.ldi = round_up(a.d, R::elems);
  c.part_stride = round_up(a.k * c.ldi, 128);
  c.parts = scratch.take<T>(R::parts * c.part_stride);
  c.unscale = scratch.take<float>(a.k);
  c.rounded_sq_norms = scratch.take<float>(a.k);
  return c;
}

template <class T, bool kExact>
void prepare_parts(Context& ctx, const NearestArguments& a, const CentreParts<T>& c, unsigned* centre_bounds) {
  const unsigned blocks =
      static_cast<unsigned>(std::min<std::int64_t>(ceil_div(a.k, 8), 4LL * ctx.properties().multiProcessorCount));
  centre_parts_kernel<T, kExact><<<blocks, 256, 0, ctx.stream()>>>(
      a.c, a.ldc ? a.ldc : a.d, a.k, a.d, c.ldi, c.parts, c.part_stride, c.unscale, c.rounded_sq_norms, centre_bounds);
  SKINNY_CHECK_LAUNCH();
}

/// How m points' blocks share out the centre tiles (the shares of a point block next to each other in the
/// grid, so that they run side by side): centre_shares (nearest_rules.hpp), given `row_bytes` and
/// `centre_row_bytes` (the points' rows and a centre's parts as the kernel reads them; 0: the first rule
/// alone). SKINNY_NEAREST_L2_SHARES=0 turns its rule for long rows off (for comparisons).
struct Split {
  std::int64_t blocks_x = 0, shares = 0, tiles_per_share = 0;
};

Split split_for(std::int64_t m, std::int64_t k, int sms, std::int64_t row_bytes = 0,
                std::int64_t centre_row_bytes = 0) {
  const char* off = std::getenv("SKINNY_NEAREST_L2_SHARES");
  if (off && std::string(off) == "0") row_bytes = 0;
  Split s;
  s.blocks_x = ceil_div(m, BM);
  const std::int64_t tiles = ceil_div(k, BN);
  s.shares = centre_shares(m, tiles, sms, BM, BN, row_bytes, centre_row_bytes);
  s.tiles_per_share = ceil_div(tiles, s.shares);
  return s;
}

/// 1 when the module the driver loaded for this device was compiled for sm_90a (wgmma.cuh), else 0.
__global__ void wgmma_compiled_kernel(int* out) {
#ifdef SKINNY_WGMMA
  *out = 1;
#else
  *out = 0;
#endif
}

/// Whether the module loaded on `device` has the wgmma kernels: asked once per device.
bool wgmma_compiled(const Context& ctx) {
  static std::atomic<int> known[64];  // per device: 0 not asked yet, 1 no, 2 yes
  const int device = ctx.device();
  if (device < 0 || device >= 64) return false;
  int state = known[device].load();
  if (state == 0) {
    int* flag = nullptr;
    SKINNY_CUDA_TRY(cudaMalloc(&flag, sizeof(int)));
    wgmma_compiled_kernel<<<1, 1>>>(flag);
    int host = 0;
    const cudaError_t launched = cudaGetLastError();
    const cudaError_t copied = cudaMemcpy(&host, flag, sizeof host, cudaMemcpyDeviceToHost);
    cudaFree(flag);
    SKINNY_CUDA_TRY(launched);
    SKINNY_CUDA_TRY(copied);
    state = host == 1 ? 2 : 1;
    known[device].store(state);
  }
  return state == 2;
}

/// The driver's cuTensorMapEncodeTiled, fetched once through the runtime.
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
EncodeTiled encode_tiled() {
  static const EncodeTiled encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    SKINNY_CUDA_TRY(
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr)
      throw std::runtime_error("gemm::nearest: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<EncodeTiled>(fn);
  }();
  return encode;
}

/// The rows x d matrix at `base` (row stride ld elements) as a TMA tensor of the ring's stage boxes: one
/// stage's elements of box_rows rows (128, or the 32 or 64 centres of a ring of few centres), written
/// 128-byte swizzled, zeros past the matrix.
template <class T>
CUtensorMap stage_map(const void* base, std::int64_t d, std::int64_t rows, std::int64_t ld, int box_rows = 128) {
  using R = Ring<T, false>;
  const CUtensorMapDataType type = std::is_same_v<T, float>    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                               : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * sizeof(T)};
  const cuuint32_t box[2] = {R::bk, static_cast<cuuint32_t>(box_rows)}, element_strides[2] = {1, 1};
  static_assert(BM == 128 && BN == 128 && R::bk * sizeof(T) == 128, "a box is a stage: 128 rows of 128 bytes");
  CUtensorMap map;
  const CUresult r = encode_tiled()(&map, type, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("gemm::nearest: cuTensorMapEncodeTiled failed (error " + std::to_string(int(r)) +
                             ") for " + std::to_string(rows) + " x " + std::to_string(d) + ", ld " +
                             std::to_string(ld));
  return map;
}

/// A collecting pass's per-point bounds and outputs (Params::collect_below, candidates, candidate_counts).
struct Collect {
  const float* below = nullptr;
  std::int32_t* candidates = nullptr;
  unsigned* counts = nullptr;
};

/// The fused kernel on m points x (leading dimension ldx) against the prepared centres; keys (and with
/// kSecond, second) get split.shares x m values, row_sums (kRowSums, zeroed) m sums. The fault comes from a.
/// One product per term takes wgmma where nearest_uses_wgmma says so. kCollect: a collecting pass (one
/// product per term on the TMA's wide ring only: collects()) writes `collect`'s outputs, no keys.
template <class T, bool kExact, bool kRowSums, bool kFault, bool kSecond, bool kCollect = false>
void launch_kernel(Context& ctx, const NearestArguments& a, const void* x, std::int64_t ldx, std::int64_t m,
                   const CentreParts<T>& c, const float* cn, const Split& split, unsigned long long* keys,
                   float* second, double* row_sums = nullptr, bool direct = false, const Collect& collect = {}) {
  static_assert(!kCollect || (!kExact && !kRowSums && !kFault && !kSecond), "a collecting pass takes one product");
  using R = Ring<T, kExact>;
  Params p{x, ldx, m, a.d, c.parts, c.part_stride, c.unscale, c.ldi, a.k, cn, keys, second,
           direct ? a.labels : nullptr, direct ? a.sq_distances : nullptr, a.x_sq_norms,
           static_cast<int>(split.tiles_per_share), static_cast<int>(split.shares), kRowSums ? row_sums : nullptr,
           kFault ? a.fault_row : -1,
           a.fault_col, a.fault_bit, a.fault_values, collect.below, collect.candidates, collect.counts};
  // wgmma takes one product per term, and the three exact ones unless row sums are asked for: they sum by
  // truncation over all of d, a bias the protection's per-point check of exact terms does not model
  // (kmeans/src/protect.hpp). 16-bit exact products (64-byte ring rows) come by cp.async stages. The TMA's
  // coordinates are 32-bit: more rows than that take mma.sync.
  constexpr bool kWgmma = !kExact || !kRowSums;
  constexpr bool kTmaRing = kWgmma && R::ch == 8;  // 16-bit exact products: 64-byte rows, cp.async stages
  const bool wgmma = kWgmma && nearest_uses_wgmma(ctx) && m <= INT_MAX - BM && a.k <= INT_MAX - BN;
  // Narrow rows with up to kNarrowCpAsyncMaxK centres take cp.async stages, in a kernel of their own (as a
  // runtime switch it cost the TMA path 3 %, d = 16, k = 1024).
  const bool narrow = a.d * static_cast<std::int64_t>(sizeof(T)) < kTmaMinRowBytes && a.k <= kNarrowCpAsyncMaxK;
  const bool tma = kTmaRing && wgmma && !narrow;
  // Few centres: a ring of short stages (the checked instances keep the wide one: fewer kernels to build).
  // The rings of few centres are instantiated only where they can run.
  constexpr bool kFewRings = kTmaRing && !kRowSums && !kFault;
  constexpr int kFew = kFewRings ? kFewCentres : BN, kSome = kFewRings ? kSomeCentres : BN;
  const int centre_rows = !(kFewRings && tma) ? BN : a.k <= kFew ? kFew : a.k <= kSome ? kSome : BN;
  if (tma) {
    p.x_map = stage_map<T>(x, a.d, m, ldx);
    p.c_map = stage_map<T>(c.parts, a.d, a.k, c.ldi, centre_rows);
    if (R::parts == 2) p.c_lo_map = stage_map<T>(c.parts + c.part_stride, a.d, a.k, c.ldi, centre_rows);
  }
  using Few = Ring<T, kExact, kFew>;
  using Some = Ring<T, kExact, kSome>;
  auto kernel =
      centre_rows == kFewCentres    ? nearest_kernel<T, kExact, kRowSums, kFault, kSecond, kWgmma, kTmaRing, kFew>
      : centre_rows == kSomeCentres ? nearest_kernel<T, kExact, kRowSums, kFault, kSecond, kWgmma, kTmaRing, kSome>
      : tma                         ? nearest_kernel<T, kExact, kRowSums, kFault, kSecond, kWgmma, kTmaRing>
      : wgmma                       ? nearest_kernel<T, kExact, kRowSums, kFault, kSecond, kWgmma, false>
                                    : nearest_kernel<T, kExact, kRowSums, kFault, kSecond, false, false>;
  if constexpr (kCollect) {
    if (!tma || centre_rows != BN)
      throw std::logic_error("gemm::nearest: a collecting pass runs on the TMA's wide ring");
    kernel = nearest_kernel<T, kExact, kRowSums, kFault, kSecond, kWgmma, kTmaRing, BN, true>;
  }
  const std::size_t smem = centre_rows == kFewCentres    ? Few::smem_wgmma
                           : centre_rows == kSomeCentres ? Some::smem_wgmma
                           : wgmma                       ? R::smem_wgmma
                                                         : R::smem;
  SKINNY_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<static_cast<unsigned>(split.blocks_x * split.shares), kThreads, smem, ctx.stream()>>>(p);
  SKINNY_CHECK_LAUNCH();
}

/// launch_kernel of the instance the outputs ask for: row_sums (m values, zeroed here; null: none) and,
/// with them and `fault`, a's fault injected.
template <class T, bool kExact, bool kSecond>
void launch_with_outputs(Context& ctx, const NearestArguments& a, const void* x, std::int64_t ldx, std::int64_t m,
                         const CentreParts<T>& c, const float* cn, const Split& split, unsigned long long* keys,
                         float* second, double* row_sums, bool fault, bool direct = false) {
  if (!row_sums) {
    launch_kernel<T, kExact, false, false, kSecond>(ctx, a, x, ldx, m, c, cn, split, keys, second, nullptr, direct);
    return;
  }
  SKINNY_CUDA_TRY(cudaMemsetAsync(row_sums, 0, static_cast<std::size_t>(m) * sizeof(double), ctx.stream()));
  if (fault)
    launch_kernel<T, kExact, true, true, kSecond>(ctx, a, x, ldx, m, c, cn, split, keys, second, row_sums, direct);
  else
    launch_kernel<T, kExact, true, false, kSecond>(ctx, a, x, ldx, m, c, cn, split, keys, second, row_sums, direct);
}

void finish(Context& ctx, const unsigned long long* keys, std::int64_t shares, std::int64_t m, const std::int32_t* rows,
            const NearestArguments& a, const Certificate& cert = {}) {
  const unsigned blocks =
      static_cast<unsigned>(std::min<std::int64_t>(ceil_div(m, 256), 8LL * ctx.properties().multiProcessorCount));
  finish_kernel<<<blocks, 256, 0, ctx.stream()>>>(keys, static_cast<int>(shares), m, rows, a.x_sq_norms, a.labels,
                                                  a.sq_distances, cert);
  SKINNY_CHECK_LAUNCH();
}

/// From this many clusters on, float points the bound leaves are certified again with their own ||x^ - x||
/// (recertify_kernel): it pays where a point's exact re-check costs many reads of its row. H200, 2^20
/// points, ms per iteration with / without it (bench/results/h200/2026-11-28_exact-wgmma): blobs like the
/// K-means benchmark's (256 in [-1, 1]^128, sigma 0.1) k = 8192 15.0-15.2 / 19.8-20.1, k = 1024 2.86-2.90 /
/// 3.41-3.42, k = 128 0.64-0.65 / 0.59-0.61; the app's blobs (d = 128) k = 1024 1.67-1.71 / 1.73-1.76.
constexpr std::int64_t kRecertifyMinClusters = 1024;

/// Points re-checked per launch of the exact kernel or a collecting pass (the gathered rows' buffer).
constexpr std::int64_t kRecheckBatch = 1 << 16;

/// Above this share of re-checked points, one product plus the re-check costs more than three products
/// (H100: one product takes 0.48-0.55 of three's time, and the gathered points run a little less
/// efficiently). On tight clusters far apart, under Lloyd from random starts, the share reaches 0.5-0.8
/// at d = 128 (bench/results/h100/2026-11-27_exact-recheck). Compared with Context::NearestRecheck's
/// cost_share, where a point settled by its candidates counts as candidate_weight of a point run with three
/// products.
constexpr double kRecheckShareMax = 0.35;
/// After giving up on a shape, automatic tries the re-check again every this many calls: Lloyd's first
/// iterations from random starts leave the most points uncertified, and the share falls as it settles
/// (16 kept a 15-iteration fit at 2^20 x 4096, k = 128, float on three products: 22.7 ms per iteration
/// against 13.2 with the re-check throughout). A try that does not pay costs at most about a third of an
/// exact call.
constexpr int kRecheckRetryCalls = 4;

bool rechecks(Context& ctx, const NearestArguments& a) {
  if (a.math != Math::exact || a.n > INT32_MAX) return false;  // the re-check lists 32-bit rows
  if (a.row_sums && !a.rechecked_rows) return false;
  if (a.exact_method != ExactMethod::automatic) return a.exact_method == ExactMethod::fast_then_recheck;
  if (const char* forced = std::getenv("SKINNY_NEAREST_EXACT")) {
    if (std::string(forced) == "three_products") return false;
    if (std::string(forced) == "fast_then_recheck") return true;
  }
  if (!recheck_pays(a, nearest_uses_wgmma(ctx))) return false;
  Context::NearestRecheck& seen = ctx.nearest_recheck();
  const int type = static_cast<int>(a.x_type);
  if (seen.n != a.n || seen.d != a.d || seen.k != a.k || seen.x_type != type) {
    seen = Context::NearestRecheck{a.n, a.d, a.k, type, 0.0, 0.0, 0.0, 0};
    return true;
  }
  if (seen.cost_share <= kRecheckShareMax || seen.calls_since_tried + 1 >= kRecheckRetryCalls) return true;
  ++seen.calls_since_tried;
  return false;
}

/// The kernel alone: Math::fast, or exact by three products (with row sums and a fault when asked).
template <class T, bool kExact>
void nearest_direct(Context& ctx, const NearestArguments& a) {
  const std::int64_t ldx = a.ldx ? a.ldx : a.d;
  const std::int64_t row_bytes = a.d * static_cast<std::int64_t>(sizeof(T));
  const Split split = split_for(a.n, a.k, ctx.properties().multiProcessorCount, row_bytes,
                                Ring<T, kExact>::parts * row_bytes);
  const auto layout = [&](Carve& scratch) {
    auto* keys = scratch.take<unsigned long long>(split.shares * a.n);
    return std::make_pair(keys, take_parts<T, kExact>(scratch, a));
  };
  const auto [keys, parts] = carve_workspace(ctx, layout);
  prepare_parts<T, kExact>(ctx, a, parts, nullptr);
  // One product per term compares distances to the centres as rounded (centre_parts_kernel).
  const float* cn = kExact ? a.c_sq_norms : parts.rounded_sq_norms;
  // One share: the kernel writes the labels and distances itself (finish_kernel read and wrote them again:
  // 8 us at 1M points).
  const bool direct = split.shares == 1;
  launch_with_outputs<T, kExact, false>(ctx, a, a.x, ldx, a.n, parts, cn, split, keys, nullptr, a.row_sums,
                                        a.fault_row >= 0, direct);
  if (!direct) finish(ctx, keys, split.shares, a.n, nullptr, a);
  if (a.rechecked_count) *a.rechecked_count = 0;
  if (a.row_sums_one_product) *a.row_sums_one_product = !kExact;
}

/// The first pass of a re-check of T points whose one product takes F points (candidate_weight): a half
/// copy of bfloat16 points re-checks them with 16-bit products, as 16-bit points' own first pass does.
template <class T, class F>
constexpr FirstPass first_pass_of() {
  if constexpr (std::is_same_v<T, float> && !std::is_same_v<F, float>) return FirstPass::half_copy;
  return std::is_same_v<F, float> ? FirstPass::tf32 : FirstPass::sixteen_bit;
}

/// Whether the points the certificate leaves are re-checked on their candidates first (a collecting pass of
/// one product per term, then candidates_kernel), three products only for those with too many: where the
/// first pass's points (first_row_bytes a row) take the TMA's wide ring (Hopper, k > kSomeCentres, rows
/// the TMA copies), no row sums are asked for (their re-check adds every term) and candidate_weight says it
/// pays. SKINNY_NEAREST_CANDIDATES=1 or 0 turns it on wherever it can run, or off.
template <class T, class F>
bool collects(Context& ctx, const NearestArguments& a, std::int64_t first_row_bytes) {
  const char* env = std::getenv("SKINNY_NEAREST_CANDIDATES");
  const std::string set = env ? env : "";
  if (set == "0") return false;
  if (set != "1" && candidate_weight(first_pass_of<T, F>(), a.k) >= 1) return false;
  const bool narrow = first_row_bytes < kTmaMinRowBytes && a.k <= kNarrowCpAsyncMaxK;
  return !a.row_sums && nearest_uses_wgmma(ctx) && a.k > kSomeCentres && a.k <= INT_MAX - BN && !narrow;
}

/// Math::exact by ExactMethod::fast_then_recheck: the one-product kernel with each point's second best, a
/// certificate per point (finish_kernel), and for the points it leaves either (collects) a collecting pass
/// and the exact products of their candidates, or the exact kernel, gathered in batches; the exact kernel
/// also takes the points with too many candidates. Waits for the stream once for the number of points left,
/// and once more after a collecting pass. With row_sums: the first pass adds its one-product terms (and
/// takes the fault), the re-check the float-accurate terms of the points it lists.
/// F: the first pass's points, T's own or (float or bfloat16 points, F = __half) their half copy a.x_half,
/// certified with each point's own distance to it.
template <class T, class F = T>
void nearest_rechecked(Context& ctx, const NearestArguments& a) {
  constexpr bool kHalfCopy = !std::is_same_v<T, F>;
  static_assert(!kHalfCopy || (!std::is_same_v<T, __half> && std::is_same_v<F, __half>),
                "a half copy of float or bfloat16 points");
  const std::int64_t ldx = a.ldx ? a.ldx : a.d;
  const int sms = ctx.properties().multiProcessorCount;
  const std::int64_t first_row_bytes = a.d * static_cast<std::int64_t>(sizeof(F));  // one product: one part
  const Split split = split_for(a.n, a.k, sms, first_row_bytes, first_row_bytes);
  const std::int64_t batch = std::min(a.n, kRecheckBatch);
  const std::int64_t row_copies = ceil_div(a.d * static_cast<std::int64_t>(sizeof(T)), 16);
  const bool collect = collects<T, F>(ctx, a, first_row_bytes);
  struct Scratch {
    unsigned long long* keys;
    float* second;
    CentreParts<F> fast;
    CentreParts<T> exact;
    std::int32_t* flagged;
    std::int32_t* listed;  ///< float: the points finish_kernel lists, recertify_kernel takes
    unsigned long long* listed_key;
    float* listed_second;
    float* below;  ///< collect: per flagged point, its collect_bound
    std::int32_t* left;  ///< collect: the points left to three products
    std::int32_t* candidates;
    unsigned* candidate_counts;
    unsigned* counters;  ///< [0] points to re-check, [1] [2] the centres' bounds (float bits), [3] listed, [4] left
    uint4* batch_rows;
    unsigned long long* batch_keys;
  };
  const auto layout = [&](Carve& scratch) {
    Scratch s;
    s.keys = scratch.take<unsigned long long>(split.shares * a.n);
    s.second = scratch.take<float>(split.shares * a.n);
    s.fast = take_parts<F, false>(scratch, a);
    s.exact = take_parts<T, true>(scratch, a);
    s.flagged = a.rechecked_rows ? a.rechecked_rows : scratch.take<std::int32_t>(a.n);  // rechecked_rows when given
    // (a half copy's points are certified with their own distance to it from the start)
    const bool recertify = std::is_same_v<F, float> && a.k >= kRecertifyMinClusters;
    s.listed = recertify ? scratch.take<std::int32_t>(a.n) : nullptr;
    s.listed_key = recertify ? scratch.take<unsigned long long>(a.n) : nullptr;
    s.listed_second = recertify ? scratch.take<float>(a.n) : nullptr;
    s.below = collect ? scratch.take<float>(a.n) : nullptr;
    s.left = collect ? scratch.take<std::int32_t>(a.n) : nullptr;
    s.candidates = collect ? scratch.take<std::int32_t>(batch * kCandidateSlots) : nullptr;
    s.candidate_counts = collect ? scratch.take<unsigned>(batch) : nullptr;
    s.counters = scratch.take<unsigned>(5);
    s.batch_rows = scratch.take<uint4>(batch * row_copies);
    // A batch of m points keeps split_for(m).shares x m keys <= (4 sms + blocks of m) x BM.
    s.batch_keys = scratch.take<unsigned long long>((4LL * sms + ceil_div(batch, BM)) * BM);
    return s;
  };
  const Scratch s = carve_workspace(ctx, layout);
  const cudaStream_t stream = ctx.stream();

  SKINNY_CUDA_TRY(cudaMemsetAsync(s.counters, 0, 5 * sizeof(unsigned), stream));
  prepare_parts<F, false>(ctx, a, s.fast, s.counters + 1);
  // The first pass's points and norms: a half copy's distances are those of the points it holds.
  NearestArguments first = a;
  if constexpr (kHalfCopy) {
    first.x = a.x_half;
    first.ldx = a.ldx_half;
    first.x_sq_norms = a.x_half_sq_norms;
  }
  const std::int64_t first_ldx = first.ldx ? first.ldx : a.d;
  launch_with_outputs<F, false, true>(ctx, first, first.x, first_ldx, a.n, s.fast, s.fast.rounded_sq_norms, split,
                                      s.keys, s.second, a.row_sums, a.fault_row >= 0);
  if (a.row_sums_one_product) *a.row_sums_one_product = true;
  Certificate cert;
  cert.second = s.second;
  const Element first_type = std::is_same_v<F, float>    ? Element::f32
                             : std::is_same_v<F, __half> ? Element::f16
                                                         : Element::bf16;
  cert.bound = certificate_bound(first_type, a.d);
  if constexpr (kHalfCopy) cert.x_errors = a.x_half_errors;
  cert.sqrt_d = std::sqrt(static_cast<double>(a.d));
  cert.centre_bounds = s.counters + 1;
  // Float points: those the bound leaves are certified again with their own ||x^ - x|| (16-bit points are
  // exact as the tensor cores take them: the bound has no x term).
  cert.flagged = s.listed ? s.listed : s.flagged;
  cert.flagged_count = s.listed ? s.counters + 3 : s.counters;
  cert.flagged_key = s.listed_key;
  cert.flagged_second = s.listed_second;
  cert.flagged_below = s.listed ? nullptr : s.below;
  finish(ctx, s.keys, split.shares, a.n, nullptr, first, cert);
  if (s.listed) {
    recertify_kernel<<<static_cast<unsigned>(4 * sms), 256, 0, stream>>>(static_cast<const float*>(a.x), ldx, a.d,
                                                                        a.x_sq_norms, cert, a.labels, a.sq_distances,
                                                                        s.flagged, s.counters, s.below);
    SKINNY_CHECK_LAUNCH();
  }

  unsigned flagged = 0;
  SKINNY_CUDA_TRY(cudaMemcpyAsync(&flagged, s.counters, sizeof flagged, cudaMemcpyDeviceToHost, stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  // The points for three products: those flagged, or those a collecting pass could not settle.
  const std::int32_t* rows = s.flagged;
  unsigned left = flagged;
  if (collect && flagged > 0) {
    const std::int64_t first_copies = ceil_div(first_row_bytes, 16);
    for (std::int64_t b0 = 0; b0 < flagged; b0 += batch) {
      const std::int64_t m = std::min<std::int64_t>(batch, flagged - b0);
      const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(m, 8), 8LL * sms));
      gather_rows_kernel<<<blocks, 256, 0, stream>>>(static_cast<const uint4*>(first.x),
                                                     first_ldx * static_cast<std::int64_t>(sizeof(F)) / 16,
                                                     s.flagged + b0, m, first_copies, s.batch_rows);
      SKINNY_CHECK_LAUNCH();
      SKINNY_CUDA_TRY(cudaMemsetAsync(s.candidate_counts, 0, static_cast<std::size_t>(m) * sizeof(unsigned), stream));
      const std::int64_t batch_ld = first_copies * 16 / static_cast<std::int64_t>(sizeof(F));
      launch_kernel<F, false, false, false, false, true>(
          ctx, first, s.batch_rows, batch_ld, m, s.fast, s.fast.rounded_sq_norms,
          split_for(m, a.k, sms, first_row_bytes, first_row_bytes), nullptr, nullptr, nullptr, false,
          Collect{s.below + b0, s.candidates, s.candidate_counts});
      candidates_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<const T*>(a.x), ldx, a.d, a.c, a.ldc ? a.ldc : a.d,
                                                       a.c_sq_norms, a.x_sq_norms, s.flagged + b0, m, s.candidates,
                                                       s.candidate_counts, a.labels, a.sq_distances, s.left,
                                                       s.counters + 4);
      SKINNY_CHECK_LAUNCH();
    }
    SKINNY_CUDA_TRY(cudaMemcpyAsync(&left, s.counters + 4, sizeof left, cudaMemcpyDeviceToHost, stream));
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
    rows = s.left;
  }
  // What the re-check cost, as a share of points run again with three products (candidate_weight).
  const double weight = candidate_weight(first_pass_of<T, F>(), a.k);
  const double rechecked = static_cast<double>(left) / static_cast<double>(a.n);
  const double by_candidates = collect ? static_cast<double>(flagged - left) / static_cast<double>(a.n) : 0.0;
  const double collected = collect ? static_cast<double>(flagged) / static_cast<double>(a.n) : 0.0;
  ctx.nearest_recheck() = Context::NearestRecheck{a.n,        a.d,           a.k, static_cast<int>(a.x_type),
                                                  rechecked, by_candidates, rechecked + weight * collected, 0};
  if (a.rechecked_count) *a.rechecked_count = left;
  if (left == 0) return;
  prepare_parts<T, true>(ctx, a, s.exact, nullptr);
  for (std::int64_t b0 = 0; b0 < left; b0 += batch) {
    const std::int64_t m = std::min<std::int64_t>(batch, left - b0);
    const unsigned gather_blocks = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(m, 8), 8LL * sms));
    gather_rows_kernel<<<gather_blocks, 256, 0, stream>>>(static_cast<const uint4*>(a.x),
                                                          ldx * static_cast<std::int64_t>(sizeof(T)) / 16,
                                                          rows + b0, m, row_copies, s.batch_rows);
    SKINNY_CHECK_LAUNCH();
    const Split batch_split = split_for(m, a.k, sms);
    const std::int64_t batch_ld = row_copies * 16 / static_cast<std::int64_t>(sizeof(T));
    // The fault, if any, belongs to the first pass.
    launch_with_outputs<T, true, false>(ctx, a, s.batch_rows, batch_ld, m, s.exact, a.c_sq_norms, batch_split,
                                        s.batch_keys, nullptr,
                                        a.rechecked_row_sums ? a.rechecked_row_sums + b0 : nullptr, false);
    finish(ctx, s.batch_keys, batch_split.shares, m, rows + b0, a);
  }
}

template <class T>
void nearest_of(Context& ctx, const NearestArguments& a) {
  if (rechecks(ctx, a)) {
    if constexpr (!std::is_same_v<T, __half>) {
      if (a.x_half && !a.row_sums) {
        nearest_rechecked<T, __half>(ctx, a);
        return;
      }
    }
    nearest_rechecked<T>(ctx, a);
  }
  else if (a.math == Math::exact) nearest_direct<T, true>(ctx, a);
  else nearest_direct<T, false>(ctx, a);
}

}  // namespace
}  // namespace detail

bool nearest_may_recheck(const Context& ctx, const NearestArguments& a) {
  return a.math == Math::exact && detail::recheck_pays(a, nearest_uses_wgmma(ctx));
}

bool nearest_uses_wgmma(const Context& ctx) {
  if (const char* off = std::getenv("SKINNY_NEAREST_WGMMA"); off && std::string(off) == "0") return false;
  return ctx.properties().major == 9 && ctx.properties().minor == 0 && detail::wgmma_compiled(ctx);
}

void nearest(Context& ctx, const NearestArguments& a) {
  if (const Support s = nearest_can_implement(ctx, a); !s) throw std::invalid_argument(s.reason);
  switch (a.x_type) {
    case Element::f32: detail::nearest_of<float>(ctx, a); break;
    case Element::f16: detail::nearest_of<__half>(ctx, a); break;
    case Element::bf16: detail::nearest_of<__nv_bfloat16>(ctx, a); break;
  }
}

}  // namespace skinny::gemm
