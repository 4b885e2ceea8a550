// k-means|| initialisation (scalable k-means++, Bahmani et al. 2012): a few rounds of independent D^2
// sampling over all points, each round one pass over X; the candidates weighted by the points nearest to
// each; those reduced to k. Deterministic from the seed: counter-based draws, candidates gathered in
// index order, sums in fixed orders, integer counts.
#include "detail.hpp"
#include "init.hpp"
#include "half_rows.hpp"
#include "init_parallel_rules.hpp"

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/gemm.hpp>
#include <skinny/gemm/nearest.hpp>
#include <skinny/gemm/splitmix64.hpp>

#include <cooperative_groups.h>
#include <thrust/copy.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <type_traits>

namespace skinny::kmeans::detail {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;

unsigned grid_for(std::int64_t count) {
  return static_cast<unsigned>(std::clamp<std::int64_t>((count + kThreads - 1) / kThreads, 1, 4096));
}

// ------------------------------------------------------------------------------------------- sampling

/// dst row j = src row rows[j] (d values each).
template <class T>
__global__ void gather_rows_kernel(const T* __restrict__ src, std::int64_t d, const std::int64_t* __restrict__ rows,
                                   std::int64_t count, T* __restrict__ dst) {
  const std::int64_t total = count * d;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dst[e] = src[rows[e / d] * d + e % d];
}

template <class T>
void gather_rows(const T* src, std::int64_t d, const std::int64_t* rows, std::int64_t count, T* dst,
                 cudaStream_t stream) {
  if (count == 0) return;
  gather_rows_kernel<<<grid_for(count * d), kThreads, 0, stream>>>(src, d, rows, count, dst);
  SKINNY_CHECK_LAUNCH();
}

__global__ void mark_kernel(const std::int64_t* __restrict__ idx, std::int64_t count, unsigned char* __restrict__ flags) {
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    flags[idx[j]] = 1;
}

/// Where this round's candidates are nearer than all earlier ones (strictly: ties keep the earlier
/// candidate, the lower index), d2 and the nearest candidate follow; `first` overwrites.
template <class T>
__global__ void merge_nearest_kernel(const std::int32_t* __restrict__ new_label, const T* __restrict__ new_dist,
                                     std::int64_t n, std::int64_t offset, bool first, T* __restrict__ d2,
                                     std::int32_t* __restrict__ label) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    if (first || new_dist[i] < d2[i]) {
      d2[i] = new_dist[i];
      label[i] = static_cast<std::int32_t>(offset + new_label[i]);
    }
}

/// The points as the sampling rounds' distances read them, in one product a term (Math::fast: D^2
/// sampling needs the distances' sizes, not their last bits). gemm::nearest reads rows of whole 16-byte
/// copies, and its fused kernel takes a fraction of the time of a distance GEMM and an argmin over an
/// n x m matrix (1M points, d = 7, k = 1024, H200: 6.8 against 45 ms for the five rounds). In order of
/// preference:
/// - a half copy of float X (half_rows.hpp): the caller's (fast mode's Lloyd iterations read one too), or
///   one made here where its range and free memory allow;
/// - X itself in TF32, where its rows are whole copies (d a multiple of 4);
/// - a float copy of X with rows padded to 4 floats (their norms are X's), in TF32, where it fits in the
///   library's free memory (available_device_memory).
/// With none, the rounds take the distance GEMM and the argmin. Rows of a few values (`narrow`, float or
/// double) need none of them: narrow_nearest reads X.
struct SamplingRows {
  bool narrow = false;
  HalfRows own_half;
  const HalfRows* given_half = nullptr;
  DeviceBuffer<float> padded;
  std::int64_t ld = 0;  ///< the padded copy's row length
  /// The half copy the rounds read, or null.
  const HalfRows* half() const { return given_half != nullptr ? given_half : own_half.empty() ? nullptr : &own_half; }
};

SamplingRows sampling_rows(const float* x, std::int64_t n, std::int64_t d, const HalfRows* given,
                           cudaStream_t stream) {
  SamplingRows rows;
  if (given != nullptr && !given->empty()) {
    rows.given_half = given;
    return rows;
  }
  rows.own_half = half_rows(x, n, d, stream);
  if (!rows.own_half.empty()) return rows;
  const std::int64_t ldf = nearest_row<float>(d);
  if (ldf != d && static_cast<std::size_t>(n * ldf) * sizeof(float) <= available_device_memory()) {
    rows.padded = padded_rows(x, n, d, ldf, stream);
    rows.ld = ldf;
  }
  return rows;
}

