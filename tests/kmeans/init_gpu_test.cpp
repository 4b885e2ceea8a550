// k-means|| on the GPU: fit from it recovers blobs in float and double at odd shapes (through
// gemm::nearest and through the GEMM fallback), also with values outside the range of the sampling rounds'
// half copy of X (TF32 on X or on a padded copy), rows padded to 16-byte copies sample as rows with a zero
// column appended; the same seed gives the same centroids, k = n and too few candidates (the top-up) give k
// distinct points, its potential is close to k-means++'s, both reductions run at large k, Init::automatic
// keeps k-means++ for few clusters, progress is reported, and bad parameters are refused.
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/kmeans/kmeans.hpp>

#include "../../kmeans/src/detail.hpp"
#include "../../kmeans/src/init.hpp"
#include "support/gpu_fixture.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace skinny::kmeans {
namespace {

using testing::shared_context;

class KmeansParallelGpu : public testing::GpuTest {};

/// Sum over the points of the squared distance to the nearest centroid, in double on the host.
template <class T>
double potential(const std::vector<T>& x, std::int64_t n, std::int64_t d, const std::vector<T>& c) {
  const std::int64_t k = static_cast<std::int64_t>(c.size()) / d;
  double total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < k; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < d; ++p) {
        const double diff = double(x[std::size_t(i * d + p)]) - double(c[std::size_t(j * d + p)]);
        s += diff * diff;
      }
      best = std::min(best, s);
    }
    total += best;
  }
  return total;
}

/// Every centroid is a row of X (bit for bit: the initialisation copies rows), and no row twice.
template <class T>
::testing::AssertionResult distinct_rows_of_x(const std::vector<T>& x, std::int64_t n, std::int64_t d,
                                              const std::vector<T>& c) {
  std::set<std::string> rows, seen;
  const std::size_t bytes = static_cast<std::size_t>(d) * sizeof(T);
  for (std::int64_t i = 0; i < n; ++i) rows.emplace(reinterpret_cast<const char*>(x.data() + i * d), bytes);
  const std::int64_t k = static_cast<std::int64_t>(c.size()) / d;
  for (std::int64_t j = 0; j < k; ++j) {
    const std::string row(reinterpret_cast<const char*>(c.data() + j * d), bytes);
    if (!rows.count(row)) return ::testing::AssertionFailure() << "centroid " << j << " is not a row of X";
    if (!seen.insert(row).second) return ::testing::AssertionFailure() << "centroid " << j << " repeats an earlier one";
  }
  return ::testing::AssertionSuccess();
}

/// The initial centroids of k-means|| (or k-means++) for X on the device, through the library's own code.
template <class T>
std::vector<T> initial(const DeviceBuffer<T>& x, std::int64_t n, std::int64_t d, std::int64_t k, std::uint64_t seed,
                       Init init, detail::Reduction reduction = detail::Reduction::automatic,
                       double oversampling = 2.0, int rounds = 5, const detail::InitProgressFn& progress = {}) {
  Context& ctx = shared_context();
  DeviceBuffer<T> xnorm(static_cast<std::size_t>(n)), c(static_cast<std::size_t>(k * d));
  detail::row_sq_norms(x.data(), n, d, xnorm.data(), ctx.stream());
  if (init == Init::kmeans_plus_plus)
    detail::init_kmeans_plus_plus(ctx, x.data(), n, d, k, seed, xnorm.data(), c.data());
  else
    detail::init_kmeans_parallel(ctx, x.data(), n, d, k, seed, oversampling, rounds, xnorm.data(), c.data(), progress,
                                 reduction);
  return c.to_host();
}

/// Fit from k-means|| on blobs: the true blobs come back (ARI = 1).
template <class T>
void recovers_blobs(std::int64_t n, std::int64_t d, int k, std::uint64_t seed) {
  Context& ctx = shared_context();
  DeviceBuffer<T> x(static_cast<std::size_t>(n * d));
  const Blobs<T> truth = make_blobs<T>(ctx, x.data(), n, d, k, seed, 0.5, 10.0);
  Params p;
  p.k = k;
  p.seed = seed + 1;
  p.init = Init::kmeans_parallel;
  const Result<T> r = fit<T>(ctx, x.data(), n, d, p);
  EXPECT_DOUBLE_EQ(1.0, adjusted_rand_index(truth.labels, r.labels))
      << "n=" << n << " d=" << d << " k=" << k << " " << (sizeof(T) == 4 ? "float" : "double");
}

