// Initial centroids on the device (c: k x d row-major); deterministic from the seed.
#pragma once

#include <skinny/gemm/context.hpp>
#include <skinny/kmeans/kmeans.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace skinny::kmeans::detail {

struct HalfRows;

using InitProgressFn = std::function<void(const InitProgress&)>;

/// Centres chosen between two progress reports of k-means++ and of the k-means|| reduction.
inline constexpr std::int64_t kInitProgressEvery = 256;

/// Host milliseconds since `start` (the progress reports' clock).
inline double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

/// The rows init_random takes: k distinct row indices of [0, n), drawn from the seed in draw order (a
/// pure function of (n, k, seed), so drivers that hold X elsewhere, fit_host and fit_distributed, pick
/// the same rows).
std::vector<std::int64_t> random_rows(std::int64_t n, std::int64_t k, std::uint64_t seed);

/// k distinct points of x drawn uniformly (the rows random_rows gives).
template <class T>
void init_random(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k, std::uint64_t seed, T* c);

/// k-means++: the first centre uniform, each next one with probability proportional to its squared
/// distance to the nearest centre chosen so far. `xnorm` holds ||x_i||^2. `progress` (may be empty)
/// hears every kInitProgressEvery centres and the last.
template <class T>
void init_kmeans_plus_plus(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                           std::uint64_t seed, const T* xnorm, T* c, const InitProgressFn& progress = {});

/// How k-means|| reduces its weighted candidates to k: automatic decides by greedy_reduction
/// (init_parallel_rules.hpp); the others force one way (for the tests).
enum class Reduction { automatic, greedy, weighted_sample };

/// k-means|| (Bahmani et al. 2012), init_parallel.cu: the first centre uniform; `rounds` rounds each
/// sampling every point independently with probability min(1, l d2 / phi), l = oversampling x k; the
/// candidates weighted by the points nearest to each; reduced to k (greedy weighted k-means++, or a
/// weighted sample for very many), or topped up with distinct random points when fewer than k came out.
/// `xnorm` holds ||x_i||^2. `progress` (may be empty) hears every round and every kInitProgressEvery
/// centres of the reduction. `half`: a half copy of float x the sampling rounds may read (half_rows.hpp;
/// without one they make their own where they can).
template <class T>
void init_kmeans_parallel(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                          std::uint64_t seed, double oversampling, int rounds, const T* xnorm, T* c,
                          const InitProgressFn& progress = {}, Reduction reduction = Reduction::automatic,
                          const HalfRows* half = nullptr);

}  // namespace skinny::kmeans::detail