/// For every point, the nearest of the m centres c (m x d) and its squared distance. Narrow rows
/// (`rows.narrow`) through narrow_nearest for any count of centres, in the form narrow_form gives fast mode.
/// Float through
/// gemm::nearest where it can run (compute capability >= 8.0): the cross term on the tensor cores fused
/// with the argmin, in one product (Math::fast), on the copy in `rows` where there is one (else X): D^2
/// sampling needs the distances' sizes, not their last bits, and a point that nearly ties two
/// candidates may weigh either. Otherwise, and for double, the cross terms through gemm::gemm in row
/// chunks and the Lloyd loop's argmin (ties: the lowest index either way).
template <class T>
void nearest_centres(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const T* xnorm, const T* c,
                     std::int64_t m, const T* cnorm, const SamplingRows& rows, std::int32_t* labels, T* dist) {
  const cudaStream_t stream = ctx.stream();
  if (rows.narrow) {
    narrow_nearest(x, n, d, c, m, narrow_form(gemm::Math::fast, d), labels, dist, stream);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    gemm::NearestArguments a;
    a.x = x;
    a.n = n;
    a.d = d;
    a.c = c;
    a.k = m;
    a.x_sq_norms = xnorm;
    a.c_sq_norms = cnorm;
    a.labels = labels;
    a.sq_distances = dist;
    a.math = gemm::Math::fast;
    if (const HalfRows* half = rows.half(); half != nullptr) {
      a.x = half->rows.data();
      a.x_type = gemm::Element::f16;
      a.ldx = half->ld;
      a.x_sq_norms = half->sq_norms.data();
    } else if (rows.padded.size() > 0) {
      a.x = rows.padded.data();
      a.ldx = rows.ld;
    }
    if (gemm::nearest_can_implement(ctx, a)) {
      gemm::nearest(ctx, a);
      return;
    }
  }
  const std::int64_t chunk = chunk_rows(n, m, sizeof(T));
  DeviceBuffer<T> g(static_cast<std::size_t>(chunk * m));
  DeviceBuffer<int> counts(static_cast<std::size_t>(m));  // argmin counts too; not needed here
  SKINNY_CUDA_TRY(cudaMemsetAsync(counts.data(), 0, counts.bytes(), stream));
  for (std::int64_t r0 = 0; r0 < n; r0 += chunk) {
    const std::int64_t h = std::min(chunk, n - r0);
    gemm::gemm(ctx, {gemm::row_major<const T>(x + r0 * d, h, d), gemm::col_major<const T>(c, d, m),
                     gemm::row_major(g.data(), h, m)});
    argmin(g.data(), h, m, xnorm + r0, cnorm, labels + r0, dist + r0, counts.data(), stream);
  }
}

/// Grows `buf` to hold at least `need` elements (doubling), keeping its first `used`.
template <class T>
void reserve(DeviceBuffer<T>& buf, std::size_t used, std::size_t need, cudaStream_t stream) {
  if (need <= buf.size()) return;
  DeviceBuffer<T> bigger(std::max(need, 2 * buf.size()));
  if (used > 0)
    SKINNY_CUDA_TRY(cudaMemcpyAsync(bigger.data(), buf.data(), used * sizeof(T), cudaMemcpyDeviceToDevice, stream));
  buf = std::move(bigger);  // cudaFree of the old one waits for the copy
}

// ----------------------------------------------------------------- greedy weighted k-means++ (reduction)

/// The candidates in ranges of kRange (a warp's lanes), the ranges in groups of kGroup: a draw finds its
/// group, then its range, then its candidate, and every sum is formed in the same order whatever the
/// device.
constexpr int kRange = 32;
constexpr int kGroup = 32;
struct Ranges {
  std::int64_t m = 0, count = 0, groups = 0;
  explicit Ranges(std::int64_t candidates)
      : m(candidates), count((candidates + kRange - 1) / kRange), groups((count + kGroup - 1) / kGroup) {}
};

/// Where a launch of the reduction leaves off and the next picks up (block 0 writes it at a launch's end;
/// every block of the next launch reads it): the last step's winning trial and the next step's picks.
struct StepState {
  int winner;
  std::int64_t picks[kMaxTrials];
};

/// One step's results (two, used in turn: a step reads the previous step's winner from them).
struct StepBuffers {
  double* dtrial;      ///< trials x m: min(D2_j, ||c_j - c_pick||^2) for each trial's pick
  double* pot_part;    ///< trials x count: the sums of w_j dtrial over each range
  double* group_sums;  ///< trials x groups: the sums of each group's range sums
};

/// Sum over the warp in a fixed tree; every lane gets it.
__device__ double warp_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}

/// The whole warp: the sum of group g's range sums (`part`: one trial's), in warp_sum's fixed tree.
__device__ double group_sum(const double* part, Ranges r, std::int64_t g, int lane) {
  const std::int64_t range = g * kGroup + lane;
  return warp_sum(range < r.count ? __ldcg(part + range) : 0.0);
}

/// Inclusive prefix sum over the warp in a fixed order.
__device__ double warp_scan(double v, int lane) {
  for (int off = 1; off < 32; off <<= 1) {
    const double o = __shfl_up_sync(kFullMask, v, off);
    if (lane >= off) v += o;
  }
  return v;
}

/// The whole warp: the first j in [begin, end) whose value > 0 takes the running sum of the values past
/// t, and t becomes what is left of it within that value. When the sum never passes t (rounding): the
/// last j whose value is > 0 (-1 when none), and t = infinity. 32 values at a time, in a fixed order:
/// values(c0), called by the whole warp, gives each lane the value of c0 + lane (0 at end and past it).
template <class F>
__device__ std::int64_t warp_find(std::int64_t begin, std::int64_t end, double& t, F values, int lane) {
  double base = 0;
  std::int64_t last = -1;
  for (std::int64_t c0 = begin; c0 < end; c0 += 32) {
    const double v = values(c0);
    const double s = warp_scan(v, lane);
    const unsigned hit = __ballot_sync(kFullMask, v > 0 && base + s > t);
    if (hit) {
      const int at = __ffs(hit) - 1;
      t -= base + __shfl_sync(kFullMask, s - v, at);
      return c0 + at;
    }
    const unsigned positive = __ballot_sync(kFullMask, v > 0);
    if (positive) last = c0 + 31 - __clz(positive);
    base += __shfl_sync(kFullMask, s, 31);
  }
  t = INFINITY;
  return last;
}

/// Groups whose sums (the winner's) a block stages in shared memory for its draws (32 KB).
constexpr std::int64_t kStagedGroups = 4096;