TEST_F(KmeansParallelGpu, FitFromItRecoversBlobs) {
  // Float through gemm::nearest, the sampling rounds on a half copy of X: rows padded to 16-byte copies
  // (d = 7 and 33) or whole (d = 16 and 128). Double always through the GEMM.
  for (const auto [n, d, k] : {std::tuple<std::int64_t, std::int64_t, int>{1000, 7, 17}, {2003, 33, 64},
                               {1027, 128, 16}, {3001, 16, 100}}) {
    recovers_blobs<float>(n, d, k, 5);
    recovers_blobs<double>(n, d, k, 5);
  }
}

/// Data whose largest |x| is outside the half copy's range (~10^5 above it, ~10^-6 below it, among half's
/// subnormals): the sampling rounds read X itself in TF32 (d = 16) or a float copy with rows padded to
/// 16-byte copies (d = 7), and the blobs still come back.
TEST_F(KmeansParallelGpu, ValuesOutsideTheHalfCopysRangeSampleInTf32) {
  Context& ctx = shared_context();
  const std::int64_t n = 3001;
  const int k = 20;
  for (const auto [d, scale] : {std::tuple<std::int64_t, double>{16, 1e4}, {16, 1e-7}, {7, 1e4}, {7, 1e-7}}) {
    DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
    const Blobs<float> truth = make_blobs<float>(ctx, x.data(), n, d, k, 21, 0.2 * scale, 10.0 * scale);
    Params p;
    p.k = k;
    p.seed = 3;
    p.init = Init::kmeans_parallel;
    EXPECT_DOUBLE_EQ(1.0, adjusted_rand_index(truth.labels, fit<float>(ctx, x.data(), n, d, p).labels))
        << "d " << d << ", scale " << scale;
  }
}

/// Rows that are not whole 16-byte copies (d = 7) sample on a copy padded with zeros: the centres are
/// the bits those of the same points with a zero column appended give (d = 8, whole rows, no padding),
/// through the half copy (values within its range) and through TF32 on a padded float copy (values above
/// it): the padding changes nothing.
TEST_F(KmeansParallelGpu, PaddedRowsSampleAsRowsWithAZeroColumnAppended) {
  Context& ctx = shared_context();
  const std::int64_t n = 4000, d = 7, k = 64;
  for (const double scale : {1.0, 1e5}) {
    DeviceBuffer<float> narrow(static_cast<std::size_t>(n * d));
    make_blobs<float>(ctx, narrow.data(), n, d, 40, 9, 0.5 * scale, 10.0 * scale);
    const std::vector<float> rows = narrow.to_host();
    std::vector<float> appended(static_cast<std::size_t>(n * (d + 1)), 0.0f);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t p = 0; p < d; ++p) appended[std::size_t(i * (d + 1) + p)] = rows[std::size_t(i * d + p)];
    const DeviceBuffer<float> wide(appended);
    const std::vector<float> a = initial(narrow, n, d, k, 5, Init::kmeans_parallel);
    const std::vector<float> b = initial(wide, n, d + 1, k, 5, Init::kmeans_parallel);
    std::vector<float> b_narrowed;
    for (std::int64_t j = 0; j < k; ++j) {
      EXPECT_EQ(0.0f, b[std::size_t(j * (d + 1) + d)]) << "centre " << j << ", scale " << scale;
      for (std::int64_t p = 0; p < d; ++p) b_narrowed.push_back(b[std::size_t(j * (d + 1) + p)]);
    }
    EXPECT_EQ(a, b_narrowed) << "scale " << scale;
  }
}

