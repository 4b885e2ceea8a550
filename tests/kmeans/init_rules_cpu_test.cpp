// The host-side rules of the initialisation, without a GPU: which initialisation Init::automatic runs,
// k-means||'s per-point sampling draw (probability, expected count, determinism), the weighted draw of
// its large-k reduction (Efraimidis and Spirakis: the smallest key wins with probability w / sum w),
// and the choice between the two reductions.
#include <skinny/kmeans/kmeans.hpp>

#include "../../kmeans/src/init_parallel_rules.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace skinny::kmeans {
namespace {

TEST(InitChoice, AutomaticIsKmeansParallelForManyClustersOnly) {
  EXPECT_EQ(Init::automatic, Params{}.init) << "the default";
  EXPECT_EQ(Init::kmeans_plus_plus, resolve_init(Init::automatic, 1));
  EXPECT_EQ(Init::kmeans_plus_plus, resolve_init(Init::automatic, kParallelInitMinClusters - 1));
  EXPECT_EQ(Init::kmeans_parallel, resolve_init(Init::automatic, kParallelInitMinClusters));
  EXPECT_EQ(Init::kmeans_parallel, resolve_init(Init::automatic, 100000));
  // Every explicit choice stands, whatever k.
  for (const std::int64_t k : {std::int64_t(1), kParallelInitMinClusters, std::int64_t(100000)})
    for (const Init init : {Init::kmeans_plus_plus, Init::random, Init::given, Init::kmeans_parallel})
      EXPECT_EQ(init, resolve_init(init, k)) << to_string(init) << " k=" << k;
  EXPECT_EQ(std::string("k-means||"), to_string(Init::kmeans_parallel));
  EXPECT_EQ(std::string("k-means++"), to_string(Init::kmeans_plus_plus));
  EXPECT_EQ(std::string("auto"), to_string(Init::automatic));
}

TEST(InitChoice, KmeansParallelDefaults) {
  const Params p;
  EXPECT_EQ(2.0, p.init_oversampling);
  EXPECT_EQ(5, p.init_rounds);
  EXPECT_FALSE(p.init_progress);
}

using detail::round_key;
using detail::sample_probability;
using detail::sampled;
using detail::uniform_at;

TEST(KmeansParallelSampling, ProbabilityIsLTimesTheShareOfThePotentialCappedAtOne) {
  EXPECT_DOUBLE_EQ(0.2, sample_probability(1.0, 20.0, 100.0));
  EXPECT_DOUBLE_EQ(0.4, sample_probability(2.0, 20.0, 100.0));  // proportional to d2 below the cap
  EXPECT_DOUBLE_EQ(1.0, sample_probability(10.0, 20.0, 100.0));  // l d2 / phi = 2
  EXPECT_DOUBLE_EQ(0.0, sample_probability(0.0, 20.0, 100.0));   // a point on a candidate
  EXPECT_DOUBLE_EQ(0.0, sample_probability(1.0, 20.0, 0.0));     // every point on a candidate
  EXPECT_DOUBLE_EQ(0.0, sample_probability(NAN, 20.0, 100.0));
}

TEST(KmeansParallelSampling, UniformDrawsCoverTheUnitInterval) {
  const std::uint64_t key = round_key(42, 1);
  double sum = 0, lo = 1, hi = 0;
  const int count = 100000;
  for (int i = 0; i < count; ++i) {
    const double u = uniform_at(key, std::uint64_t(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_NEAR(0.5, sum / count, 0.005);  // standard error 0.0009
  EXPECT_LT(lo, 1e-3);
  EXPECT_GT(hi, 1 - 1e-3);
}

/// n points of equal d2: each is drawn with probability l / n, so about l are drawn; the same key draws
/// the same points, and another round's key other points.
TEST(KmeansParallelSampling, DrawsAboutLPointsAndTheSameOnesForTheSameSeed) {
  const std::int64_t n = 200000;
  const double l = 1000, phi = double(n);
  auto draw = [&](std::uint64_t key) {
    std::vector<std::int64_t> picked;
    for (std::int64_t i = 0; i < n; ++i)
      if (sampled(key, std::uint64_t(i), 1.0, l, phi)) picked.push_back(i);
    return picked;
  };
  const std::vector<std::int64_t> a = draw(round_key(7, 1));
  EXPECT_NEAR(l, double(a.size()), 5 * std::sqrt(l)) << "binomial(n, l / n): standard deviation ~ sqrt(l)";
  EXPECT_EQ(a, draw(round_key(7, 1)));
  const std::vector<std::int64_t> b = draw(round_key(7, 2)), c = draw(round_key(8, 1));
  for (const auto& other : {b, c}) {
    std::int64_t common = 0;
    for (std::size_t i = 0, j = 0; i < a.size() && j < other.size();) {
      if (a[i] == other[j]) ++common, ++i, ++j;
      else if (a[i] < other[j]) ++i;
      else ++j;
    }
    EXPECT_LT(common, 30) << "independent draws share about l^2 / n = 5 points";
  }
}

TEST(KmeansParallelSampling, APointHoldingMostOfThePotentialIsAlwaysDrawn) {
  // One point with half of phi: l / 2 >= 1, so it is drawn in every round; points at 0 never are.
  for (int round = 1; round <= 50; ++round) {
    EXPECT_TRUE(sampled(round_key(3, round), 17, 500.0, 4.0, 1000.0)) << "round " << round;
    EXPECT_FALSE(sampled(round_key(3, round), 18, 0.0, 4.0, 1000.0)) << "round " << round;
  }
}

using detail::weighted_sample_key;

TEST(KmeansParallelReduction, WeightedKeysDrawInProportionToWeight) {
  EXPECT_TRUE(std::isinf(weighted_sample_key(1, 5, 0)));
  EXPECT_GT(weighted_sample_key(1, 5, 0), 0);
  // The same draw u keys lower with a larger weight.
  EXPECT_LT(weighted_sample_key(1, 5, 4), weighted_sample_key(1, 5, 1));
  EXPECT_DOUBLE_EQ(weighted_sample_key(1, 5, 1) / 4, weighted_sample_key(1, 5, 4));
  // Three candidates of weights 1, 2, 7 drawn over and over (each trial its own indices): the smallest
  // key is each one's with probability 0.1, 0.2, 0.7.
  const std::int64_t weights[3] = {1, 2, 7};
  const int trials = 30000;
  int wins[3] = {0, 0, 0};
  const std::uint64_t key = splitmix64(99);
  for (int t = 0; t < trials; ++t) {
    int best = 0;
    double best_key = HUGE_VAL;
    for (int j = 0; j < 3; ++j) {
      const double v = weighted_sample_key(key, std::uint64_t(3 * t + j), weights[j]);
      ASSERT_TRUE(std::isfinite(v) && v >= 0);
      if (v < best_key) best_key = v, best = j;
    }
    ++wins[best];
  }
  const double expected[3] = {0.1, 0.2, 0.7};
  for (int j = 0; j < 3; ++j)  // standard errors 0.0017 to 0.0026
    EXPECT_NEAR(expected[j], double(wins[j]) / trials, 0.012) << "weight " << weights[j];
}

TEST(KmeansParallelReduction, GreedyUnlessTheCandidatesAreTooMany) {
  // 1M x 128, k = 1024: about 10k candidates, greedy k-means++ over them.
  EXPECT_TRUE(detail::greedy_reduction(1024, 10241, 128));
  EXPECT_TRUE(detail::greedy_reduction(2000, 20000, 9));
  // k = 100000 on 1M x 64: candidates about as many as the points, the weighted sample.
  EXPECT_FALSE(detail::greedy_reduction(100000, 900000, 64));
  EXPECT_EQ(2, detail::greedy_trials(1));
  EXPECT_EQ(8, detail::greedy_trials(1024));  // 2 + floor(ln 1024 = 6.93), scikit-learn's count
  EXPECT_EQ(13, detail::greedy_trials(100000));
}

}  // namespace
}  // namespace skinny::kmeans