/// The whole warp: a candidate drawn with probability w_j D2_j / `total` for the uniform draw u (D2 = 1
/// before the first centre: by weight alone), through the group sums (`staged` in shared memory, or
/// null: `groups` in L2), the range sums `part` and then within the range. When nothing is left to draw
/// (every candidate with weight sits on a chosen centre), the first candidate not yet taken (nor
/// `just_taken`) from a uniform start. Reads what other blocks wrote before the last grid barrier:
/// through L2 (__ldcg).
__device__ std::int64_t draw_candidate(double u, double total, Ranges r, const double* groups, const double* staged,
                                       const double* part, const double* d2, const int* __restrict__ w,
                                       const unsigned char* taken, std::int64_t just_taken, int lane) {
  std::int64_t j = -1;
  if (total > 0) {
    double t = u * total;
    const std::int64_t g = warp_find(0, r.groups, t,
                                     [&](std::int64_t c0) {
                                       const std::int64_t q = c0 + lane;
                                       return q < r.groups ? (staged ? staged[q] : __ldcg(groups + q)) : 0.0;
                                     },
                                     lane);
    const std::int64_t ranges_end = min(r.count, (g + 1) * kGroup);
    const std::int64_t b =
        g < 0 ? -1
              : warp_find(g * kGroup, ranges_end, t,
                          [&](std::int64_t c0) { return c0 + lane < ranges_end ? __ldcg(part + c0 + lane) : 0.0; },
                          lane);
    if (b >= 0) {
      const std::int64_t end = min(r.m, (b + 1) * kRange);
      j = warp_find(b * kRange, end, t,
                    [&](std::int64_t c0) {
                      const std::int64_t q = c0 + lane;
                      return q < end ? double(w[q]) * (d2 == nullptr ? 1.0 : __ldcg(d2 + q)) : 0.0;
                    },
                    lane);
    }
  }
  if (j < 0) {
    const std::int64_t start = min(r.m - 1, static_cast<std::int64_t>(u * double(r.m)));
    for (std::int64_t c0 = 0; c0 < r.m && j < 0; c0 += 32) {
      const std::int64_t q = (start + c0 + lane) % r.m;
      const unsigned free = __ballot_sync(kFullMask, c0 + lane < r.m && q != just_taken && !__ldcg(taken + q));
      if (free) j = (start + c0 + __ffs(free) - 1) % r.m;
    }
  }
  return j;
}

/// The end of a step, by every block alike (the same reads in the same order, so the same results), from
/// the trials' group sums in `out`: each trial's potential (lane-strided sums of its groups, then a fixed
/// tree); the trial of least potential (ties: the lower trial) wins and becomes centre `step` (none when
/// step < 0: the weights' sums before the first centre, drawn by weight alone). Then the next step's
/// `next_trials` picks are drawn from the winner's distances with the draws from `draw0` on of the
/// stream `key`, its group sums first staged in `staged` (shared memory) unless that is null. Block 0
/// records the centre. Ends with the block synchronised.
__device__ void settle_step(StepBuffers out, int trials, Ranges r, std::int64_t step, std::int64_t* chosen,
                            unsigned char* taken, const int* __restrict__ w, int next_trials, std::uint64_t key,
                            std::uint64_t draw0, std::int64_t* picks, double* staged, int& winner) {
  __shared__ double pot[kMaxTrials];
  __shared__ int best_trial;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int l = warp; l < trials; l += warps) {
    const double* groups = out.group_sums + l * r.groups;
    double sum = 0;
    for (std::int64_t g = lane; g < r.groups; g += 32) sum += __ldcg(groups + g);
    sum = warp_sum(sum);
    if (lane == 0) pot[l] = sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int best = 0;
    for (int l = 1; l < trials; ++l)
      if (pot[l] < pot[best]) best = l;
    best_trial = best;
    if (step >= 0 && blockIdx.x == 0) {
      chosen[step] = picks[best];
      taken[picks[best]] = 1;
    }
  }
  __syncthreads();
  winner = best_trial;
  const std::int64_t won = step >= 0 ? picks[winner] : -1;
  const double* groups = out.group_sums + winner * r.groups;
  if (staged && next_trials > 0)
    for (std::int64_t g = threadIdx.x; g < r.groups; g += blockDim.x) staged[g] = __ldcg(groups + g);
  __syncthreads();  // everyone has read the picks before the next ones replace them
  const double* d2 = step < 0 ? nullptr : out.dtrial + winner * r.m;
  for (int l = warp; l < next_trials; l += warps) {
    const std::int64_t j = draw_candidate(uniform_at(key, draw0 + l), pot[winner], r, groups, staged,
                                          out.pot_part + winner * r.count, d2, w, taken, won, lane);
    if (lane == 0) picks[l] = j;
  }
  __syncthreads();
}

/// Dimensions of the candidates' rows a block stages in shared memory at a time (128 floats, 64 doubles),
/// each warp taking kSpan of them.
template <class T>
constexpr int kTrialChunk = 512 / sizeof(T);

/// Values of T in a 16-byte shared-memory load.
template <class T>
constexpr int kVector = 16 / sizeof(T);

template <class T>
struct alignas(16) Vector {
  T v[kVector<T>];
};

/// Warps that add one range's distances: one per slice of kSpan dimensions a chunk holds (kWarps
/// when d fills a chunk; fewer for narrow rows, whose other slices would add zeros), a power of two.
template <class T>
int slices_for(std::int64_t d) {
  constexpr int kSpan = kTrialChunk<T> / kWarps;
  int slices = 1;
  while (slices < kWarps && std::int64_t(slices) * kSpan < d) slices *= 2;
  return slices;
}