/// X 4 bytes past a 16-byte boundary: gemm::nearest cannot read it, and Lloyd's GEMM fallback runs instead
/// (the sampling rounds read their own half copy).
TEST_F(KmeansParallelGpu, MisalignedPointsTakeTheGemmPath) {
  Context& ctx = shared_context();
  const std::int64_t n = 1500, d = 16;
  const int k = 20;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d)), shifted(static_cast<std::size_t>(n * d + 1));
  const Blobs<float> truth = make_blobs<float>(ctx, x.data(), n, d, k, 12, 0.5, 10.0);
  SKINNY_CUDA_TRY(cudaMemcpy(shifted.data() + 1, x.data(), x.bytes(), cudaMemcpyDeviceToDevice));
  Params p;
  p.k = k;
  p.init = Init::kmeans_parallel;
  EXPECT_DOUBLE_EQ(1.0, adjusted_rand_index(truth.labels, fit<float>(ctx, shifted.data() + 1, n, d, p).labels));
}

template <class T>
void same_seed_same_centroids(std::int64_t n, std::int64_t d, std::int64_t k) {
  Context& ctx = shared_context();
  DeviceBuffer<T> x(static_cast<std::size_t>(n * d));
  make_blobs<T>(ctx, x.data(), n, d, static_cast<int>(k), 4, 2.0, 5.0);
  const std::string where = "n=" + std::to_string(n) + " d=" + std::to_string(d) + " k=" + std::to_string(k);
  for (const auto reduction : {detail::Reduction::greedy, detail::Reduction::weighted_sample}) {
    const std::vector<T> a = initial(x, n, d, k, 11, Init::kmeans_parallel, reduction);
    const std::vector<T> b = initial(x, n, d, k, 11, Init::kmeans_parallel, reduction);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(T))) << where;
    EXPECT_NE(a, initial(x, n, d, k, 12, Init::kmeans_parallel, reduction)) << "another seed: " << where;
    EXPECT_TRUE(distinct_rows_of_x(x.to_host(), n, d, a)) << where;
  }
  // Through fit as well: the same seed, the same result to the bit.
  Params p;
  p.k = static_cast<int>(k);
  p.init = Init::kmeans_parallel;
  p.max_iter = 3;
  p.tol = 0;
  const Result<T> r1 = fit<T>(ctx, x.data(), n, d, p), r2 = fit<T>(ctx, x.data(), n, d, p);
  EXPECT_EQ(0, std::memcmp(r1.centroids.data(), r2.centroids.data(), r1.centroids.size() * sizeof(T))) << where;
  EXPECT_EQ(r1.labels, r2.labels) << where;
}

TEST_F(KmeansParallelGpu, SameSeedSameCentroids) {
  same_seed_same_centroids<float>(5003, 16, 70);  // gemm::nearest
  same_seed_same_centroids<float>(5003, 9, 70);   // GEMM fallback
  same_seed_same_centroids<double>(2001, 7, 33);
}

/// The greedy reduction's blocks meet at a grid barrier; however many there are (a smaller device, MPS),
/// each step's sums are formed in the same order, so the centres are the same bits.
template <class T>
void same_centres_on_any_grid(std::int64_t n, std::int64_t d, std::int64_t k) {
  Context& ctx = shared_context();
  DeviceBuffer<T> x(static_cast<std::size_t>(n * d));
  make_blobs<T>(ctx, x.data(), n, d, 40, 21);
  const std::vector<T> all = initial(x, n, d, k, 9, Init::kmeans_parallel, detail::Reduction::greedy);
  for (const char* blocks : {"1", "3", "17"}) {
    ::setenv("SKINNY_INIT_REDUCTION_BLOCKS", blocks, 1);
    const std::vector<T> capped = initial(x, n, d, k, 9, Init::kmeans_parallel, detail::Reduction::greedy);
    ::unsetenv("SKINNY_INIT_REDUCTION_BLOCKS");
    EXPECT_EQ(0, std::memcmp(all.data(), capped.data(), all.size() * sizeof(T)))
        << "n=" << n << " d=" << d << " k=" << k << " at most " << blocks << " blocks";
  }
}

TEST_F(KmeansParallelGpu, ReductionGivesTheSameCentresOnAnyGrid) {
  same_centres_on_any_grid<float>(20011, 128, 300);  // a range a block
  same_centres_on_any_grid<float>(20011, 13, 300);   // narrow rows: several ranges a block
  same_centres_on_any_grid<double>(9001, 70, 130);
}

