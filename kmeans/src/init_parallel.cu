// k-means|| initialisation (scalable k-means++, Bahmani et al. 2012): a few rounds of independent D^2
// sampling over all points, each round one pass over X; the candidates weighted by the points nearest to
// each; those reduced to k. Deterministic from the seed: counter-based draws, candidates gathered in
// index order, sums in fixed orders, integer counts.
#include "detail.hpp"
#include "init.hpp"
#include "init_parallel_rules.hpp"

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/gemm.hpp>
#include <skinny/gemm/nearest.hpp>
#include <skinny/gemm/splitmix64.hpp>

#include <thrust/copy.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <type_traits>

namespace skinny::kmeans::detail {
namespace {

constexpr int kThreads = 256;
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

/// For every point, the nearest of the m centres c (m x d) and its squared distance. Float through
/// gemm::nearest where it can run (x 16-byte aligned, d a multiple of 4, compute capability >= 8.0):
/// the cross term on the tensor cores fused with the argmin, in one TF32 product (Math::fast, twice the
/// speed of the exact mode): D^2 sampling needs the distances' sizes, not their last bits, and a point
/// that nearly ties two candidates may weigh either. Otherwise, and for double, the cross terms through
/// gemm::gemm in row chunks and the Lloyd loop's argmin (ties: the lowest index either way).
template <class T>
void nearest_centres(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const T* xnorm, const T* c,
                     std::int64_t m, const T* cnorm, std::int32_t* labels, T* dist) {
  const cudaStream_t stream = ctx.stream();
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
    if (gemm::nearest_can_implement(ctx, a)) {
      gemm::nearest(ctx, a);
      return;
    }
  }
  const std::int64_t rows = chunk_rows(n, m, sizeof(T));
  DeviceBuffer<T> g(static_cast<std::size_t>(rows * m));
  DeviceBuffer<int> counts(static_cast<std::size_t>(m));  // argmin counts too; not needed here
  SKINNY_CUDA_TRY(cudaMemsetAsync(counts.data(), 0, counts.bytes(), stream));
  for (std::int64_t r0 = 0; r0 < n; r0 += rows) {
    const std::int64_t h = std::min(rows, n - r0);
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

/// Ranges of candidates: block b of the reduction kernels owns [b * len, (b + 1) * len), so every sum
/// is formed in the same order whatever the device.
struct Ranges {
  std::int64_t len = 0, count = 0;
  explicit Ranges(std::int64_t m) : len(std::max<std::int64_t>(kThreads, (m + 4095) / 4096)), count((m + len - 1) / len) {}
};

/// The uniform draws of one step, one per trial (passed by value: no copy to the device, no wait).
struct Draws {
  double u[kMaxTrials];
};

/// Sum over the block in a fixed tree (blockDim.x == kThreads); every thread gets it.
__device__ double block_sum(double v, double* buf) {
  buf[threadIdx.x] = v;
  for (int half = kThreads / 2; half > 0; half /= 2) {
    __syncthreads();
    if (threadIdx.x < half) buf[threadIdx.x] += buf[threadIdx.x + half];
  }
  __syncthreads();
  const double s = buf[0];
  __syncthreads();
  return s;
}

/// Inclusive prefix sum over the warp in a fixed order.
__device__ double warp_scan(double v, int lane) {
  for (int off = 1; off < 32; off <<= 1) {
    const double o = __shfl_up_sync(kFullMask, v, off);
    if (lane >= off) v += o;
  }
  return v;
}

/// The whole warp: the first j in [begin, end) whose value(j) > 0 takes the running sum of the values
/// past t, with `before` the sum up to it; -1 when the sum never passes t (rounding), with
/// `last_positive` the last j whose value is > 0 (-1 when none). 32 values at a time, in a fixed order.
template <class F>
__device__ std::int64_t warp_find(std::int64_t begin, std::int64_t end, double t, F value, int lane, double& before,
                                  std::int64_t& last_positive) {
  double base = 0;
  last_positive = -1;
  for (std::int64_t c0 = begin; c0 < end; c0 += 32) {
    const std::int64_t j = c0 + lane;
    const double v = j < end ? value(j) : 0.0;
    const double s = warp_scan(v, lane);
    const unsigned hit = __ballot_sync(kFullMask, v > 0 && base + s > t);
    if (hit) {
      const int at = __ffs(hit) - 1;
      before = base + __shfl_sync(kFullMask, s - v, at);
      return c0 + at;
    }
    const unsigned positive = __ballot_sync(kFullMask, v > 0);
    if (positive) last_positive = c0 + 31 - __clz(positive);
    base += __shfl_sync(kFullMask, s, 31);
  }
  return -1;
}

/// The whole warp: a candidate drawn with probability w_j D2_j / sum for the uniform draw u (D2 = 1
/// before the first centre: by weight alone), through the per-range sums `part` and then within the
/// range. When nothing is left to draw (every candidate with weight sits on a chosen centre), the first
/// candidate not yet taken from a uniform start.
__device__ std::int64_t pick_candidate(const double* __restrict__ part, Ranges ranges, const double* __restrict__ d2,
                                       const int* __restrict__ w, std::int64_t m, double u,
                                       const unsigned char* __restrict__ taken, int lane) {
  double total = 0;
  for (std::int64_t b = lane; b < ranges.count; b += 32) total += part[b];
  for (int off = 16; off > 0; off >>= 1) total += __shfl_xor_sync(kFullMask, total, off);
  std::int64_t j = -1;
  if (total > 0) {
    double before = 0;
    std::int64_t last = -1;
    std::int64_t b = warp_find(0, ranges.count, u * total, [&](std::int64_t r) { return part[r]; }, lane, before, last);
    double t = u * total - before;
    if (b < 0) {  // rounding: the last range with any weight, its last candidate with any
      b = last;
      t = INFINITY;
    }
    if (b >= 0) {
      const std::int64_t lo = b * ranges.len, hi = min(m, lo + ranges.len);
      j = warp_find(lo, hi, t, [&](std::int64_t q) { return double(w[q]) * d2[q]; }, lane, before, last);
      if (j < 0) j = last;
    }
  }
  if (j < 0) {
    const std::int64_t start = min(m - 1, static_cast<std::int64_t>(u * double(m)));
    for (std::int64_t c0 = 0; c0 < m && j < 0; c0 += 32) {
      const std::int64_t q = (start + c0 + lane) % m;
      const unsigned free = __ballot_sync(kFullMask, c0 + lane < m && !taken[q]);
      if (free) j = (start + c0 + __ffs(free) - 1) % m;
    }
  }
  return j;
}

/// Dimensions of the candidates' rows a block stages in shared memory at a time (32 floats, 16 doubles).
template <class T>
constexpr int kTrialChunk = 128 / sizeof(T);

/// Every block draws the step's trials itself (a warp per trial; the same draws in every block, block 0
/// records them in `picks`), then over its range: for every trial l, dtrial[l][j] = min(D2_j,
/// ||c_j - c_pick_l||^2) (the distance alone on the first step) and pot_part[l][b] = sum of w_j
/// dtrial[l][j] (a fixed tree). The block's candidates and the trials' rows are staged a chunk of
/// dimensions at a time, read with whole-row copies; each thread adds its candidate's squared
/// differences in dimension order, in T (a greedy choice needs no more than the data's precision).
template <class T>
__global__ void __launch_bounds__(kThreads) trial_distances_kernel(
    const T* __restrict__ cand, std::int64_t d, std::int64_t m, Ranges ranges, const double* __restrict__ part,
    Draws draws, int trials, const unsigned char* __restrict__ taken, bool first, const double* __restrict__ d2,
    const int* __restrict__ w, std::int64_t* __restrict__ picks, double* __restrict__ dtrial,
    double* __restrict__ pot_part) {
  constexpr int kChunk = kTrialChunk<T>;
  __shared__ double buf[kThreads];
  __shared__ std::int64_t pick_at[kMaxTrials];
  __shared__ T rows[kThreads][kChunk + 1];  // +1: a thread's row in its own bank
  __shared__ T pick_rows[kMaxTrials][kChunk];
  const int lane = threadIdx.x % 32;
  for (int l = threadIdx.x / 32; l < trials; l += kThreads / 32) {
    const std::int64_t j = pick_candidate(part, ranges, d2, w, m, draws.u[l], taken, lane);
    if (lane == 0) {
      pick_at[l] = j;
      if (blockIdx.x == 0) picks[l] = j;
    }
  }
  double acc[kMaxTrials];
#pragma unroll
  for (int l = 0; l < kMaxTrials; ++l) acc[l] = 0;
  const std::int64_t lo = static_cast<std::int64_t>(blockIdx.x) * ranges.len, hi = min(m, lo + ranges.len);
  for (std::int64_t g0 = lo; g0 < hi; g0 += kThreads) {
    T s[kMaxTrials];
#pragma unroll
    for (int l = 0; l < kMaxTrials; ++l) s[l] = T(0);
    for (std::int64_t c0 = 0; c0 < d; c0 += kChunk) {
      const int width = static_cast<int>(min(std::int64_t(kChunk), d - c0));
      __syncthreads();  // the picks are drawn; the previous chunk has been read
      for (int q = threadIdx.x; q < kThreads * kChunk; q += kThreads) {
        const int r = q / kChunk, p = q % kChunk;
        rows[r][p] = g0 + r < hi && p < width ? cand[(g0 + r) * d + c0 + p] : T(0);
      }
      for (int q = threadIdx.x; q < trials * kChunk; q += kThreads) {
        const int l = q / kChunk, p = q % kChunk;
        pick_rows[l][p] = p < width ? cand[pick_at[l] * d + c0 + p] : T(0);
      }
      __syncthreads();
      for (int p = 0; p < width; ++p) {
        const T x = rows[threadIdx.x][p];
#pragma unroll
        for (int l = 0; l < kMaxTrials; ++l) {
          if (l < trials) {
            const T diff = x - pick_rows[l][p];
            s[l] += diff * diff;
          }
        }
      }
    }
    const std::int64_t j = g0 + threadIdx.x;
    if (j < hi) {
      const double wj = w[j], dj = d2[j];
#pragma unroll
      for (int l = 0; l < kMaxTrials; ++l) {
        if (l < trials) {
          const double v = first || double(s[l]) < dj ? double(s[l]) : dj;
          dtrial[l * m + j] = v;
          acc[l] += wj * v;
        }
      }
    }
  }
#pragma unroll
  for (int l = 0; l < kMaxTrials; ++l) {
    if (l < trials) {
      const double s = block_sum(acc[l], buf);
      if (threadIdx.x == 0) pot_part[l * ranges.count + blockIdx.x] = s;
    }
  }
}

/// With the step's trials (dtrial set): the trial of lowest potential (its range sums added in order;
/// ties: the lower trial), decided by every block alike and recorded as centre `step` by block 0, and D2
/// = its distances. Then part[b] = sum of w_j D2_j over block b's range (a fixed tree): the next step's
/// draw. Without trials, part alone (D2 as it is).
__global__ void __launch_bounds__(kThreads) commit_kernel(double* __restrict__ d2, const double* __restrict__ dtrial,
                                                          const double* __restrict__ pot_part, int trials,
                                                          const std::int64_t* __restrict__ picks, std::int64_t step,
                                                          std::int64_t* __restrict__ chosen,
                                                          unsigned char* __restrict__ taken, std::int64_t m,
                                                          Ranges ranges, const int* __restrict__ w,
                                                          double* __restrict__ part) {
  __shared__ double buf[kThreads];
  __shared__ int winner;
  if (dtrial != nullptr && threadIdx.x < 32) {
    const int lane = threadIdx.x;
    double pot = INFINITY;
    int best = INT_MAX;
    if (lane < trials) {
      pot = 0;
      for (std::int64_t b = 0; b < ranges.count; ++b) pot += pot_part[lane * ranges.count + b];
      best = lane;
    }
    for (int off = 16; off > 0; off >>= 1) {
      const double other = __shfl_xor_sync(kFullMask, pot, off);
      const int other_l = __shfl_xor_sync(kFullMask, best, off);
      if (other_l != INT_MAX && (best == INT_MAX || other < pot || (other == pot && other_l < best))) {
        pot = other;
        best = other_l;
      }
    }
    if (lane == 0) {
      winner = best;
      if (blockIdx.x == 0) {
        chosen[step] = picks[best];
        taken[picks[best]] = 1;
      }
    }
  }
  __syncthreads();
  const std::int64_t lo = static_cast<std::int64_t>(blockIdx.x) * ranges.len, hi = min(m, lo + ranges.len);
  double s = 0;
  for (std::int64_t j = lo + threadIdx.x; j < hi; j += kThreads) {
    if (dtrial != nullptr) d2[j] = dtrial[winner * m + j];
    s += double(w[j]) * d2[j];
  }
  s = block_sum(s, buf);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/// Greedy k-means++ over the m weighted candidates `cand` (m x d): k steps, each drawing greedy_trials(k)
/// candidates with probability w D^2 and keeping the one that lowers the weighted potential most
/// (scikit-learn's greedy rule, as init_kmeans_plus_plus; the first centre drawn by weight alone).
/// All on the device with no wait per step: the draws go in as kernel arguments. Writes the k chosen
/// candidates' indices to `chosen`.
template <class T>
void greedy_reduce(const T* cand, std::int64_t m, std::int64_t d, const int* w, std::int64_t k, std::uint64_t key,
                   std::int64_t* chosen, cudaStream_t stream, const InitProgressFn& progress,
                   std::chrono::steady_clock::time_point start) {
  const int trials = greedy_trials(k);
  const Ranges ranges(m);
  DeviceBuffer<double> d2(static_cast<std::size_t>(m)), dtrial(static_cast<std::size_t>(trials * m));
  DeviceBuffer<double> part(static_cast<std::size_t>(ranges.count)),
      pot_part(static_cast<std::size_t>(trials * ranges.count));
  DeviceBuffer<std::int64_t> picks(static_cast<std::size_t>(trials));
  DeviceBuffer<unsigned char> taken(static_cast<std::size_t>(m));
  SKINNY_CUDA_TRY(cudaMemsetAsync(taken.data(), 0, taken.bytes(), stream));
  thrust::fill(thrust::cuda::par_nosync.on(stream), d2.data(), d2.data() + m, 1.0);
  const unsigned blocks = static_cast<unsigned>(ranges.count);
  commit_kernel<<<blocks, kThreads, 0, stream>>>(d2.data(), nullptr, nullptr, 0, nullptr, 0, nullptr, nullptr, m,
                                                 ranges, w, part.data());
  SKINNY_CHECK_LAUNCH();
  std::uint64_t draw = 0;
  // Two launches a step: the trials drawn and their distances, then the winner committed.
  for (std::int64_t step = 0; step < k; ++step) {
    const int t = step == 0 ? 1 : trials;
    Draws draws{};
    for (int l = 0; l < t; ++l) draws.u[l] = uniform_at(key, draw++);
    trial_distances_kernel<T><<<blocks, kThreads, 0, stream>>>(cand, d, m, ranges, part.data(), draws, t, taken.data(),
                                                               step == 0, d2.data(), w, picks.data(), dtrial.data(),
                                                               pot_part.data());
    SKINNY_CHECK_LAUNCH();
    commit_kernel<<<blocks, kThreads, 0, stream>>>(d2.data(), dtrial.data(), pot_part.data(), t, picks.data(), step,
                                                   chosen, taken.data(), m, ranges, w, part.data());
    SKINNY_CHECK_LAUNCH();
    if (progress && ((step + 1) % kInitProgressEvery == 0 || step + 1 == k)) {
      SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
      progress(InitProgress{"k-means|| reduction", step + 1, k, m, ms_since(start)});
    }
  }
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
                          const InitProgressFn& progress, Reduction reduction) {
  const auto start = std::chrono::steady_clock::now();
  const cudaStream_t stream = ctx.stream();
  const double l = oversampling * double(k);
  const auto N = static_cast<std::size_t>(n);

  // Per point: squared distance to the nearest candidate and its index; that of this round's.
  DeviceBuffer<T> d2(N), new_dist(N);
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
    nearest_centres(ctx, x, n, d, xnorm, rows, added, cnorm.data(), new_label.data(), new_dist.data());
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
                                   double, int, const float*, float*, const InitProgressFn&, Reduction);
template void init_kmeans_parallel(Context&, const double*, std::int64_t, std::int64_t, std::int64_t, std::uint64_t,
                                   double, int, const double*, double*, const InitProgressFn&, Reduction);

}  // namespace skinny::kmeans::detail