/// Ranges a block measures at once for narrow rows: one per `slices` warps, as many as the distances'
/// scratch (kTrials x kRange values a range) can take of the static shared memory (46 KB of the 48 KB
/// allowed, the rest for small arrays) that the staged rows (at most 8 ranges' padding) and the trials'
/// rows leave; a power of two.
template <class T, int kTrials>
constexpr int kMaxRangesPerBlock = [] {
  constexpr int kRowsBytes = (kRange * kTrialChunk<T> / kVector<T> + 8 * kRange) * 16;
  constexpr int kPickBytes = kTrials * kTrialChunk<T> * int(sizeof(T));
  constexpr int kScratchPerRange = kTrials * kRange * int(sizeof(T));
  const int fit = std::clamp((46 * 1024 - kRowsBytes - kPickBytes) / kScratchPerRange, 1, kWarps);
  int ranges = 1;  // a power of two: a block's ranges then lie in one group
  while (2 * ranges <= fit) ranges *= 2;
  return ranges;
}();

/// Ranges a block measures: one per `slices` warps (one when every warp takes a slice), at most
/// kMaxRangesPerBlock.
template <class T, int kTrials>
__host__ __device__ inline int ranges_per_block(int slices) {
  return min(kWarps / slices, kMaxRangesPerBlock<T, kTrials>);
}

/// After a block has written the range sums of ranges [first, first + count) (within one group): the
/// block that completes the group (counted in group_done, reset for the next step) adds its range sums
/// for every trial in warp_sum's fixed tree, so that the settling reads trials x groups values, not
/// trials x ranges. Whole block.
__device__ void add_group_if_last(std::int64_t first, std::int64_t count, Ranges r, int trials, StepBuffers out,
                                  unsigned* group_done) {
  __shared__ bool group_last;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const std::int64_t group = first / kGroup;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const auto in_group = static_cast<unsigned>(min(std::int64_t(kGroup), r.count - group * kGroup));
    group_last = atomicAdd(group_done + group, unsigned(count)) + unsigned(count) == in_group;
  }
  __syncthreads();
  if (!group_last) return;
  __threadfence();
  for (int l = warp; l < trials; l += warps) {
    const double sum = group_sum(out.pot_part + l * r.count, r, group, lane);
    if (lane == 0) out.group_sums[l * r.groups + group] = sum;
  }
  if (threadIdx.x == 0) group_done[group] = 0;
}

/// One step's measurements by one block, for its share `part` of the ranges (G = ranges_per_block, kRange
/// candidates each, ranges [part G, part G + G)): for every trial l (`picks`, kTrials at most, `trials`
/// used) and candidate j, dtrial[l][j] = min(D2_j, ||c_j - c_pick_l||^2) (the distance alone on the first
/// step: d2 null), D2 the previous winner's, and each range's sum of w_j dtrial[l][j] (a warp's fixed
/// tree). Rows are staged a chunk of dimensions at a time; each of a range's `slices` warps adds the
/// squared differences of its slice of the chunk (kSpan dimensions, in order) for every candidate and
/// trial, in T (a greedy choice needs no more than the data's precision); the slices' sums are then added
/// in slice order. Narrow rows (d < kChunk) take fewer slices and more ranges a block: the slices left out
/// would add zeros, so the sums are the same.
template <class T, int kTrials, bool kNarrow>
__device__ void measure_ranges(std::int64_t part, const T* __restrict__ cand, std::int64_t d, Ranges r,
                               int narrow_slices, int trials, const std::int64_t* picks, const double* d2,
                               const int* __restrict__ w, StepBuffers out, unsigned* group_done) {
  constexpr int kChunk = kTrialChunk<T>, kVec = kVector<T>;
  constexpr int kSpan = kChunk / kWarps;
  // Rows that fill a chunk take the wide kernel (every warp a slice of one range, all known here).
  constexpr int kRanges = kNarrow ? kMaxRangesPerBlock<T, kTrials> : 1;
  static_assert(kRange == 32 && kRange * kChunk % kThreads == 0 && kSpan % kVec == 0,
                "a lane per candidate, whole staging rounds, whole vectors per warp");
  // The block's rows, `stride` vectors each (its slices' and one of padding: 16-byte aligned, and the
  // lanes of a quarter warp in distinct banks).
  __shared__ Vector<T> rows[kRange * kChunk / kVec + kRanges * kRange];
  __shared__ Vector<T> pick_rows[kTrials][kChunk / kVec];
  __shared__ T dist[kRanges][kTrials][kRange];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int slices = kNarrow ? narrow_slices : kWarps;
  const int ranges = ranges_per_block<T, kTrials>(slices), g = warp / slices, slice = warp % slices;
  const int width_staged = slices * kSpan, stride = width_staged / kVec + 1;
  const int width_shift = __ffs(width_staged) - 1;  // a power of two: rows and columns by shifts
  const std::int64_t block_lo = part * ranges * kRange;
  const std::int64_t b = part * ranges + g, lo = b * kRange;  // this warp's range
  const bool measures = g < ranges && b < r.count;
  const int valid = measures ? static_cast<int>(min(std::int64_t(kRange), r.m - lo)) : 0;
  const int staged_rows = static_cast<int>(min(std::int64_t(ranges) * kRange, r.m - block_lo));
  T s[kTrials];
#pragma unroll
  for (int l = 0; l < kTrials; ++l) s[l] = T(0);
  // This lane's weight and previous distance, fetched now: they are needed only at the end.
  const std::int64_t j = lo + lane;
  const double wj = lane < valid ? double(w[j]) : 0.0, dj = lane < valid && d2 ? __ldcg(d2 + j) : 0.0;
  constexpr int kRowRounds = kRange * kChunk / kThreads, kPickRounds = (kTrials * kChunk + kThreads - 1) / kThreads;
  for (std::int64_t c0 = 0; c0 < d; c0 += kChunk) {
    const int width = static_cast<int>(min(std::int64_t(kChunk), d - c0));
    // Every load of the chunk into registers first, all in flight together (stored one by one, each
    // would wait for the last: the compiler cannot tell the rows from shared memory). Zeros past the
    // last dimension and past the last candidate or trial: they add nothing.
    T row_values[kRowRounds], pick_values[kPickRounds];
#pragma unroll
    for (int round = 0; round < kRowRounds; ++round) {
      const int q = threadIdx.x + round * kThreads, row = q >> width_shift, p = q & (width_staged - 1);
      row_values[round] = row < ranges * kRange && row < staged_rows && p < width
                              ? __ldg(cand + (block_lo + row) * d + c0 + p) : T(0);
    }
#pragma unroll
    for (int round = 0; round < kPickRounds; ++round) {
      const int q = threadIdx.x + round * kThreads, l = q / kChunk, p = q % kChunk;
      pick_values[round] = l < trials && p < width ? __ldg(cand + picks[l] * d + c0 + p) : T(0);
    }
    __syncthreads();  // the previous chunk (or part) has been used
#pragma unroll
    for (int round = 0; round < kRowRounds; ++round) {
      const int q = threadIdx.x + round * kThreads, row = q >> width_shift, p = q & (width_staged - 1);
      if (row < ranges * kRange) rows[row * stride + p / kVec].v[p % kVec] = row_values[round];
    }
#pragma unroll
    for (int round = 0; round < kPickRounds; ++round) {
      const int q = threadIdx.x + round * kThreads, l = q / kChunk, p = q % kChunk;
      if (l < kTrials) pick_rows[l][p / kVec].v[p % kVec] = pick_values[round];
    }
    __syncthreads();
    if (g < ranges) {
#pragma unroll
      for (int v = slice * kSpan / kVec; v < (slice + 1) * kSpan / kVec; ++v) {
        const Vector<T> x = rows[(g * kRange + lane) * stride + v];
#pragma unroll
        for (int l = 0; l < kTrials; ++l) {
          const Vector<T> c = pick_rows[l][v];
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            const T diff = x.v[e] - c.v[e];
            s[l] += diff * diff;
          }
        }
      }
    }
  }
  for (int k = 0; k < slices; ++k) {  // the slices' sums in slice order
    if (g < ranges && slice == k) {
#pragma unroll
      for (int l = 0; l < kTrials; ++l) dist[g][l][lane] = k == 0 ? s[l] : dist[g][l][lane] + s[l];
    }
    __syncthreads();
  }
  if (measures) {
    for (int l = slice; l < trials; l += slices) {
      const double sl = double(dist[g][l][lane]);
      const double v = !d2 || sl < dj ? sl : dj;
      if (lane < valid) out.dtrial[l * r.m + j] = v;
      const double sum = warp_sum(lane < valid ? wj * v : 0.0);
      if (lane == 0) out.pot_part[l * r.count + b] = sum;
    }
  }
  add_group_if_last(part * ranges, min(std::int64_t(ranges), r.count - part * ranges), r, trials, out, group_done);
}