/// k = n: every point is a centroid (the candidates, topped up with the points never sampled), and
/// fit's inertia is 0. Too few candidates (a tiny oversampling, one round) are topped up the same way.
template <class T>
void every_point_or_top_up() {
  Context& ctx = shared_context();
  const std::int64_t n = 301, d = 5;
  DeviceBuffer<T> x(static_cast<std::size_t>(n * d));
  make_blobs<T>(ctx, x.data(), n, d, 7, 8);
  const std::vector<T> host = x.to_host();
  const std::vector<T> all = initial(x, n, d, n, 3, Init::kmeans_parallel);
  EXPECT_TRUE(distinct_rows_of_x(host, n, d, all));
  EXPECT_EQ(0.0, potential(host, n, d, all));
  // About 1 + 0.02 x 50 = 2 candidates for k = 50: the other 48 are random distinct points.
  const std::vector<T> topped = initial(x, n, d, 50, 3, Init::kmeans_parallel, detail::Reduction::automatic, 0.02, 1);
  EXPECT_TRUE(distinct_rows_of_x(host, n, d, topped));
  Params p;
  p.k = static_cast<int>(n);
  p.init = Init::kmeans_parallel;
  p.max_iter = 2;
  const Result<T> r = fit<T>(ctx, x.data(), n, d, p);
  // Each point its own cluster: 0 up to the distance trick's rounding, which scales with ||x||^2.
  double norms = 0;
  for (const T v : host) norms += double(v) * double(v);
  EXPECT_NEAR(0.0, r.inertia, (sizeof(T) == 4 ? 1e-5 : 1e-12) * norms);
}

TEST_F(KmeansParallelGpu, KEqualsNAndTopUpGiveDistinctPoints) {
  every_point_or_top_up<float>();
  every_point_or_top_up<double>();
}

/// On blobs, the potential of k-means||'s centroids is within a factor 2 of k-means++'s (Bahmani et al.
/// report them about equal; a blob left without a centre costs about as much as all the others), and
/// far below that of random centroids (which leave about a third of the blobs without one).
template <class T>
void potential_near_kmeans_plus_plus(std::int64_t n, std::int64_t d, int k) {
  Context& ctx = shared_context();
  DeviceBuffer<T> x(static_cast<std::size_t>(n * d));
  make_blobs<T>(ctx, x.data(), n, d, k, 21);
  const std::vector<T> host = x.to_host();
  double parallel = 0, plus_plus = 0;
  for (const std::uint64_t seed : {1, 2, 3}) {
    parallel += potential(host, n, d, initial(x, n, d, k, seed, Init::kmeans_parallel));
    plus_plus += potential(host, n, d, initial(x, n, d, k, seed, Init::kmeans_plus_plus));
  }
  DeviceBuffer<T> c(static_cast<std::size_t>(k * d));
  detail::init_random(ctx, x.data(), n, d, k, 1, c.data());
  const double random = potential(host, n, d, c.to_host());
  const std::string where = "n=" + std::to_string(n) + " d=" + std::to_string(d) + " k=" + std::to_string(k);
  EXPECT_LT(parallel, 2.0 * plus_plus) << where << ": k-means|| " << parallel / 3 << ", k-means++ " << plus_plus / 3;
  EXPECT_LT(parallel / 3, 0.5 * random) << where;
}

TEST_F(KmeansParallelGpu, PotentialCloseToKmeansPlusPlus) {
  potential_near_kmeans_plus_plus<float>(6000, 16, 40);
  potential_near_kmeans_plus_plus<float>(4001, 9, 25);
  potential_near_kmeans_plus_plus<double>(4001, 9, 25);
}

