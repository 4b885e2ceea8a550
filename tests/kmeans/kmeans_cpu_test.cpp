// K-means on the CPU: the reference Lloyd on hand-checkable data, its tol rule and empty-cluster rule,
// and the adjusted Rand index.
#include <skinny/kmeans/kmeans.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace skinny::kmeans {
namespace {

TEST(AdjustedRandIndex, IdenticalAndRenamedLabelingsScoreOne) {
  const std::vector<std::int32_t> a{0, 0, 1, 1, 2, 2};
  EXPECT_DOUBLE_EQ(1.0, adjusted_rand_index(a, a));
  EXPECT_DOUBLE_EQ(1.0, adjusted_rand_index(a, {5, 5, 3, 3, 9, 9}));
}

TEST(AdjustedRandIndex, KnownValueOfASmallTable) {
  // scikit-learn: adjusted_rand_score([0, 0, 1, 1], [0, 0, 1, 2]) = 0.5714285714285715 (4/7).
  EXPECT_NEAR(4.0 / 7.0, adjusted_rand_index({0, 0, 1, 1}, {0, 0, 1, 2}), 1e-15);
  // Independent labelings score at or below 0: adjusted_rand_score([0, 0, 1, 1], [0, 1, 0, 1]) = -0.5.
  EXPECT_NEAR(-0.5, adjusted_rand_index({0, 0, 1, 1}, {0, 1, 0, 1}), 1e-15);
  EXPECT_THROW(adjusted_rand_index({0, 1}, {0}), std::invalid_argument);
}

TEST(ReferenceLloyd, TwoObviousClustersOnALine) {
  // Points 0, 1, 2 and 10, 11, 12 from centroids 0 and 1: iteration 1 gives 0 and 7.2, iteration 2
  // gives 1 and 11, where they stay.
  const std::vector<double> x{0, 1, 2, 10, 11, 12};
  Params p;
  p.k = 2;
  p.max_iter = 10;
  p.tol = 0;
  p.stop_when_stable = false;
  const Result<double> r = reference_fit(x, 6, 1, p, std::vector<double>{0, 1});
  EXPECT_EQ((std::vector<std::int32_t>{0, 0, 0, 1, 1, 1}), r.labels);
  EXPECT_DOUBLE_EQ(1.0, r.centroids[0]);
  EXPECT_DOUBLE_EQ(11.0, r.centroids[1]);
  EXPECT_DOUBLE_EQ(4.0, r.inertia);  // 1 + 0 + 1 for each cluster
  EXPECT_EQ(10, r.n_iter);           // tol = 0 without strict convergence runs exactly max_iter
  EXPECT_FALSE(r.converged);
}

TEST(ReferenceLloyd, StopsWhenNoLabelChangesEvenWithTolZero) {
  // Labels: {0, 1, 1, 1, 1, 1}, then {0, 0, 0, 1, 1, 1} twice: iteration 3 changes nothing.
  const std::vector<double> x{0, 1, 2, 10, 11, 12};
  Params p;
  p.k = 2;
  p.max_iter = 10;
  p.tol = 0;
  const Result<double> r = reference_fit(x, 6, 1, p, std::vector<double>{0, 1});
  EXPECT_TRUE(r.converged);
  EXPECT_EQ(3, r.n_iter);
  EXPECT_DOUBLE_EQ(11.0, r.centroids[1]);
}

TEST(ReferenceLloyd, WeightedMeansAndInertia) {
  // Weights 3, 1, 1 on 0, 1, 2 and 1, 1, 2 on 10, 11, 12: centroids (0 * 3 + 1 + 2) / 5 = 0.6 and
  // (10 + 11 + 24) / 4 = 11.25; inertia = sum of w (x - c)^2.
  const std::vector<double> x{0, 1, 2, 10, 11, 12};
  const std::vector<double> w{3, 1, 1, 1, 1, 2};
  Params p;
  p.k = 2;
  p.max_iter = 10;
  p.tol = 0;
  const Result<double> r = reference_fit(x, 6, 1, p, std::vector<double>{0, 12}, w);
  EXPECT_EQ((std::vector<std::int32_t>{0, 0, 0, 1, 1, 1}), r.labels);
  EXPECT_DOUBLE_EQ(0.6, r.centroids[0]);
  EXPECT_DOUBLE_EQ(11.25, r.centroids[1]);
  const double inertia = 3 * 0.36 + 0.16 + 1.96 + 1.5625 + 0.0625 + 2 * 0.5625;
  EXPECT_NEAR(inertia, r.inertia, 1e-12);
  EXPECT_THROW(reference_fit(x, 6, 1, p, std::vector<double>{0, 12}, std::vector<double>{1, 2}),
               std::invalid_argument);
}

TEST(ReferenceLloyd, IntegerWeightsEqualRepeatedPoints) {
  const std::vector<double> x{0.5, 1, 2.25, 7, 10, 11.5, 12, 30};
  const std::vector<double> w{2, 1, 3, 1, 2, 1, 4, 1};
  std::vector<double> repeated;
  for (std::size_t i = 0; i < x.size(); ++i) repeated.insert(repeated.end(), std::size_t(w[i]), x[i]);
  Params p;
  p.k = 3;
  p.max_iter = 20;
  const std::vector<double> init{0, 5, 20};
  const Result<double> a = reference_fit(x, 8, 1, p, init, w);
  const Result<double> b = reference_fit(repeated, std::int64_t(repeated.size()), 1, p, init);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(b.centroids[std::size_t(j)], a.centroids[std::size_t(j)], 1e-12);
  EXPECT_NEAR(b.inertia, a.inertia, 1e-12);
  EXPECT_EQ(b.n_iter, a.n_iter);
}

TEST(ReferenceLloyd, TolStopsOnceTheShiftIsSmall) {
  const std::vector<double> x{0, 1, 2, 10, 11, 12};
  Params p;
  p.k = 2;
  p.max_iter = 50;
  p.tol = 1e-4;  // the third iteration moves nothing: shift 0 <= tol x variance
  const Result<double> r = reference_fit(x, 6, 1, p, std::vector<double>{0, 1});
  EXPECT_TRUE(r.converged);
  EXPECT_EQ(3, r.n_iter);
}

TEST(ReferenceLloyd, EmptyClusterTakesTheFarthestPoint) {
  // Centroid 2 at 100 is nobody's nearest, so it takes the point farthest from its own centroid.
  const std::vector<double> x{0, 1, 2, 10, 11, 12};
  Params p;
  p.k = 3;
  p.max_iter = 1;
  p.tol = 0;
  const Result<double> r = reference_fit(x, 6, 1, p, std::vector<double>{0, 1, 100});
  // Iteration 1: labels 0, 1, 1, 1, 1, 1; point 5 (12, distance 121) moves to cluster 2.
  EXPECT_DOUBLE_EQ(0.0, r.centroids[0]);
  EXPECT_DOUBLE_EQ((1 + 2 + 10 + 11) / 4.0, r.centroids[1]);
  EXPECT_DOUBLE_EQ(12.0, r.centroids[2]);
}

}  // namespace
}  // namespace skinny::kmeans