/// The weights' sums over the block's share `part` of the ranges (kWarps of them, within one group: a
/// warp each), stored as a single trial's range sums, and their group's sum by the group's last block
/// (add_group_if_last, as a step's): what the first centre is drawn from, by weight alone.
__device__ void weigh_ranges(std::int64_t part, Ranges r, const int* __restrict__ w, StepBuffers out,
                             unsigned* group_done) {
  static_assert(kGroup % kWarps == 0, "a share of the ranges lies in one group");
  const int lane = threadIdx.x % 32;
  const std::int64_t first = part * kWarps, b = first + threadIdx.x / 32, j = b * kRange + lane;
  if (b < r.count) {
    const double sum = warp_sum(j < r.m ? double(w[j]) : 0.0);
    if (lane == 0) out.pot_part[b] = sum;
  }
  add_group_if_last(first, min(std::int64_t(kWarps), r.count - first), r, 1, out, group_done);
}

/// Blocks per SM the wide kernel's registers leave room for with up to 16 trials: three, so that the 2.5
/// blocks a SM of 10k candidates (320 ranges on 132 SMs) each measure one range and none holds the grid
/// barrier up with a second (spills: at most 72 bytes). The others keep every register they want.
template <int kTrials, bool kNarrow>
constexpr int kStepBlocksPerSm = !kNarrow && kTrials <= 16 ? 3 : 1;

