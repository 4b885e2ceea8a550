// detail::narrow_nearest (rows of 1 to 4 values, any k), both modes: labels and distances against a double
// argmin on the host, float, double and 16-bit points, odd shapes (one point, one centre, centres over several
// of the kernel's tiles), outputs poisoned before the run. On small integer coordinates every distance is
// exact in either form, ties are common, and the labels must be the host's exactly (the lowest index among
// equal distances); on random reals a label may name another centre only within the rounding of the mode's
// distance: a sum of d squared differences (exact), or ||c||^2 - 2 x.c (fast, rounding of the norms).
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/kmeans/kmeans.hpp>

#include "../../kmeans/src/detail.hpp"
#include "support/gpu_fixture.hpp"
#include "support/random_matrix.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace skinny::kmeans {
namespace {

using testing::shared_context;

class NarrowNearestGpu : public testing::GpuTest {};

template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, __half>) return "half";
  else return "bfloat16";
}

/// Runs narrow_nearest in `math` on the n x d points `xs` (the values T holds) and the k x d centres `c`, and
/// checks every label against a double argmin: equal to it where `exact` (integer data), else naming a
/// centre whose distance exceeds the best by at most the rounding of the kernel's distances; each distance
/// within that rounding of its label's exact distance.
template <class T>
void check(const std::vector<double>& xs, const std::vector<double>& cs, std::int64_t n, std::int64_t d,
           std::int64_t k, gemm::Math math, bool exact) {
  using C = compute_t<T>;
  const bool fast = math == gemm::Math::fast;
  const std::string where = type_name<T>() + (fast ? " fast" : " exact") + " n=" + std::to_string(n) +
                            " d=" + std::to_string(d) + " k=" + std::to_string(k) + (exact ? " (integers)" : "");
  std::vector<T> x(xs.size());
  std::vector<C> c(cs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) x[i] = static_cast<T>(static_cast<float>(xs[i]));
  for (std::size_t i = 0; i < cs.size(); ++i) c[i] = static_cast<C>(cs[i]);
  const DeviceBuffer<T> dx(x);
  const DeviceBuffer<C> dc(c);
  DeviceBuffer<std::int32_t> labels(std::vector<std::int32_t>(static_cast<std::size_t>(n), -7));
  DeviceBuffer<C> dist(std::vector<C>(static_cast<std::size_t>(n), std::numeric_limits<C>::quiet_NaN()));
  detail::narrow_nearest(dx.data(), n, d, dc.data(), k, math, labels.data(), dist.data(), shared_context().stream());
  const std::vector<std::int32_t> got = labels.to_host();
  const std::vector<C> got_dist = dist.to_host();
  // Exact mode: a sum of d squared differences in C, each difference, square and addition rounding once
  // (relative to the distance). Fast mode: ||c||^2 (d terms), d multiply-adds of x.c and ||x||^2, each
  // rounding relative to the squared norms.
  const double u = std::ldexp(1.0, -std::numeric_limits<C>::digits);
  const double rounding = 2.0 * double(d + 2) * u;
  double max_c_sq = 0;
  for (std::int64_t j = 0; j < k; ++j) {
    double s = 0;
    for (std::int64_t e = 0; e < d; ++e) s += double(c[j * d + e]) * double(c[j * d + e]);
    max_c_sq = std::max(max_c_sq, s);
  }
  std::int64_t other = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(got[i] >= 0 && got[i] < k) << where << ": point " << i << " label " << got[i];
    double x_sq = 0;
    for (std::int64_t e = 0; e < d; ++e) x_sq += double(static_cast<float>(x[i * d + e])) * double(static_cast<float>(x[i * d + e]));
    double best = INFINITY, mine = 0;
    std::int64_t best_j = -1;
    for (std::int64_t j = 0; j < k; ++j) {
      double s = 0;
      for (std::int64_t e = 0; e < d; ++e) {
        // The values the kernel sees: T's, widened exactly, and C's centres.
        const double diff = double(static_cast<float>(x[i * d + e])) - double(c[j * d + e]);
        s += diff * diff;
      }
      if (s < best) best = s, best_j = j;
      if (j == got[i]) mine = s;
    }
    if (exact) {
      ASSERT_EQ(best_j, got[i]) << where << ": point " << i;
      ASSERT_EQ(best, double(got_dist[i])) << where << ": point " << i;
    } else {
      const double slack = rounding * (fast ? 4 * (x_sq + max_c_sq) : mine);
      ASSERT_LE(mine - best, 2 * slack) << where << ": point " << i << " label " << got[i] << ", best " << best_j;
      ASSERT_NEAR(mine, double(got_dist[i]), slack) << where << ": point " << i;
      other += got[i] != best_j;
    }
  }
  // The differences' rounding is relative to the distances, so few labels differ; the expanded form's is
  // relative to the norms, and on 1000 or more random centres in one or two dimensions a few percent of
  // points have a near tie within it (each checked above).
  if (!fast) EXPECT_LE(other, n / 100 + 1) << where << ": labels other than the double argmin's (near ties only)";
}