/// k = 2000 on 20000 points, both reductions: centroids are distinct points; greedy k-means++'s potential
/// is below that of random centroids, the weighted sample's about the same (it draws by weight, as random
/// points do, from candidates spread by D^2 sampling: no better than 1.5 times random is asked); fit
/// finishes with an inertia below random centroids'. Progress comes per round and per 256 centres of
/// the reduction, in order.
TEST_F(KmeansParallelGpu, LargeKFinishes) {
  Context& ctx = shared_context();
  const std::int64_t n = 20000, d = 12, k = 2000;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  make_blobs<float>(ctx, x.data(), n, d, 500, 31, 1.0, 10.0);
  const std::vector<float> host = x.to_host();
  DeviceBuffer<float> c(static_cast<std::size_t>(k * d));
  detail::init_random(ctx, x.data(), n, d, k, 1, c.data());
  const double random = potential(host, n, d, c.to_host());
  for (const auto reduction : {detail::Reduction::greedy, detail::Reduction::weighted_sample}) {
    std::vector<InitProgress> calls;
    const std::vector<float> centroids = initial(x, n, d, k, 5, Init::kmeans_parallel, reduction, 2.0, 5,
                                                 [&](const InitProgress& i) { calls.push_back(i); });
    EXPECT_TRUE(distinct_rows_of_x(host, n, d, centroids));
    const double pot = potential(host, n, d, centroids);
    if (reduction == detail::Reduction::greedy)
      EXPECT_LT(pot, random);
    else
      EXPECT_LT(pot, 1.5 * random);
    ASSERT_GE(calls.size(), 2u);
    std::int64_t rounds = 0;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const std::string stage = calls[i].stage;
      if (stage == "k-means|| sampling") {
        EXPECT_EQ(++rounds, calls[i].step);
        EXPECT_EQ(5, calls[i].of);
      } else {
        EXPECT_EQ("k-means|| reduction", stage);
        EXPECT_EQ(k, calls[i].of);
      }
      if (i > 0) {
        EXPECT_GE(calls[i].ms, calls[i - 1].ms);
        EXPECT_GE(calls[i].candidates, calls[i - 1].candidates);
      }
    }
    EXPECT_GE(rounds, 1);
    EXPECT_EQ(k, calls.back().step) << "the last call reports the reduction done";
    if (reduction == detail::Reduction::greedy && calls.back().candidates > k)
      EXPECT_EQ(std::size_t(rounds) + (k + 255) / 256, calls.size()) << "every 256 centres and the last";
  }
  Params p;
  p.k = static_cast<int>(k);  // automatic: k-means||
  p.max_iter = 5;
  int init_calls = 0;
  p.init_progress = [&](const InitProgress&) { ++init_calls; };
  const Result<float> r = fit<float>(ctx, x.data(), n, d, p);
  EXPECT_TRUE(std::isfinite(r.inertia));
  EXPECT_LT(r.inertia, random);
  EXPECT_GT(init_calls, 0);
}

/// Below kParallelInitMinClusters, the default (automatic) is k-means++ exactly as before.
TEST_F(KmeansParallelGpu, AutomaticKeepsKmeansPlusPlusForFewClusters) {
  Context& ctx = shared_context();
  const std::int64_t n = 3000, d = 10;
  const int k = 12;
  static_assert(12 < kParallelInitMinClusters);
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  make_blobs<float>(ctx, x.data(), n, d, k, 6, 2.0, 4.0);
  Params automatic;
  automatic.k = k;
  automatic.max_iter = 4;
  automatic.tol = 0;
  Params plus_plus = automatic;
  plus_plus.init = Init::kmeans_plus_plus;
  const Result<float> a = fit<float>(ctx, x.data(), n, d, automatic), b = fit<float>(ctx, x.data(), n, d, plus_plus);
  EXPECT_EQ(0, std::memcmp(a.centroids.data(), b.centroids.data(), a.centroids.size() * sizeof(float)));
  // k-means++ reports every 256 centres and the last: one call here.
  int calls = 0;
  plus_plus.init_progress = [&](const InitProgress& i) {
    ++calls;
    EXPECT_EQ(std::string("k-means++"), i.stage);
    EXPECT_EQ(k, i.step);
  };
  fit<float>(ctx, x.data(), n, d, plus_plus);
  EXPECT_EQ(1, calls);
}

TEST_F(KmeansParallelGpu, RefusesBadParameters) {
  Context& ctx = shared_context();
  const std::int64_t n = 100, d = 4;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  make_blobs<float>(ctx, x.data(), n, d, 3, 1);
  Params p;
  p.k = 3;
  p.init = Init::kmeans_parallel;
  for (const double bad : {0.0, -1.0, double(NAN), double(INFINITY)}) {
    p.init_oversampling = bad;
    EXPECT_THROW(fit<float>(ctx, x.data(), n, d, p), std::invalid_argument) << bad;
  }
  p.init_oversampling = 2.0;
  p.init_rounds = 0;
  try {
    fit<float>(ctx, x.data(), n, d, p);
    ADD_FAILURE() << "init_rounds = 0 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("init_rounds = 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace skinny::kmeans