/// Steps [first_step, last_step) of the k of greedy k-means++ over the candidates in one launch, its
/// blocks all resident (a cooperative launch) and meeting at a grid barrier once a step: they measure
/// their shares of the ranges (measure_ranges, `parts` shares in all; each group's last block adds the
/// group's sums), wait for each other, and then every block settles the step and draws the next one's
/// picks itself, from the same sums in the same order (no second barrier, no block waiting on another's
/// draw). `first_step` 0 first draws the first centre by weight alone; a later launch starts from
/// `state`, which block 0 leaves at the end. Step s writes the buffers s % 2 and reads the previous
/// step's winner from the other. The draws are the stream `key`'s: 0 for the first centre, then
/// `trials` a step.
template <class T, int kTrials, bool kNarrow>
__global__ void __launch_bounds__(kThreads, kStepBlocksPerSm<kTrials, kNarrow>)
    greedy_steps_kernel(const T* __restrict__ cand, std::int64_t d, Ranges r, int narrow_slices, std::int64_t parts,
                        int trials, const int* __restrict__ w, unsigned char* taken, StepBuffers buffers0,
                        StepBuffers buffers1, unsigned* group_done, StepState* state, std::int64_t first_step,
                        std::int64_t last_step, std::int64_t k, std::uint64_t key, std::int64_t* chosen) {
  const cg::grid_group grid = cg::this_grid();
  __shared__ std::int64_t picks[kMaxTrials];
  extern __shared__ double staged_groups[];  // r.groups doubles where they fit kStagedGroups, else none
  double* staged = r.groups <= kStagedGroups ? staged_groups : nullptr;
  int winner = 0;
  const auto draw_base = [&](std::int64_t step) { return step == 0 ? 0ull : 1ull + std::uint64_t(step - 1) * trials; };
  if (first_step == 0) {
    // The weights' range and group sums, as if they were a single winning trial's, then the first
    // centre's draw.
    for (std::int64_t part = blockIdx.x; part < (r.count + kWarps - 1) / kWarps; part += gridDim.x)
      weigh_ranges(part, r, w, buffers1, group_done);
    grid.sync();
    settle_step(buffers1, 1, r, -1, chosen, taken, w, 1, key, draw_base(0), picks, staged, winner);
  } else {
    if (threadIdx.x < trials) picks[threadIdx.x] = state->picks[threadIdx.x];
    winner = state->winner;
    __syncthreads();
  }
  for (std::int64_t step = first_step; step < last_step; ++step) {
    const StepBuffers out = step % 2 ? buffers1 : buffers0, prev = step % 2 ? buffers0 : buffers1;
    const int step_trials = step == 0 ? 1 : trials;
    const double* d2 = step == 0 ? nullptr : prev.dtrial + std::int64_t(winner) * r.m;
    for (std::int64_t part = blockIdx.x; part < parts; part += gridDim.x)
      measure_ranges<T, kTrials, kNarrow>(part, cand, d, r, narrow_slices, step_trials, picks, d2, w, out, group_done);
    grid.sync();
    const int next_trials = step + 1 < k ? trials : 0;
    settle_step(out, step_trials, r, step, chosen, taken, w, next_trials, key, draw_base(step + 1), picks, staged,
                winner);
  }
  if (blockIdx.x == 0 && threadIdx.x < kMaxTrials) {
    if (threadIdx.x == 0) state->winner = winner;
    state->picks[threadIdx.x] = picks[threadIdx.x];
  }
}

/// Greedy k-means++ over the m weighted candidates `cand` (m x d): k steps, each drawing greedy_trials(k)
/// candidates with probability w D^2 and keeping the one that lowers the weighted potential most
/// (scikit-learn's greedy rule, as init_kmeans_plus_plus; the first centre drawn by weight alone).
/// All on the device, in launches of kInitProgressEvery steps whose blocks meet at a grid barrier once
/// a step (greedy_steps_kernel), not a launch a step (each ended with one block settling the step while
/// the rest of the GPU waited for the next launch); it waits only to report progress. Writes the k chosen candidates'
/// indices to `chosen`. The centres do not depend on the number of blocks (SKINNY_INIT_REDUCTION_BLOCKS
/// caps it, for tests). H200, 1M points, ms for the reduction, a launch a step -> these launches
/// (bench/results/h200/2026-11-29_init-reduction): d = 128, k = 1024 (10k candidates) 15.6 -> 12.5;
/// d = 16 15.3 -> 9.5; d = 512 33.2 -> 25.7; k = 256 3.5 -> 2.3; d = 2, k = 2048 39.7 -> 25.1; but
/// d = 128, k = 4096 (41k candidates, four ranges a block a step) 172 -> 183.
template <class T>
void greedy_reduce(const T* cand, std::int64_t m, std::int64_t d, const int* w, std::int64_t k, std::uint64_t key,
                   std::int64_t* chosen, cudaStream_t stream, const InitProgressFn& progress,
                   std::chrono::steady_clock::time_point start) {
  static_assert(kMaxTrials == 32, "the buckets below");
  const int trials = greedy_trials(k);
  const Ranges r(m);
  const auto size = [](std::int64_t count) { return static_cast<std::size_t>(count); };
  DeviceBuffer<double> dtrial(size(2 * trials * m)), pot_part(size(2 * trials * r.count));
  DeviceBuffer<double> group_sums(size(2 * trials * r.groups));
  DeviceBuffer<unsigned> group_done(size(r.groups));  ///< ranges measured per group this step
  DeviceBuffer<unsigned char> taken(size(m));
  DeviceBuffer<StepState> state(1);
  SKINNY_CUDA_TRY(cudaMemsetAsync(taken.data(), 0, taken.bytes(), stream));
  SKINNY_CUDA_TRY(cudaMemsetAsync(group_done.data(), 0, group_done.bytes(), stream));
  const StepBuffers buffers0{dtrial.data(), pot_part.data(), group_sums.data()};
  const StepBuffers buffers1{dtrial.data() + trials * m, pot_part.data() + trials * r.count,
                             group_sums.data() + trials * r.groups};
  const int slices = slices_for<T>(d);
  // Set up once for the trial bucket, then the steps in launches of kInitProgressEvery.
  const auto run = [&](auto trials_bucket) {
    constexpr int kTrials = decltype(trials_bucket)::value;
    const int ranges = ranges_per_block<T, kTrials>(slices);
    const std::int64_t parts = (r.count + ranges - 1) / ranges;
    const auto kernel = slices < kWarps ? greedy_steps_kernel<T, kTrials, true>
                                        : greedy_steps_kernel<T, kTrials, false>;
    const std::size_t smem = r.groups <= kStagedGroups ? static_cast<std::size_t>(r.groups) * sizeof(double) : 0;
    SKINNY_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int per_sm = 0;
    SKINNY_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
    // Every block resident (the grid barrier waits for all of them): as many as fit, at most the parts.
    std::int64_t blocks = std::min<std::int64_t>(parts, std::int64_t(std::max(per_sm, 1)) * multiprocessors());
    if (const char* cap = std::getenv("SKINNY_INIT_REDUCTION_BLOCKS"); cap && std::atoll(cap) > 0)
      blocks = std::min<std::int64_t>(blocks, std::atoll(cap));
    cudaLaunchAttribute cooperative{};
    cooperative.id = cudaLaunchAttributeCooperative;
    cooperative.val.cooperative = 1;
    cudaLaunchConfig_t config{};
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = &cooperative;
    config.numAttrs = 1;
    for (std::int64_t step = 0; step < k; step += kInitProgressEvery) {
      const std::int64_t last = std::min(k, step + kInitProgressEvery);
      for (;;) {
        config.gridDim = dim3(static_cast<unsigned>(blocks));
        const cudaError_t launched =
            cudaLaunchKernelEx(&config, kernel, cand, d, r, slices, parts, trials, w, taken.data(), buffers0, buffers1,
                               group_done.data(), state.data(), step, last, k, key, chosen);
        // Fewer SMs than the device has (MPS, a green context): half the blocks, each measuring more
        // parts, for this launch and the later ones.
        if (launched != cudaErrorCooperativeLaunchTooLarge || blocks == 1) {
          SKINNY_CUDA_TRY(launched);
          break;
        }
        (void)cudaGetLastError();
        blocks = (blocks + 1) / 2;
      }
      if (progress) {
        SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
        progress(InitProgress{"k-means|| reduction", last, k, m, ms_since(start)});
      }
    }
  };
  if (trials <= 1) run(std::integral_constant<int, 1>{});
  else if (trials <= 2) run(std::integral_constant<int, 2>{});
  else if (trials <= 4) run(std::integral_constant<int, 4>{});
  else if (trials <= 8) run(std::integral_constant<int, 8>{});
  else if (trials <= 16) run(std::integral_constant<int, 16>{});
  else run(std::integral_constant<int, 32>{});
}