template <class T>
void check_random(std::int64_t n, std::int64_t d, std::int64_t k, std::uint32_t seed) {
  const std::vector<float> xs = testing::random_nonzero<float>(static_cast<std::size_t>(n * d), seed);
  const std::vector<float> cs = testing::random_nonzero<float>(static_cast<std::size_t>(k * d), seed + 1);
  for (const gemm::Math math : {gemm::Math::exact, gemm::Math::fast})
    check<T>(std::vector<double>(xs.begin(), xs.end()), std::vector<double>(cs.begin(), cs.end()), n, d, k, math,
             false);
}

/// Coordinates in {-4, ..., 4}: exact in every type, distances exact in float in either form, many ties.
template <class T>
void check_integers(std::int64_t n, std::int64_t d, std::int64_t k, std::uint64_t seed) {
  std::uint64_t state = seed;
  const auto small = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return double(static_cast<int>((state >> 33) % 9) - 4);
  };
  std::vector<double> xs(static_cast<std::size_t>(n * d)), cs(static_cast<std::size_t>(k * d));
  for (double& v : xs) v = small();
  for (double& v : cs) v = small();
  for (const gemm::Math math : {gemm::Math::exact, gemm::Math::fast}) check<T>(xs, cs, n, d, k, math, true);
}

template <class T>
void check_shapes() {
  struct Shape {
    std::int64_t n, k;
  };
  // One point, one centre, fewer centres than a tile, several tiles and a tail (1024 a tile), and enough
  // points for four a thread on any GPU.
  const Shape shapes[] = {{1, 1}, {7, 2}, {17, 1000}, {1000, 17}, {3001, 1025}, {1009, 2049}, {300007, 33}};
  for (std::int64_t d = 1; d <= detail::kNarrowMaxDims; ++d)
    for (const Shape s : shapes) {
      check_random<T>(s.n, d, s.k, static_cast<std::uint32_t>(11 * d + s.k));
      check_integers<T>(s.n, d, s.k, static_cast<std::uint64_t>(5 * d + s.n));
    }
}

TEST_F(NarrowNearestGpu, FloatMatchesADoubleArgmin) { check_shapes<float>(); }
TEST_F(NarrowNearestGpu, DoubleMatchesADoubleArgmin) { check_shapes<double>(); }
TEST_F(NarrowNearestGpu, HalfMatchesADoubleArgmin) { check_shapes<__half>(); }
TEST_F(NarrowNearestGpu, Bfloat16MatchesADoubleArgmin) { check_shapes<__nv_bfloat16>(); }

TEST_F(NarrowNearestGpu, RefusesRowsItDoesNotTake) {
  DeviceBuffer<float> x(8), c(8), dist(1);
  DeviceBuffer<std::int32_t> labels(1);
  EXPECT_THROW(detail::narrow_nearest(x.data(), 1, detail::kNarrowMaxDims + 1, c.data(), 1, gemm::Math::exact,
                                      labels.data(), dist.data(), shared_context().stream()),
               std::invalid_argument);
  EXPECT_THROW(detail::narrow_nearest(x.data(), 1, 2, c.data(), 0, gemm::Math::fast, labels.data(), dist.data(),
                                      shared_context().stream()),
               std::invalid_argument);
}

/// fit takes it for rows of up to four values with Algo::automatic, in exact mode for any k and in fast mode
/// for d <= 3 or k <= 1024, not with a backend named (kmeans_gpu_test checks fit's labels on narrow rows
/// against the CPU reference).
TEST_F(NarrowNearestGpu, FitTakesItForNarrowRows) {
  Context& ctx = shared_context();
  const std::int64_t n = 5003;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * 5));
  DeviceBuffer<double> xd(static_cast<std::size_t>(n * 4));
  make_blobs<float>(ctx, x.data(), n, 5, 40, 3);
  for (const gemm::Math math : {gemm::Math::exact, gemm::Math::fast}) {
    for (const std::int64_t k : {1, 15, 16, 1000})
      EXPECT_EQ("narrow rows", distance_method<float>(ctx, x.data(), n, 2, k, gemm::Algo::automatic, math)) << k;
    EXPECT_EQ("narrow rows", distance_method<double>(ctx, xd.data(), n, 4, 300, gemm::Algo::automatic, math));
    EXPECT_NE("narrow rows", distance_method<float>(ctx, x.data(), n, 5, 1000, gemm::Algo::automatic, math));
    EXPECT_NE("narrow rows", distance_method<float>(ctx, x.data(), n, 2, 1000, gemm::Algo::cublas, math));
  }
  EXPECT_EQ("narrow rows", distance_method<float>(ctx, x.data(), n, 4, 2000, gemm::Algo::automatic));
  EXPECT_EQ("narrow rows",
            distance_method<float>(ctx, x.data(), n, 3, 2000, gemm::Algo::automatic, gemm::Math::fast));
  EXPECT_NE("narrow rows",
            distance_method<float>(ctx, x.data(), n, 4, 2000, gemm::Algo::automatic, gemm::Math::fast));
}

}  // namespace
}  // namespace skinny::kmeans
