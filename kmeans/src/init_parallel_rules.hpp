// The rules of k-means|| that are plain arithmetic, for host and device alike (init_parallel.cu uses
// them in its kernels; the CPU tests check them): the per-point sampling draw, the weighted draw of
// the large-k reduction, and the choice of reduction.
#pragma once

#include <skinny/gemm/splitmix64.hpp>

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define SKINNY_RULE __host__ __device__ inline
#else
#define SKINNY_RULE inline
#endif

namespace skinny::kmeans::detail {

/// The key of sampling round `round` (1-based): each round draws from its own stream of the seed.
SKINNY_RULE std::uint64_t round_key(std::uint64_t seed, int round) {
  return splitmix64(seed ^ 0x4b4d7c7c53414d50ull) + static_cast<std::uint64_t>(round) * 0x9E3779B97F4A7C15ull;
}

/// Uniform double in [0, 1), element i of the stream `key` (counter-based: a pure function of both,
/// whichever thread draws it).
SKINNY_RULE double uniform_at(std::uint64_t key, std::uint64_t i) {
  return static_cast<double>(splitmix64(key ^ splitmix64(i)) >> 11) * 0x1.0p-53;
}

/// Bahmani et al.'s probability of sampling a point at squared distance d2 from the candidates so far:
/// min(1, l d2 / phi), phi the sum of all d2, l the points wanted per round. 0 when phi is not positive
/// (every point sits on a candidate).
SKINNY_RULE double sample_probability(double d2, double l, double phi) {
  if (!(phi > 0) || !(d2 > 0)) return 0.0;
  const double p = l * d2 / phi;
  return p < 1.0 ? p : 1.0;
}

/// Whether point i joins the candidates in the round with key `key`.
SKINNY_RULE bool sampled(std::uint64_t key, std::uint64_t i, double d2, double l, double phi) {
  return uniform_at(key, i) < sample_probability(d2, l, phi);
}

/// Weighted sampling without replacement (Efraimidis and Spirakis): the m candidates with the smallest
/// keys -ln(u_j) / w_j are a sample of m drawn one after another with probability proportional to w.
/// Weight 0 keys to +infinity (taken last, only when nothing else is left).
SKINNY_RULE double weighted_sample_key(std::uint64_t key, std::uint64_t j, std::int64_t weight) {
  if (weight <= 0) return HUGE_VAL;  // +infinity (a macro: usable in device code as it is)
  const double u = 1.0 - uniform_at(key, j);  // (0, 1]: the log is finite
  return -std::log(u) / static_cast<double>(weight);
}

/// Up to this many distance terms (k x candidates x d), the candidates are reduced to k by weighted
/// greedy k-means++ on the GPU: k steps, each a pass over the candidates for every trial. Above it the
/// candidates are about as many as the points (k = 100000 on 1M points: ~1M candidates, ~10^13 terms,
/// minutes), and a weighted sample without replacement (one sort) replaces it. A rough budget (at 1M x
/// 128, k = 1024, ~10k candidates: 2^30 terms, greedy); where the two should meet is to be measured on
/// the H100.
inline constexpr double kGreedyReductionMaxTerms = 137438953472.0;  // 2^37

/// Whether k of m weighted candidates in d dimensions are chosen by greedy k-means++ (true) or by the
/// weighted sample (false).
inline bool greedy_reduction(std::int64_t k, std::int64_t m, std::int64_t d) {
  return double(k) * double(m) * double(d) <= kGreedyReductionMaxTerms;
}

/// Candidates tried per step of greedy k-means++ (scikit-learn's 2 + ln k), at most kMaxTrials.
inline constexpr int kMaxTrials = 32;
inline int greedy_trials(std::int64_t k) {
  const int t = 2 + static_cast<int>(std::log(double(k)));
  return t < kMaxTrials ? t : kMaxTrials;
}

}  // namespace skinny::kmeans::detail

#undef SKINNY_RULE