/// Weighted sampling without replacement of k of the m candidates, probability proportional to weight
/// (Efraimidis and Spirakis: the k smallest keys -ln(u) / w, one sort). For very many candidates (as
/// many as a tenth of the points or more, e.g. k = 100000 on 1M points), where greedy k-means++ would
/// take k passes over them: the candidates are already spread by D^2 sampling, and the weights keep
/// dense regions from being left with too few centres; it does not re-spread them as k-means++ would.
void weighted_sample(const int* w, std::int64_t m, std::int64_t k, std::uint64_t key, std::int64_t* chosen,
                     cudaStream_t stream) {
  DeviceBuffer<double> keys(static_cast<std::size_t>(m));
  DeviceBuffer<std::int64_t> order(static_cast<std::size_t>(m));
  thrust::transform(thrust::cuda::par_nosync.on(stream), thrust::counting_iterator<std::int64_t>(0),
                    thrust::counting_iterator<std::int64_t>(m), keys.data(),
                    [=] __device__(std::int64_t j) { return weighted_sample_key(key, std::uint64_t(j), w[j]); });
  thrust::sequence(thrust::cuda::par_nosync.on(stream), order.data(), order.data() + m);
  // Stable: equal keys (weight 0: +infinity) keep index order.
  thrust::stable_sort_by_key(thrust::cuda::par.on(stream), keys.data(), keys.data() + m, order.data());
  SKINNY_CUDA_TRY(cudaMemcpyAsync(chosen, order.data(), static_cast<std::size_t>(k) * sizeof(std::int64_t),
                                  cudaMemcpyDeviceToDevice, stream));
  // keys and order are freed on return: cudaFree waits for the work that uses them.
}

}  // namespace

