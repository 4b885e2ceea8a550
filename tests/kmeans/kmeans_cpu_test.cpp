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
  const Result<double> r = reference_fit(x, 6, 1, p, std::vector<double>{0, 1});
  EXPECT_EQ((std::vector<std::int32_t>{0, 0, 0, 1, 1, 1}), r.labels);
  EXPECT_DOUBLE_EQ(1.0, r.centroids[0]);
  EXPECT_DOUBLE_EQ(11.0, r.centroids[1]);
  EXPECT_DOUBLE_EQ(4.0, r.inertia);  // 1 + 0 + 1 for each cluster
  EXPECT_EQ(10, r.n_iter);           // tol = 0 runs exactly max_iter
  EXPECT_FALSE(r.converged);
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
