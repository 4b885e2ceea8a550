// Initial centroids: k-means++ (D^2 sampling), k distinct random points, or the caller's.
#include "init.hpp"

#include "detail.hpp"

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/splitmix64.hpp>

#include <thrust/binary_search.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/scan.h>

#include <cmath>
#include <unordered_map>
#include <vector>

namespace skinny::kmeans::detail {
namespace {

/// Uniform double in [0, 1) from the generator state (advances it).
double uniform(std::uint64_t& state) { return double(splitmix64(state++) >> 11) * 0x1.0p-53; }

template <class T>
void copy_row(T* dst, const T* x, std::int64_t row, std::int64_t d, cudaStream_t stream) {
  SKINNY_CUDA_TRY(cudaMemcpyAsync(dst, x + row * d, static_cast<std::size_t>(d) * sizeof(T), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

std::vector<std::int64_t> random_rows(std::int64_t n, std::int64_t k, std::uint64_t seed) {
  // k draws of a Fisher-Yates shuffle, the swaps kept in a map: O(k) for any n.
  std::uint64_t state = splitmix64(seed ^ 0x52414e444f4dull);
  std::unordered_map<std::int64_t, std::int64_t> swapped;
  auto at = [&](std::int64_t i) { auto it = swapped.find(i); return it == swapped.end() ? i : it->second; };
  std::vector<std::int64_t> picks(static_cast<std::size_t>(k));
  for (std::int64_t i = 0; i < k; ++i) {
    const std::int64_t j = i + static_cast<std::int64_t>(splitmix64(state++) % static_cast<std::uint64_t>(n - i));
    picks[static_cast<std::size_t>(i)] = at(j);
    swapped[j] = at(i);
  }
  return picks;
}

template <class T>
void init_random(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k, std::uint64_t seed, T* c) {
  const std::vector<std::int64_t> picks = random_rows(n, k, seed);
  for (std::int64_t i = 0; i < k; ++i) copy_row(c + i * d, x, picks[static_cast<std::size_t>(i)], d, ctx.stream());
}

template <class T>
void init_kmeans_plus_plus(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                           std::uint64_t seed, const T* xnorm, T* c, const InitProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  const cudaStream_t stream = ctx.stream();
  std::uint64_t state = splitmix64(seed ^ 0x4b4d45414e53ull);
  // Greedy k-means++ (scikit-learn's): 2 + ln k candidates per step, keep the one that lowers the
  // potential most. Plain D^2 sampling often seeds two centres in one blob in high dimension: there the
  // chosen blobs keep much of the D^2 mass (2d per point against ~70d for an unchosen blob).
  const int trials = 2 + static_cast<int>(std::log(double(k)));
  DeviceBuffer<double> d2(static_cast<std::size_t>(n)), prefix(static_cast<std::size_t>(n));
  DeviceBuffer<T> cand(static_cast<std::size_t>(trials * d)), g(static_cast<std::size_t>(n * trials));
  DeviceBuffer<double> targets(static_cast<std::size_t>(trials));
  DeviceBuffer<std::int64_t> found(static_cast<std::size_t>(trials));

  std::int64_t first = static_cast<std::int64_t>(splitmix64(state++) % static_cast<std::uint64_t>(n));
  copy_row(c, x, first, d, stream);
  gemm::gemm(ctx, {gemm::row_major<const T>(x, n, d), gemm::col_major<const T>(c, d, 1), gemm::row_major(g.data(), n, 1)});
  T cnorm{};
  SKINNY_CUDA_TRY(cudaMemcpyAsync(&cnorm, xnorm + first, sizeof(T), cudaMemcpyDeviceToHost, stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  min_distance_update(d2.data(), g.data(), 1, xnorm, cnorm, n, true, stream);

  std::vector<std::int64_t> picks(static_cast<std::size_t>(trials));
  std::vector<double> host_targets(static_cast<std::size_t>(trials));
  std::vector<T> cnorms(static_cast<std::size_t>(trials));
  for (std::int64_t i = 1; i < k; ++i) {
    // Candidates drawn with probability D^2 / sum D^2: a scan, then binary searches.
    thrust::inclusive_scan(thrust::cuda::par_nosync.on(stream), d2.data(), d2.data() + n, prefix.data());
    double total = 0;
    SKINNY_CUDA_TRY(cudaMemcpyAsync(&total, prefix.data() + n - 1, sizeof total, cudaMemcpyDeviceToHost, stream));
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
    for (auto& t : host_targets) t = uniform(state) * total;
    if (total > 0) {
      SKINNY_CUDA_TRY(cudaMemcpyAsync(targets.data(), host_targets.data(), host_targets.size() * sizeof(double),
                                      cudaMemcpyHostToDevice, stream));
      const double* p = prefix.data();
      const double* t = targets.data();
      std::int64_t* out = found.data();
      thrust::for_each_n(thrust::cuda::par_nosync.on(stream), thrust::counting_iterator<int>(0), trials,
                         [=] __device__(int l) {
                           const double* it = thrust::upper_bound(thrust::seq, p, p + n, t[l]);
                           out[l] = it - p < n ? it - p : n - 1;
                         });
      SKINNY_CHECK_LAUNCH();
      SKINNY_CUDA_TRY(cudaMemcpyAsync(picks.data(), found.data(), picks.size() * sizeof(std::int64_t),
                                      cudaMemcpyDeviceToHost, stream));
      SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
    } else {  // every point sits on a chosen centre: any points will do
      for (auto& pick : picks) pick = static_cast<std::int64_t>(splitmix64(state++) % static_cast<std::uint64_t>(n));
    }
    // Distances of every point to all candidates in one pass over X (a skinny GEMM), then each
    // candidate's potential; ties go to the first candidate.
    for (int l = 0; l < trials; ++l) {
      copy_row(cand.data() + l * d, x, picks[static_cast<std::size_t>(l)], d, stream);
      SKINNY_CUDA_TRY(cudaMemcpyAsync(&cnorms[static_cast<std::size_t>(l)], xnorm + picks[static_cast<std::size_t>(l)],
                                      sizeof(T), cudaMemcpyDeviceToHost, stream));
    }
    gemm::gemm(ctx, {gemm::row_major<const T>(x, n, d), gemm::col_major<const T>(cand.data(), d, trials),
                     gemm::row_major(g.data(), n, trials)});
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
    int best = 0;
    double best_potential = 0;
    for (int l = 0; l < trials; ++l) {
      const double potential =
          candidate_potential(d2.data(), g.data() + l, trials, xnorm, cnorms[static_cast<std::size_t>(l)], n, stream);
      if (l == 0 || potential < best_potential) {
        best = l;
        best_potential = potential;
      }
    }
    copy_row(c + i * d, x, picks[static_cast<std::size_t>(best)], d, stream);
    min_distance_update(d2.data(), g.data() + best, trials, xnorm, cnorms[static_cast<std::size_t>(best)], n, false,
                        stream);
    if (progress && ((i + 1) % kInitProgressEvery == 0 || i + 1 == k)) {
      SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
      progress(InitProgress{"k-means++", i + 1, k, 0, ms_since(start)});
    }
  }
}

template void init_random(Context&, const float*, std::int64_t, std::int64_t, std::int64_t, std::uint64_t, float*);
template void init_random(Context&, const double*, std::int64_t, std::int64_t, std::int64_t, std::uint64_t, double*);
template void init_kmeans_plus_plus(Context&, const float*, std::int64_t, std::int64_t, std::int64_t, std::uint64_t,
                                    const float*, float*, const InitProgressFn&);
template void init_kmeans_plus_plus(Context&, const double*, std::int64_t, std::int64_t, std::int64_t, std::uint64_t,
                                    const double*, double*, const InitProgressFn&);

}  // namespace skinny::kmeans::detail