template <class T>
void init_kmeans_parallel(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                          std::uint64_t seed, double oversampling, int rounds, const T* xnorm, T* c,
                          const InitProgressFn& progress, Reduction reduction, const HalfRows* half) {
  const auto start = std::chrono::steady_clock::now();
  const cudaStream_t stream = ctx.stream();
  const double l = oversampling * double(k);
  const auto N = static_cast<std::size_t>(n);

  // Per point: squared distance to the nearest candidate and its index; that of this round's.
  DeviceBuffer<T> d2(N), new_dist(N);
  // Narrow rows as exact Lloyd iterations take them: for any count of centres.
  SamplingRows sampling;
  sampling.narrow = narrow_assignment(d, k, gemm::Math::exact, gemm::Algo::automatic, false);
  if constexpr (std::is_same_v<T, float>)
    if (!sampling.narrow) sampling = sampling_rows(x, n, d, half, stream);
  DeviceBuffer<std::int32_t> label(N), new_label(N);
  DeviceBuffer<unsigned char> is_candidate(N);
  DeviceBuffer<std::int64_t> cand_idx(N);  // candidates' point indices, in the order they were sampled
  // Candidates' rows (grown as rounds add to them) and this round's norms.
  DeviceBuffer<T> cand(static_cast<std::size_t>(std::min<double>(double(n), 1.0 + std::ceil(l)) * double(d)));
  DeviceBuffer<T> cnorm;
  SKINNY_CUDA_TRY(cudaMemsetAsync(is_candidate.data(), 0, is_candidate.bytes(), stream));

  // Adds the candidates cand_idx[m, m + added): marks them, gathers their rows, and folds their
  // distances into d2 and label.
  std::int64_t m = 0;
  auto add_candidates = [&](std::int64_t added) {
    reserve(cand, static_cast<std::size_t>(m * d), static_cast<std::size_t>((m + added) * d), stream);
    reserve(cnorm, 0, static_cast<std::size_t>(added), stream);
    mark_kernel<<<grid_for(added), kThreads, 0, stream>>>(cand_idx.data() + m, added, is_candidate.data());
    SKINNY_CHECK_LAUNCH();
    T* rows = cand.data() + m * d;
    gather_rows(x, d, cand_idx.data() + m, added, rows, stream);
    row_sq_norms(rows, added, d, cnorm.data(), stream);
    nearest_centres(ctx, x, n, d, xnorm, rows, added, cnorm.data(), sampling, new_label.data(), new_dist.data());
    merge_nearest_kernel<<<grid_for(n), kThreads, 0, stream>>>(new_label.data(), new_dist.data(), n, m, m == 0,
                                                               d2.data(), label.data());
    SKINNY_CHECK_LAUNCH();
    m += added;
  };

  // The first candidate uniform.
  const std::int64_t first =
      static_cast<std::int64_t>(splitmix64(splitmix64(seed ^ 0x4b4d7c7c46495253ull)) % static_cast<std::uint64_t>(n));
  SKINNY_CUDA_TRY(cudaMemcpyAsync(cand_idx.data(), &first, sizeof first, cudaMemcpyHostToDevice, stream));
  add_candidates(1);

  for (int round = 1; round <= rounds && m < n; ++round) {
    const double phi = sum(d2.data(), n, stream);  // waits
    if (!(phi > 0)) break;  // every point sits on a candidate
    const std::uint64_t key = round_key(seed, round);
    const T* dd = d2.data();
    const unsigned char* taken = is_candidate.data();
    // Every point drawn independently; copy_if keeps index order, so the candidates do not depend on
    // the launch.
    std::int64_t* out = cand_idx.data() + m;
    const std::int64_t added =
        thrust::copy_if(thrust::cuda::par.on(stream), thrust::counting_iterator<std::int64_t>(0),
                        thrust::counting_iterator<std::int64_t>(n), out,
                        [=] __device__(std::int64_t i) {
                          return !taken[i] && sampled(key, std::uint64_t(i), double(dd[i]), l, phi);
                        }) -
        out;
    if (added > 0) add_candidates(added);
    if (progress) {
      SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
      progress(InitProgress{"k-means|| sampling", round, rounds, m, ms_since(start)});
    }
  }

  if (m <= k) {
    // Every candidate is a centre; fewer than k: the rest distinct random points that are not
    // candidates (the smallest keys of a counter-based stream over the other points).
    SKINNY_CUDA_TRY(cudaMemcpyAsync(c, cand.data(), static_cast<std::size_t>(m * d) * sizeof(T),
                                    cudaMemcpyDeviceToDevice, stream));
    const std::int64_t need = k - m;
    if (need > 0) {
      DeviceBuffer<std::int64_t> pool(static_cast<std::size_t>(n - m));
      DeviceBuffer<std::uint64_t> keys(static_cast<std::size_t>(n - m));
      const unsigned char* taken = is_candidate.data();
      std::int64_t* end = thrust::copy_if(thrust::cuda::par.on(stream), thrust::counting_iterator<std::int64_t>(0),
                                          thrust::counting_iterator<std::int64_t>(n), pool.data(),
                                          [=] __device__(std::int64_t i) { return !taken[i]; });
      const std::int64_t others = end - pool.data();
      const std::uint64_t key = splitmix64(seed ^ 0x4b4d7c7c544f5055ull);
      thrust::transform(thrust::cuda::par_nosync.on(stream), pool.data(), pool.data() + others, keys.data(),
                        [=] __device__(std::int64_t i) { return splitmix64(key ^ splitmix64(std::uint64_t(i))); });
      thrust::stable_sort_by_key(thrust::cuda::par.on(stream), keys.data(), keys.data() + others, pool.data());
      gather_rows(x, d, pool.data(), need, c + m * d, stream);
    }
    if (progress) progress(InitProgress{"k-means|| reduction", k, k, m, ms_since(start)});
    return;
  }

  // Weights: the points nearest to each candidate (integer counts: the same in any order).
  DeviceBuffer<int> weight(static_cast<std::size_t>(m));
  SKINNY_CUDA_TRY(cudaMemsetAsync(weight.data(), 0, weight.bytes(), stream));
  count_labels(label.data(), n, m, weight.data(), stream);
  DeviceBuffer<std::int64_t> chosen(static_cast<std::size_t>(k));
  const std::uint64_t key = splitmix64(seed ^ 0x4b4d7c7c52454455ull);
  const bool greedy = reduction == Reduction::automatic ? greedy_reduction(k, m, d) : reduction == Reduction::greedy;
  if (greedy) {
    greedy_reduce(cand.data(), m, d, weight.data(), k, key, chosen.data(), stream, progress, start);
  } else {
    weighted_sample(weight.data(), m, k, key, chosen.data(), stream);
    if (progress) progress(InitProgress{"k-means|| reduction", k, k, m, ms_since(start)});
  }
  gather_rows(cand.data(), d, chosen.data(), k, c, stream);
  // The buffers are freed on return: cudaFree waits for the work that uses them.
}

template void init_kmeans_parallel(Context&, const float*, std::int64_t, std::int64_t, std::int64_t, std::uint64_t,
                                   double, int, const float*, float*, const InitProgressFn&, Reduction,
                                   const HalfRows*);
template void init_kmeans_parallel(Context&, const double*, std::int64_t, std::int64_t, std::int64_t, std::uint64_t,
                                   double, int, const double*, double*, const InitProgressFn&, Reduction,
                                   const HalfRows*);

}  // namespace skinny::kmeans::detail
