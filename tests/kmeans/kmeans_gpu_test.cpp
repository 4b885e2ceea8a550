// K-means on the GPU against the CPU reference and against known blobs, for every backend that can do
// the shape, in float and double.
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/nearest.hpp>
#include <skinny/kmeans/kmeans.hpp>

#include "../../kmeans/src/detail.hpp"
#include "test_data.hpp"
#include "support/gpu_fixture.hpp"
#include "support/random_matrix.hpp"
#include "support/relative_difference.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace skinny::kmeans {
namespace {

using testing::relative_difference;
using testing::shared_context;

class KmeansGpu : public testing::GpuTest {};


template <class T>
std::vector<T> first_points(const std::vector<T>& x, std::int64_t k, std::int64_t d) {
  return std::vector<T>(x.begin(), x.begin() + k * d);
}

/// Blobs on the GPU, every backend that can do the shape: the true blobs are recovered (ARI = 1).
template <class T>
void recovers_blobs(std::int64_t n, std::int64_t d, int k) {
  Context& ctx = shared_context();
  DeviceBuffer<T> x(static_cast<std::size_t>(n * d));
  const Blobs<T> truth = make_blobs<T>(ctx, x.data(), n, d, k, 7);
  int backends = 0;
  for (const auto& info : gemm::algorithms()) {
    Params p;
    p.k = k;
    p.seed = 3;
    p.backend = info.algo;
    try {
      const Result<T> r = fit<T>(ctx, x.data(), n, d, p);
      EXPECT_DOUBLE_EQ(1.0, adjusted_rand_index(truth.labels, r.labels)) << info.name << " n=" << n << " d=" << d;
      ++backends;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("backend cannot"), std::string::npos) << e.what();
    }
  }
  EXPECT_GE(backends, 2) << "cuBLAS and at least one of ours must run the distances";
}

TEST_F(KmeansGpu, RecoversBlobsOnEveryBackendFloat) {
  recovers_blobs<float>(2000, 17, 5);
  recovers_blobs<float>(1027, 128, 16);
}
TEST_F(KmeansGpu, RecoversBlobsOnEveryBackendDouble) {
  recovers_blobs<double>(2000, 17, 5);
  recovers_blobs<double>(1027, 128, 16);
}

/// From the same initial centroids the GPU gives the reference's labels, and centroids and inertia
/// within a norm-wise tolerance, on shapes that are not multiples of any block size.
template <class T>
Result<T> matches_reference(std::int64_t n, std::int64_t d, int k, gemm::Algo backend, double tolerance,
                            bool column_copy = true) {
  Context& ctx = shared_context();
  DeviceBuffer<T> x(static_cast<std::size_t>(n * d));
  make_blobs<T>(ctx, x.data(), n, d, k, 11, 1.5, 4.0);  // overlapping enough that points move
  const std::vector<T> host = x.to_host();
  Params p;
  p.k = k;
  p.max_iter = 5;
  p.tol = 0;
  p.init = Init::given;
  p.backend = backend;
  p.column_copy = column_copy;
  const std::vector<T> init = first_points(host, k, d);
  const Result<T> gpu = fit<T>(ctx, x.data(), n, d, p, init);
  const Result<T> cpu = reference_fit<T>(host, n, d, p, init);
  const std::string where = "n=" + std::to_string(n) + " d=" + std::to_string(d) + " k=" + std::to_string(k) +
                            " backend=" + std::string(gemm::to_string(backend));
  EXPECT_EQ(cpu.labels, gpu.labels) << where;
  EXPECT_EQ(cpu.n_iter, gpu.n_iter) << where;  // max_iter, or where no label changed (strict convergence)
  EXPECT_LE(relative_difference(gpu.centroids, cpu.centroids), tolerance) << where;
  // The distance trick cancels ||x||^2 against 2 x.c: its error scales with the squared norms.
  double norms = 0;
  for (const T v : host) norms += double(v) * double(v);
  EXPECT_NEAR(cpu.inertia, gpu.inertia, tolerance * (cpu.inertia + norms)) << where;
  return gpu;
}

TEST_F(KmeansGpu, MatchesTheCpuReferenceFromTheSameCentroids) {
  for (const gemm::Algo backend : {gemm::Algo::cublas, gemm::Algo::tsm2, gemm::Algo::automatic})
    for (const auto [n, d, k] : {std::tuple<std::int64_t, std::int64_t, int>{1000, 7, 3}, {1, 17, 1}, {127, 1, 16},
                                 {1000, 127, 17}, {4099, 33, 16}, {1001, 8, 3}, {4099, 132, 8}, {999, 508, 5}}) {
      matches_reference<float>(n, d, k, backend, 1e-5);
      matches_reference<double>(n, d, k, backend, 1e-12);
    }
}

/// The argmin over GEMM cross terms (k > 32: a warp a point, 16-byte vectors of terms where rows are whole
/// vectors) against the host, on small integer terms, where every distance is exact and ties are common:
/// the same labels (the lowest column among equal distances), distances and counts, for k that are and
/// are not whole vectors.
template <class T>
void argmin_matches_the_host(std::int64_t rows, std::int64_t k) {
  std::vector<T> g(static_cast<std::size_t>(rows * k)), xnorm(static_cast<std::size_t>(rows));
  std::vector<T> cnorm(static_cast<std::size_t>(k));
  std::uint64_t state = 12345 + static_cast<std::uint64_t>(k);
  const auto small = [&](int range) {  // integers in [0, range)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return T(static_cast<int>((state >> 33) % static_cast<std::uint64_t>(range)));
  };
  for (T& v : g) v = small(64);
  for (T& v : xnorm) v = T(200) + small(50);
  for (T& v : cnorm) v = small(64);
  std::vector<std::int32_t> want_labels(static_cast<std::size_t>(rows));
  std::vector<T> want_dist(static_cast<std::size_t>(rows));
  std::vector<int> want_counts(static_cast<std::size_t>(k), 0);
  for (std::int64_t i = 0; i < rows; ++i) {
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < k; ++j)  // exact in T: integers far below 2^24
      if (cnorm[j] - 2 * g[i * k + j] < cnorm[best] - 2 * g[i * k + best]) best = j;
    want_labels[i] = static_cast<std::int32_t>(best);
    want_dist[i] = std::max(T(0), xnorm[i] + cnorm[best] - 2 * g[i * k + best]);
    ++want_counts[best];
  }
  const DeviceBuffer<T> dg(g), dx(xnorm), dc(cnorm);
  DeviceBuffer<std::int32_t> labels(static_cast<std::size_t>(rows));
  DeviceBuffer<T> dist(static_cast<std::size_t>(rows));
  DeviceBuffer<int> counts(std::vector<int>(static_cast<std::size_t>(k), 0));
  labels.copy_from(std::vector<std::int32_t>(static_cast<std::size_t>(rows), -7));  // poisoned
  detail::argmin(dg.data(), rows, k, dx.data(), dc.data(), labels.data(), dist.data(), counts.data(), nullptr);
  const std::string where =
      "rows=" + std::to_string(rows) + " k=" + std::to_string(k) + (sizeof(T) == 4 ? " float" : " double");
  EXPECT_EQ(want_labels, labels.to_host()) << where;
  EXPECT_EQ(want_dist, dist.to_host()) << where;
  EXPECT_EQ(want_counts, counts.to_host()) << where;
}

TEST_F(KmeansGpu, ArgminOverManyCentresMatchesTheHostWithTies) {
  for (const auto [rows, k] : {std::pair<std::int64_t, std::int64_t>{1000, 33}, {1000, 129}, {1000, 130}, {1001, 256},
                               {517, 1000}, {300, 8192}, {17, 8195}}) {
    argmin_matches_the_host<float>(rows, k);
    argmin_matches_the_host<double>(rows, k);
  }
}

/// Enough points for the column-major copy of X: the distances read it (or not, when asked), and the
/// labels are the reference's either way.
TEST_F(KmeansGpu, ColumnCopyGivesTheReferenceLabels) {
  for (const bool copy : {true, false})
    EXPECT_EQ(copy, matches_reference<float>(70001, 9, 5, gemm::Algo::tsm2, 1e-5, copy).column_copy);
  EXPECT_FALSE(matches_reference<float>(1000, 9, 5, gemm::Algo::tsm2, 1e-5).column_copy) << "too few points";
}

/// Many clusters in float: automatic takes the fused nearest kernel (on a padded copy of X when its rows
/// are not whole 16-byte copies), recovers blobs, and gives the reference's labels from the same centroids.
TEST_F(KmeansGpu, ManyClustersRunTheFusedKernel) {
  Context& ctx = shared_context();
  const std::int64_t n = 6000, d = 36;
  const int k = 130;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * (d + 1)));
  EXPECT_EQ("nearest", distance_method<float>(ctx, x.data(), n, d, k, gemm::Algo::automatic));
  EXPECT_EQ("nearest", distance_method<float>(ctx, x.data(), n, d + 1, k, gemm::Algo::automatic));  // a padded copy
  EXPECT_NE("nearest", distance_method<float>(ctx, x.data(), n, d, k, gemm::Algo::cublas));
  EXPECT_NE("nearest", distance_method<float>(ctx, x.data(), n, d, 16, gemm::Algo::automatic));
  // Exact products from 32 clusters where they run on wgmma (Hopper), and there from 9 for rows of 128
  // floats or more; from 128 on mma.sync; rows of 5 to 7 floats from 16 clusters in both modes (rows of up
  // to 4 take narrow_nearest for any k).
  const bool wgmma = gemm::nearest_uses_wgmma(ctx);
  EXPECT_EQ(wgmma, "nearest" == distance_method<float>(ctx, x.data(), n, d, 32, gemm::Algo::automatic));
  EXPECT_NE("nearest", distance_method<float>(ctx, x.data(), n, d, 31, gemm::Algo::automatic));
  EXPECT_EQ(wgmma, "nearest" == distance_method<float>(ctx, x.data(), 1000, 128, 9, gemm::Algo::automatic));
  EXPECT_NE("nearest", distance_method<float>(ctx, x.data(), 1000, 128, 8, gemm::Algo::automatic));
  EXPECT_NE("nearest", distance_method<float>(ctx, x.data(), 1000, 127, 16, gemm::Algo::automatic));
  EXPECT_EQ("nearest", distance_method<float>(ctx, x.data(), n, 5, 16, gemm::Algo::automatic));
  EXPECT_NE("nearest", distance_method<float>(ctx, x.data(), n, 5, 15, gemm::Algo::automatic));
  EXPECT_EQ("narrow rows", distance_method<float>(ctx, x.data(), n, 4, 16, gemm::Algo::automatic));
  // From the true centres (k-means++ may settle in a local optimum with 130 clusters, on any backend).
  const Blobs<float> truth = make_blobs<float>(ctx, x.data(), n, d, k, 9);
  // Fast mode's route depends on the data (a half copy where half holds it): asked of the blobs.
  EXPECT_EQ("nearest (fast, half copy)",
            distance_method<float>(ctx, x.data(), n, 7, 16, gemm::Algo::automatic, gemm::Math::fast));
  Params p;
  p.k = k;
  p.init = Init::given;
  const Result<float> r = fit<float>(ctx, x.data(), n, d, p, truth.centers);
  EXPECT_DOUBLE_EQ(1.0, adjusted_rand_index(truth.labels, r.labels));
  matches_reference<float>(n, d, k, gemm::Algo::automatic, 1e-5);
  matches_reference<float>(1001, 5, 257, gemm::Algo::automatic, 1e-5);   // rows padded to 8 in a copy
  matches_reference<float>(2003, 37, 150, gemm::Algo::automatic, 1e-5);  // and to 40
  matches_reference<float>(3001, 2, 129, gemm::Algo::automatic, 1e-5);   // narrow rows
  matches_reference<double>(3001, 3, 129, gemm::Algo::automatic, 1e-12);
}

/// Fits the blobs from their true centres in exact and in fast math (`p` otherwise as given): fast finds the
/// true blobs, with exact's inertia and centroids within 1e-5 relative. Returns the fast fit.
Result<float> fast_fits_like_exact(const DeviceBuffer<float>& x, std::int64_t n, std::int64_t d,
                                   const Blobs<float>& truth, Params p) {
  Context& ctx = shared_context();
  p.init = Init::given;
  p.math = gemm::Math::exact;
  const Result<float> exact = fit<float>(ctx, x.data(), n, d, p, truth.centers);
  p.math = gemm::Math::fast;
  Result<float> fast = fit<float>(ctx, x.data(), n, d, p, truth.centers);
  EXPECT_DOUBLE_EQ(1.0, adjusted_rand_index(truth.labels, fast.labels));
  EXPECT_NEAR(exact.inertia, fast.inertia, 1e-5 * exact.inertia);
  EXPECT_LE(relative_difference(fast.centroids, exact.centroids), 1e-5);
  return fast;
}

/// Math::fast (one 16-bit product on a half copy of X in the fused kernel, from 32 clusters) fits like exact.
TEST_F(KmeansGpu, FastMathFitsLikeExact) {
  Context& ctx = shared_context();
  const std::int64_t n = 20011, d = 68;
  const int k = 200;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  const Blobs<float> truth = make_blobs<float>(ctx, x.data(), n, d, k, 13);
  const std::string fast = "nearest (fast, half copy)";
  const auto fast_method = [&](std::int64_t rows, std::int64_t dims, int clusters) {
    return distance_method<float>(ctx, x.data(), rows, dims, clusters, gemm::Algo::automatic, gemm::Math::fast);
  };
  EXPECT_EQ(fast, fast_method(n, d, 32));
  EXPECT_NE(fast, fast_method(n, d, 31));
  const bool wgmma = gemm::nearest_uses_wgmma(ctx);
  EXPECT_EQ(wgmma, fast == fast_method(1000, 128, 3))
      << "for any k where rows have 128 floats or more and the one pass does not take them, on wgmma";
  EXPECT_EQ(wgmma, fast == fast_method(1000, 513, 2));
  EXPECT_EQ("few-clusters", fast_method(10000, 128, 2))
      << "up to 2 clusters of 128 to 512 dimensions float reads X once";
  Params p;
  p.k = k;
  p.max_iter = 20;
  fast_fits_like_exact(x, n, d, truth, p);
}

/// Fast mode with many clusters of many dimensions (d >= 512, k >= 1024, k d >= 2^20), on data that half
/// cannot hold (largest |x| above 32768: no half copy), takes cuBLAS's TF32 GEMM and the argmin instead of
/// the fused kernel; it fits like exact, and protect's checks pass at the one-product bound.
TEST_F(KmeansGpu, FastMathTakesTheTf32GemmForLargeProblems) {
  Context& ctx = shared_context();
  const std::int64_t n = 3079, d = 1031;
  const int k = 1024;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  make_blobs<float>(ctx, x.data(), n, d, k, 19);
  EXPECT_EQ("nearest (fast, half copy)",
            distance_method<float>(ctx, x.data(), n, d, k, gemm::Algo::automatic, gemm::Math::fast));
  const Blobs<float> truth = make_blobs<float>(ctx, x.data(), n, d, k, 19, 1000.0, 40000.0);
  EXPECT_EQ("cublas (tf32)", distance_method<float>(ctx, x.data(), n, d, k, gemm::Algo::automatic, gemm::Math::fast));
  EXPECT_EQ("nearest", distance_method<float>(ctx, x.data(), n, d, k, gemm::Algo::automatic, gemm::Math::exact));
  EXPECT_EQ("nearest (fast)", distance_method<float>(ctx, x.data(), n, 511, 3000, gemm::Algo::automatic, gemm::Math::fast));
  EXPECT_EQ("nearest (fast)", distance_method<float>(ctx, x.data(), n, d, 1023, gemm::Algo::automatic, gemm::Math::fast));
  EXPECT_EQ("nearest (fast)", distance_method<float>(ctx, x.data(), n, 1023, k, gemm::Algo::automatic, gemm::Math::fast))
      << "k d = 1047552 < 2^20";
  Params p;
  p.k = k;
  p.max_iter = 5;
  const Result<float> fast = fast_fits_like_exact(x, n, d, truth, p);
  p.init = Init::given;
  p.math = gemm::Math::fast;
  p.protect = true;
  const Result<float> checked = fit<float>(ctx, x.data(), n, d, p, truth.centers);
  EXPECT_EQ(fast.labels, checked.labels);
  EXPECT_GE(checked.protection.rows_verified, n * checked.n_iter);
  EXPECT_EQ(0, checked.protection.distance_detections) << "a false alarm at the TF32 bound";
}

/// Fast mode's labels on the half copy, from predict at a fit's final centroids, against a double argmin on
/// the host: a point may take another centre than the exact nearest only when that centre is within the
/// one-product error of the best, 2^-9 (||x||^2 + the larger ||c||^2) (x and c each rounded to half's 11
/// bits; the products' float sums add less). The route must be the half copy's for the check to mean it.
void half_copy_labels_are_nearest_but_for_near_ties(std::int64_t n, std::int64_t d, int k, double center_box) {
  Context& ctx = shared_context();
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  make_blobs<float>(ctx, x.data(), n, d, k, 23, 1.0, center_box);
  const std::string where = "n=" + std::to_string(n) + " d=" + std::to_string(d) + " k=" + std::to_string(k);
  ASSERT_EQ("nearest (fast, half copy)",
            distance_method<float>(ctx, x.data(), n, d, k, gemm::Algo::automatic, gemm::Math::fast))
      << where;
  const std::vector<float> host = x.to_host();
  Params p;
  p.k = k;
  p.max_iter = 4;
  p.tol = 0;
  p.math = gemm::Math::fast;
  p.init = Init::given;
  const Result<float> r = fit<float>(ctx, x.data(), n, d, p, first_points(host, k, d));
  const std::vector<std::int32_t> labels = predict<float>(ctx, x.data(), n, d, r.centroids, k, gemm::Algo::automatic,
                                                          gemm::Math::fast);
  EXPECT_EQ(r.labels, labels) << where << ": fit's final labels and predict's";
  const auto at = [&](const std::vector<float>& v, std::int64_t row, std::int64_t col) {
    return double(v[static_cast<std::size_t>(row * d + col)]);
  };
  double max_c_sq = 0;
  for (int j = 0; j < k; ++j) {
    double s = 0;
    for (std::int64_t c = 0; c < d; ++c) s += at(r.centroids, j, c) * at(r.centroids, j, c);
    max_c_sq = std::max(max_c_sq, s);
  }
  std::int64_t differ = 0, beyond = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    double x_sq = 0, best = INFINITY, taken = 0;
    for (std::int64_t c = 0; c < d; ++c) x_sq += at(host, i, c) * at(host, i, c);
    for (int j = 0; j < k; ++j) {
      double s = 0;
      for (std::int64_t c = 0; c < d; ++c) s += (at(host, i, c) - at(r.centroids, j, c)) * (at(host, i, c) - at(r.centroids, j, c));
      best = std::min(best, s);
      if (j == labels[static_cast<std::size_t>(i)]) taken = s;
    }
    differ += taken > best;
    beyond += taken - best > std::ldexp(x_sq + max_c_sq, -9);
  }
  EXPECT_EQ(0, beyond) << where << ": labels farther from the best than the one-product error";
  EXPECT_LE(differ, n / 20) << where << ": " << differ << " labels are not the exact argmin's";
}

/// Fast mode on float points whose largest |x| lies in [2^-8, 32768] reads a half copy of X (odd shapes,
/// padded rows, the sizes where the TF32 GEMM would otherwise be taken); outside that range, TF32. Exact
/// mode's first pass reads it too.
TEST_F(KmeansGpu, FastMathReadsAHalfCopyWhereHalfHoldsTheData) {
  half_copy_labels_are_nearest_but_for_near_ties(2003, 5, 16, 10.0);
  half_copy_labels_are_nearest_but_for_near_ties(1001, 7, 17, 10.0);
  half_copy_labels_are_nearest_but_for_near_ties(4099, 33, 130, 10.0);
  half_copy_labels_are_nearest_but_for_near_ties(3001, 130, 1000, 4.0);
  half_copy_labels_are_nearest_but_for_near_ties(2100, 515, 2040, 4.0);  // where TF32 would take the GEMM
  Context& ctx = shared_context();
  const std::int64_t n = 1000, d = 64;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  make_blobs<float>(ctx, x.data(), n, d, 50, 3, 1e-4, 1e-3);  // largest |x| below 2^-8
  EXPECT_EQ("nearest (fast)", distance_method<float>(ctx, x.data(), n, d, 50, gemm::Algo::automatic, gemm::Math::fast));
  make_blobs<float>(ctx, x.data(), n, d, 50, 3, 1.0, 40000.0);  // above 32768
  EXPECT_EQ("nearest (fast)", distance_method<float>(ctx, x.data(), n, d, 50, gemm::Algo::automatic, gemm::Math::fast));
  make_blobs<float>(ctx, x.data(), n, d, 50, 3, 1.0, 100.0);
  EXPECT_EQ("nearest (fast, half copy)",
            distance_method<float>(ctx, x.data(), n, d, 50, gemm::Algo::automatic, gemm::Math::fast));
  EXPECT_EQ("nearest", distance_method<float>(ctx, x.data(), n, d, 50, gemm::Algo::automatic, gemm::Math::exact));
  // Exact mode's one-product pass reads the copy where gemm::nearest re-checks (k d >= 16384, on wgmma
  // d >= 48): the labels stay the reference's.
  matches_reference<float>(3001, 130, 200, gemm::Algo::automatic, 1e-5);
  matches_reference<float>(2999, 49, 1000, gemm::Algo::automatic, 1e-5);
}

/// 16-bit X (__half, __nv_bfloat16): the same fit as float on the same (widened) values, from the same
/// centroids, on odd shapes, through the fused kernel (exact and fast math; on the 16-bit rows themselves
/// where d is a multiple of 8, otherwise on rows widened to float) and through cuBLAS.
template <class H>
void sixteen_bit_fits_like_float(std::int64_t n, std::int64_t d, int k) {
  Context& ctx = shared_context();
  const auto blobs = testing::narrow_blobs<H>(ctx, n, d, k, 17);
  const std::vector<float>& host = blobs.values;  // the values the 16-bit fit sees
  const DeviceBuffer<float> xf(host);
  const DeviceBuffer<H>& xh = blobs.x;
  Params p;
  p.k = k;
  p.init = Init::given;
  p.max_iter = 15;
  const std::vector<float> init = first_points(host, k, d);
  const std::string where = std::string(std::is_same_v<H, __half> ? "half" : "bf16") +
                            " n=" + std::to_string(n) + " d=" + std::to_string(d) + " k=" + std::to_string(k);
  for (const gemm::Algo backend : {gemm::Algo::automatic, gemm::Algo::cublas}) {
    p.backend = backend;
    p.math = gemm::Math::exact;
    const Result<float> want = fit<float>(ctx, xf.data(), n, d, p, init);
    const Result<float> got = fit<H>(ctx, xh.data(), n, d, p, init);
    EXPECT_EQ(want.labels, got.labels) << where;
    EXPECT_EQ(want.n_iter, got.n_iter) << where;
    EXPECT_LE(relative_difference(got.centroids, want.centroids), 1e-6) << where;
    EXPECT_NEAR(want.inertia, got.inertia, 1e-6 * want.inertia) << where;
    if (backend == gemm::Algo::automatic) {
      const bool fused_beats_one_pass = gemm::nearest_uses_wgmma(ctx) && k > 4 && d >= 1024;  // exact products
      EXPECT_EQ(k <= 8 && d >= 128 && !fused_beats_one_pass ? "few-clusters" : "nearest",
                distance_method<H>(ctx, xh.data(), n, d, k, backend))
          << where;
      p.math = gemm::Math::fast;
      const Result<float> fast = fit<H>(ctx, xh.data(), n, d, p, init);
      EXPECT_NEAR(want.inertia, fast.inertia, 1e-5 * want.inertia) << where;
    }
  }
  // predict on 16-bit points gives the fit's labels.
  const Result<float> r = fit<H>(ctx, xh.data(), n, d, p, init);
  EXPECT_EQ(r.labels, predict<H>(ctx, xh.data(), n, d, r.centroids, k)) << where;
}

/// 16-bit data with up to 8 clusters from 128 dimensions reads X once (the few-clusters kernels), except
/// on wgmma where the fused kernel's ring of few centres and the update's read are faster: one product per
/// term from 1024 dimensions, or from 256 with 5 to 8 clusters; three products with 5 to 8 from 1024.
TEST_F(KmeansGpu, SixteenBitFewClustersTakeTheFusedKernelWhereItPays) {
  Context& ctx = shared_context();
  const std::int64_t n = 1000;
  DeviceBuffer<__half> x(static_cast<std::size_t>(n * 4096));
  const bool wgmma = gemm::nearest_uses_wgmma(ctx);
  const auto fused = [&](std::int64_t d, std::int64_t k, gemm::Math math) {
    const std::string method = distance_method<__half>(ctx, x.data(), n, d, k, gemm::Algo::automatic, math);
    EXPECT_TRUE(method == "few-clusters" || method.rfind("nearest", 0) == 0) << method;
    return method != "few-clusters";
  };
  // On wgmma (route_rules.hpp): the few-clusters kernels up to 2 clusters (fast: below 1024 dimensions),
  // in exact mode up to 4 from 256 dimensions; elsewhere the fused kernel and the moving update.
  EXPECT_EQ(wgmma, fused(4096, 2, gemm::Math::fast));
  EXPECT_FALSE(fused(1000, 2, gemm::Math::fast));
  EXPECT_EQ(wgmma, fused(1000, 3, gemm::Math::fast));
  EXPECT_EQ(wgmma, fused(128, 8, gemm::Math::fast));
  EXPECT_FALSE(fused(128, 2, gemm::Math::exact));
  EXPECT_EQ(wgmma, fused(255, 3, gemm::Math::exact));
  EXPECT_FALSE(fused(256, 4, gemm::Math::exact));
  EXPECT_FALSE(fused(4096, 4, gemm::Math::exact));
  EXPECT_EQ(wgmma, fused(512, 5, gemm::Math::exact));
  EXPECT_TRUE(fused(4096, 9, gemm::Math::exact)) << "more than 8 clusters: the fused kernel everywhere";
}

TEST_F(KmeansGpu, SixteenBitDataFitsLikeFloat) {
  sixteen_bit_fits_like_float<__half>(1001, 7, 3);      // few clusters, 4 slots
  sixteen_bit_fits_like_float<__half>(5003, 36, 130);   // the fused kernel on widened rows
  sixteen_bit_fits_like_float<__half>(4099, 72, 200);   // the fused kernel on the 16-bit rows themselves
  sixteen_bit_fits_like_float<__half>(2003, 1601, 9);   // few clusters, centroids in two slices
  sixteen_bit_fits_like_float<__nv_bfloat16>(1001, 7, 3);
  sixteen_bit_fits_like_float<__nv_bfloat16>(3001, 129, 17);
  sixteen_bit_fits_like_float<__nv_bfloat16>(777, 64, 32);
  sixteen_bit_fits_like_float<__nv_bfloat16>(3001, 64, 150);  // exact: the first pass on a half copy
  sixteen_bit_fits_like_float<__nv_bfloat16>(4099, 136, 300);
}

/// The few-clusters kernel against exact distances in double on odd shapes (k = 1..32, d = 1..), with a
/// poisoned output, in float and 16-bit.
template <class T>
void few_clusters_match_exact(std::int64_t n, std::int64_t d, std::int64_t k) {
  const auto t = testing::few_clusters_case<T>(n, d, k, 91);
  DeviceBuffer<T> dx(t.x);
  DeviceBuffer<float> dc(t.c), dxn(t.xn), dcn(t.cn), dmin(std::vector<float>(static_cast<std::size_t>(n), NAN));
  DeviceBuffer<std::int32_t> dl(std::vector<std::int32_t>(static_cast<std::size_t>(n), -5));
  DeviceBuffer<int> dcounts(std::vector<int>(static_cast<std::size_t>(k), 0));
  const cudaStream_t stream = shared_context().stream();
  detail::few_nearest(dx.data(), n, d, dc.data(), k, dxn.data(), dcn.data(), dl.data(), dmin.data(), dcounts.data(), stream);
  testing::expect_nearest(t, dl.to_host(), dmin.to_host(), dcounts.to_host());
}

TEST_F(KmeansGpu, FewClustersMatchExactDistances) {
  for (const auto [n, d, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 1, 1}, {7, 3, 2}, {1000, 17, 5},
                               {1031, 130, 16}, {300, 2000, 9}, {513, 7000, 32}, {4097, 64, 31}}) {
    few_clusters_match_exact<float>(n, d, k);
    few_clusters_match_exact<__half>(n, d, k);
    few_clusters_match_exact<__nv_bfloat16>(n, d, k);
  }
}

/// Each way of forming the cluster sums (binned in row order, registers, grouped by label) gives the means
/// and the shift computed in double on the CPU, on column counts that are not multiples of a block's slice,
/// with and without weights.
template <class T>
void update_matches_cpu(typename detail::Updater<T>::Sums sums, std::int64_t n, std::int64_t d, std::int64_t k,
                        double tolerance, bool weighted = false) {
  const auto x = testing::random_nonzero<T>(static_cast<std::size_t>(n * d), 41);
  const auto old_c = testing::random_nonzero<T>(static_cast<std::size_t>(k * d), 42);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  std::vector<int> counts(static_cast<std::size_t>(k), 0);
  std::vector<double> w(weighted ? static_cast<std::size_t>(n) : 0), weight_sum(static_cast<std::size_t>(k), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    ++counts[labels[i] = static_cast<std::int32_t>((i * 7 + i / 3) % k)];
    if (weighted) w[i] = 0.25 + double(i % 7) * 1.5;
    weight_sum[labels[i]] += weighted ? w[i] : 1.0;
  }
  std::vector<double> sum(static_cast<std::size_t>(k * d), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < d; ++j) sum[labels[i] * d + j] += (weighted ? w[i] : 1.0) * double(x[i * d + j]);
  DeviceBuffer<T> dx(x), dold(old_c), dnew(static_cast<std::size_t>(k * d)), dmin(static_cast<std::size_t>(n));
  DeviceBuffer<std::int32_t> dlabels(labels);
  DeviceBuffer<int> dcounts(counts);
  DeviceBuffer<double> dw(w);
  const double* weights = weighted ? dw.data() : nullptr;
  dnew.copy_from(std::vector<T>(static_cast<std::size_t>(k * d), T(NAN)));
  Context& ctx = shared_context();
  detail::Updater<T> updater(n, d, k, sums);
  EXPECT_EQ(updater.way(), sums);
  updater.set_scales(updater.column_max_abs(dx.data(), n, weights, ctx.stream()), weighted);
  const double shift = updater.update(dx.data(), weights, dlabels.data(), dmin.data(), dcounts.data(), dold.data(),
                                      dnew.data(), ctx.stream());
  const std::vector<T> got = dnew.to_host();
  std::vector<T> want(got.size());
  double want_shift = 0;
  for (std::int64_t c = 0; c < k; ++c)
    for (std::int64_t j = 0; j < d; ++j) {
      const std::size_t idx = static_cast<std::size_t>(c * d + j);
      want[idx] = static_cast<T>(sum[idx] / weight_sum[c]);
      want_shift += (double(want[idx]) - double(old_c[idx])) * (double(want[idx]) - double(old_c[idx]));
    }
  const std::string where = "n=" + std::to_string(n) + " d=" + std::to_string(d) + " k=" + std::to_string(k) +
                            (weighted ? " weighted" : "");
  EXPECT_LE(relative_difference(got, want), tolerance) << where;
  EXPECT_NEAR(want_shift, shift, tolerance * want_shift) << where;
}

TEST_F(KmeansGpu, EachWayOfSummingGivesTheMeans) {
  using F = detail::Updater<float>;
  using D = detail::Updater<double>;
  for (const auto [n, d, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{5003, 37, 16}, {3001, 1000, 3},
                               {40, 4, 16}}) {
    for (const bool weighted : {false, true}) {
      for (const auto sums : {F::Sums::binned, F::Sums::registers, F::Sums::sorted})
        update_matches_cpu<float>(sums, n, d, k, 1e-6, weighted);
      for (const auto sums : {D::Sums::binned, D::Sums::registers, D::Sums::sorted})
        update_matches_cpu<double>(sums, n, d, k, 1e-14, weighted);
    }
  }
  // Binned: k x d sums wider than a block's shared memory (two slices, the second partly past d); more rows
  // than the ranges take before a flush (several flushes per block); single columns.
  update_matches_cpu<float>(F::Sums::binned, 20011, 20, 300, 1e-6, true);
  update_matches_cpu<double>(D::Sums::binned, 20011, 20, 300, 1e-14);
  update_matches_cpu<float>(F::Sums::binned, 1100003, 2, 40, 1e-6);
  update_matches_cpu<double>(D::Sums::binned, 7, 1, 1, 1e-14, true);
  // Sorted: rows of 32 vectors (four teams of pieces a block), the counting sort's largest k and the
  // radix sort's above it.
  update_matches_cpu<float>(F::Sums::sorted, 70001, 128, 1000, 1e-6, true);
  update_matches_cpu<float>(F::Sums::sorted, 60013, 12, 4096, 1e-6);
  update_matches_cpu<float>(F::Sums::sorted, 60013, 12, 4097, 1e-6);
  update_matches_cpu<double>(D::Sums::sorted, 9001, 64, 5000, 1e-14, true);
}

/// Register sums: each instance (k <= 8, 16 and 32), rows of vectors and of single elements (odd d), one
/// column slice and many, slices partly past d, and a range of more rows than one round of flushes takes.
TEST_F(KmeansGpu, RegisterUpdatesGiveTheMeans) {
  using F = detail::Updater<float>;
  using D = detail::Updater<double>;
  for (const auto [n, d, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{20011, 128, 32}, {70001, 132, 2},
                               {5003, 36, 16}, {1, 7, 1}, {1000, 127, 9}, {4099, 1000, 24}})
    for (const bool weighted : {false, true}) {
      update_matches_cpu<float>(F::Sums::registers, n, d, k, 1e-6, weighted);
      update_matches_cpu<double>(D::Sums::registers, n, d, k, 1e-14, weighted);
    }
  // Two ranges of 128 slices on an H100 or H200: 35000 rows a range, more than a round's 8 x 4096.
  update_matches_cpu<float>(F::Sums::registers, 70001, 4096, 20, 1e-6);
}

/// An update that moves only the points whose label changed (queue_update with few_changes, after a first
/// update that summed all points) gives the bits of a fresh update over the new labels: from labels A, then B
/// (a tenth of the points relabelled, some to clusters A left empty of them), then back to A; every way of
/// summing, with and without weights, float, double and half. The moves must have run.
template <class T>
void moving_changed_points_gives_fresh_sums(typename detail::Updater<T>::Sums sums, std::int64_t n, std::int64_t d,
                                            std::int64_t k, bool weighted) {
  using C = compute_t<T>;
  const auto x = testing::random_nonzero<T>(static_cast<std::size_t>(n * d), 43);
  const auto old_c = testing::random_nonzero<C>(static_cast<std::size_t>(k * d), 44);
  std::vector<std::int32_t> a(static_cast<std::size_t>(n)), b(static_cast<std::size_t>(n));
  std::vector<double> w(weighted ? static_cast<std::size_t>(n) : 0);
  for (std::int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<std::int32_t>((i * 7 + i / 3) % k);
    b[i] = i % 10 == 3 ? static_cast<std::int32_t>((a[i] + 1 + i % 5) % k) : a[i];
    if (weighted) w[i] = 0.25 + double(i % 7) * 1.5;
  }
  const auto counts_of = [&](const std::vector<std::int32_t>& labels) {
    std::vector<int> counts(static_cast<std::size_t>(k), 0);
    for (const std::int32_t l : labels) ++counts[static_cast<std::size_t>(l)];
    return DeviceBuffer<int>(counts);
  };
  const DeviceBuffer<T> dx(x);
  const DeviceBuffer<C> dold(old_c);
  DeviceBuffer<C> dmin(static_cast<std::size_t>(n)), moved(static_cast<std::size_t>(k * d)),
      fresh(static_cast<std::size_t>(k * d));
  DeviceBuffer<std::int32_t> da(a), db(b);
  DeviceBuffer<int> ca = counts_of(a), cb = counts_of(b);
  const DeviceBuffer<double> dw(w);
  const double* weights = weighted ? dw.data() : nullptr;
  const cudaStream_t stream = shared_context().stream();
  detail::Updater<T> mover(n, d, k, sums);
  const std::vector<double> max_abs = mover.column_max_abs(dx.data(), n, weights, stream);
  mover.set_scales(max_abs, weighted);
  const std::string where = "n=" + std::to_string(n) + " d=" + std::to_string(d) + " k=" + std::to_string(k) +
                            (weighted ? " weighted" : "") + " element bytes=" + std::to_string(sizeof(T));
  mover.update(dx.data(), weights, da.data(), dmin.data(), ca.data(), dold.data(), moved.data(), stream, true);
  EXPECT_FALSE(mover.moved_changes()) << where << ": nothing summed yet to move from";
  for (const bool to_b : {true, false}) {
    std::int32_t* labels = to_b ? db.data() : da.data();
    const int* counts = to_b ? cb.data() : ca.data();
    const double moved_shift =
        mover.update(dx.data(), weights, labels, dmin.data(), counts, dold.data(), moved.data(), stream, true);
    ASSERT_TRUE(mover.moved_changes()) << where;
    detail::Updater<T> summer(n, d, k, sums);
    summer.set_scales(max_abs, weighted);
    const double fresh_shift =
        summer.update(dx.data(), weights, labels, dmin.data(), counts, dold.data(), fresh.data(), stream);
    EXPECT_EQ(fresh.to_host(), moved.to_host()) << where << (to_b ? ": A to B" : ": B back to A");
    EXPECT_EQ(fresh_shift, moved_shift) << where;
  }
}

TEST_F(KmeansGpu, MovingChangedPointsGivesTheSumsOfAllPoints) {
  using F = detail::Updater<float>;
  for (const bool weighted : {false, true})
    for (const auto sums : {F::Sums::binned, F::Sums::registers, F::Sums::sorted}) {
      moving_changed_points_gives_fresh_sums<float>(sums, 5003, 37, 16, weighted);
      moving_changed_points_gives_fresh_sums<double>(static_cast<detail::Updater<double>::Sums>(sums), 3001, 130, 9,
                                                     weighted);
    }
  // k = 301, not 300: B's relabelling would empty 15 of 300 clusters, and the moves of an empty cluster's
  // refill change the labels the fresh update then reads.
  moving_changed_points_gives_fresh_sums<__half>(detail::Updater<__half>::Sums::sorted, 20011, 64, 301, false);
  moving_changed_points_gives_fresh_sums<float>(F::Sums::sorted, 1, 3, 1, true);
}

/// A fit whose updates move the changed points (the default) gives the bits of one that sums all points
/// every iteration (SKINNY_KMEANS_MOVES=0): labels, centroids, inertia and iterations, from k-means|| on more
/// clusters than blobs (points keep changing clusters for a while), weighted and not.
TEST_F(KmeansGpu, FitsMovingChangedPointsAsSummingAll) {
  Context& ctx = shared_context();
  const std::int64_t n = 30011, d = 19;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  make_blobs<float>(ctx, x.data(), n, d, 40, 5, 1.5, 4.0);
  std::vector<double> w(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) w[static_cast<std::size_t>(i)] = 0.5 + double(i % 3);
  for (const bool weighted : {false, true}) {
    Params p;
    p.k = 64;
    p.max_iter = 60;
    p.tol = 0;
    p.seed = 3;
    const std::vector<double> weights = weighted ? w : std::vector<double>{};
    const Result<float> moving = fit<float>(ctx, x.data(), n, d, p, {}, weights);
    ASSERT_EQ(0, setenv("SKINNY_KMEANS_MOVES", "0", 1));
    const Result<float> all = fit<float>(ctx, x.data(), n, d, p, {}, weights);
    ASSERT_EQ(0, unsetenv("SKINNY_KMEANS_MOVES"));
    EXPECT_GT(all.n_iter, 3) << "iterations where few labels change";
    EXPECT_EQ(all.labels, moving.labels) << weighted;
    EXPECT_EQ(all.centroids, moving.centroids) << weighted;
    EXPECT_EQ(all.inertia, moving.inertia) << weighted;
    EXPECT_EQ(all.n_iter, moving.n_iter) << weighted;
  }
}

/// Binned sums refuse a k whose sums for one vector of columns do not fit a block's shared memory; the
/// automatic choice takes them for narrow rows with many points, registers for other rows and few
/// clusters, the sort otherwise.
TEST_F(KmeansGpu, EachWayOfSummingWhereItFitsAndPays) {
  using F = detail::Updater<float>;
  EXPECT_THROW(F(1000, 8, 1 << 20, F::Sums::binned), std::invalid_argument);
  EXPECT_EQ(F(1000, 8, 1 << 20).way(), F::Sums::sorted);
  EXPECT_EQ(F(1 << 20, 16, 128).way(), F::Sums::binned);
  EXPECT_EQ(F(1 << 20, 2, 1024).way(), F::Sums::binned);
  EXPECT_EQ(F(1 << 20, 128, 128).way(), F::Sums::sorted);
  EXPECT_EQ(F(1000, 16, 128).way(), F::Sums::sorted);  // few points: the flushes would cost more than the read
  // Register sums up to 32 clusters when asked for; by themselves for few clusters of float or double rows
  // up to 128 wide that are not binned (where they measured faster than the sort).
  EXPECT_THROW(F(1000, 36, 33, F::Sums::registers), std::invalid_argument);
  EXPECT_EQ(F(1 << 20, 128, 16).way(), F::Sums::registers);
  EXPECT_EQ(detail::Updater<double>(1 << 20, 100, 3).way(), detail::Updater<double>::Sums::registers);
  EXPECT_EQ(F(1 << 20, 128, 17).way(), F::Sums::sorted);
  EXPECT_EQ(F(1 << 18, 4096, 16).way(), F::Sums::sorted);
  EXPECT_EQ(detail::Updater<__half>(1 << 20, 128, 16).way(), detail::Updater<__half>::Sums::sorted);
}

/// The sums are exact integers: binned, registers or sorted, in one call or in uneven parts, the new centroids
/// are the same bits (what lets chunks of a stream and shards on several GPUs agree with one GPU).
template <class T>
void sums_do_not_depend_on_the_split(std::int64_t n, std::int64_t d, std::int64_t k) {
  using Sums = typename detail::Updater<T>::Sums;
  const auto x = testing::random_nonzero<T>(static_cast<std::size_t>(n * d), 43);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  std::vector<int> counts(static_cast<std::size_t>(k), 0);
  std::vector<double> w(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    ++counts[labels[i] = static_cast<std::int32_t>((i * 13 + i / 5) % k)];
    w[i] = 1.0 + double(i % 3);
  }
  DeviceBuffer<T> dx(x), dold(static_cast<std::size_t>(k * d)), dnew(static_cast<std::size_t>(k * d)),
      dmin(static_cast<std::size_t>(n));
  DeviceBuffer<std::int32_t> dlabels(labels);
  DeviceBuffer<int> dcounts(counts);
  DeviceBuffer<double> dw(w);
  const cudaStream_t stream = shared_context().stream();
  std::vector<std::vector<T>> results;
  for (const Sums sums : {Sums::binned, Sums::registers, Sums::sorted})
    for (const std::int64_t parts : {1, 3}) {
      detail::Updater<T> updater(n, d, k, sums);
      updater.set_scales(updater.column_max_abs(dx.data(), n, dw.data(), stream), true);
      updater.begin(stream);
      const std::int64_t cuts[4] = {0, parts == 1 ? n : n / 7, parts == 1 ? n : n / 7 + n / 2, n};
      for (std::int64_t p = 0; p < 3; ++p)
        if (cuts[p + 1] > cuts[p])
          updater.accumulate(dx.data() + cuts[p] * d, dw.data() + cuts[p], dlabels.data() + cuts[p], cuts[p + 1] - cuts[p],
                             stream);
      updater.finish(dx.data(), dw.data(), dlabels.data(), dmin.data(), dcounts.data(), dold.data(), dnew.data(), stream);
      results.push_back(dnew.to_host());
    }
  for (std::size_t r = 1; r < results.size(); ++r)
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[r].data(), results[0].size() * sizeof(T)))
        << "way " << r << " n=" << n << " d=" << d << " k=" << k;
}

TEST_F(KmeansGpu, SumsDoNotDependOnHowThePointsAreSplit) {
  sums_do_not_depend_on_the_split<float>(10007, 36, 16);
  sums_do_not_depend_on_the_split<float>(5001, 7, 5);
  sums_do_not_depend_on_the_split<double>(10007, 36, 16);
  sums_do_not_depend_on_the_split<double>(3001, 1, 3);
}

/// An empty cluster takes the point farthest from its centroid, whichever way the sums are formed: its
/// centroid becomes that point, the point's old cluster loses it, and its label changes.
template <class T>
void update_relocates(typename detail::Updater<T>::Sums sums) {
  const std::int64_t n = 50, d = 8, k = 4, far = 17;
  const auto x = testing::random_nonzero<T>(static_cast<std::size_t>(n * d), 61);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  std::vector<int> counts(static_cast<std::size_t>(k), 0);
  std::vector<T> mindist(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    ++counts[labels[i] = static_cast<std::int32_t>(i % (k - 1))];  // cluster k - 1 is empty
    mindist[i] = i == far ? T(100) : T(i % 7);
  }
  DeviceBuffer<T> dx(x), dold(static_cast<std::size_t>(k * d)), dnew(static_cast<std::size_t>(k * d)), dmin(mindist);
  dold.copy_from(std::vector<T>(static_cast<std::size_t>(k * d), T(0)));
  DeviceBuffer<std::int32_t> dlabels(labels);
  DeviceBuffer<int> dcounts(counts);
  detail::Updater<T> updater(n, d, k, sums);
  updater.set_scales(updater.column_max_abs(dx.data(), n, nullptr, shared_context().stream()), false);
  updater.update(dx.data(), nullptr, dlabels.data(), dmin.data(), dcounts.data(), dold.data(), dnew.data(),
                 shared_context().stream());
  const std::vector<T> got = dnew.to_host();
  const std::int32_t from = labels[far];
  double max_abs = 0;
  for (const T v : x) max_abs = std::max(max_abs, std::abs(double(v)));
  for (std::int64_t j = 0; j < d; ++j) {
    // Exact in float; in double to the sums' resolution, 2^-50 of the largest magnitude (fixed_point.hpp).
    EXPECT_NEAR(double(x[far * d + j]), double(got[(k - 1) * d + j]), std::ldexp(max_abs, -50))
        << "the empty cluster's centroid is the farthest point";
    if (sizeof(T) == 4) EXPECT_EQ(x[far * d + j], got[(k - 1) * d + j]);
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i)
      if (labels[i] == from && i != far) s += double(x[i * d + j]);
    EXPECT_NEAR(s / (counts[from] - 1), double(got[from * d + j]), 1e-6) << "dimension " << j;
  }
  EXPECT_EQ(k - 1, dlabels.to_host()[far]);
}

TEST_F(KmeansGpu, UpdatesRelocateToEmptyClusters) {
  using F = detail::Updater<float>;
  using D = detail::Updater<double>;
  for (const auto sums : {F::Sums::binned, F::Sums::registers, F::Sums::sorted}) update_relocates<float>(sums);
  for (const auto sums : {D::Sums::binned, D::Sums::registers, D::Sums::sorted}) update_relocates<double>(sums);
}

/// The deterministic device sum behind the inertia and the shift, on one block and on two passes.
TEST_F(KmeansGpu, DeviceSumsMatchTheHostInDouble) {
  for (const std::int64_t count : {std::int64_t(1), std::int64_t(1000), std::int64_t(1000003)}) {
    const auto v = testing::random_nonzero<float>(static_cast<std::size_t>(count), 51);
    double want = 0, magnitude = 0;
    for (const float x : v) want += double(x), magnitude += std::abs(double(x));
    DeviceBuffer<float> dv(v);
    DeviceBuffer<double> out(detail::kSumScratch);
    out.copy_from(std::vector<double>(detail::kSumScratch, NAN));
    detail::sum_into(dv.data(), count, out.data(), shared_context().stream());
    const double got = out.to_host()[0];
    EXPECT_NEAR(want, got, 1e-15 * magnitude * 16) << "count " << count;
    EXPECT_EQ(got, detail::sum(dv.data(), count, shared_context().stream())) << "count " << count;
  }
}

/// The iteration's statistics in one pass: the (weighted) sum as sum_into gives it alone, and how many
/// labels changed, on one block and on two passes (counts that are not multiples of a block's share).
TEST_F(KmeansGpu, DeviceSumCountsTheChangedLabelsInTheSamePass) {
  for (const std::int64_t count : {std::int64_t(1), std::int64_t(7), std::int64_t(8193), std::int64_t(1000003)}) {
    const auto size = static_cast<std::size_t>(count);
    const auto v = testing::random_nonzero<float>(size, 52);
    const auto w = testing::random_nonzero<double>(size, 53);
    std::vector<std::int32_t> now(size), before(size);
    long long want_changes = 0;
    for (std::size_t i = 0; i < size; ++i) {
      now[i] = static_cast<std::int32_t>((i * 7919) % 1021);
      before[i] = (i % 3 == 0 || i % 11 == 5) ? now[i] + 1 : now[i];
      want_changes += now[i] != before[i];
    }
    DeviceBuffer<float> dv(v);
    DeviceBuffer<double> dw(w);
    DeviceBuffer<std::int32_t> dnow(now), dbefore(before);
    for (const double* weights : {static_cast<const double*>(nullptr), static_cast<const double*>(dw.data())}) {
      DeviceBuffer<double> alone(detail::kSumScratch), both(detail::kSumScratch);
      alone.copy_from(std::vector<double>(detail::kSumScratch, NAN));
      both.copy_from(std::vector<double>(detail::kSumScratch, NAN));
      detail::sum_into(dv.data(), count, alone.data(), shared_context().stream(), weights);
      detail::sum_into(dv.data(), count, both.data(), shared_context().stream(), weights, dnow.data(), dbefore.data());
      const std::vector<double> a = alone.to_host(), b = both.to_host();
      EXPECT_EQ(a[0], b[0]) << "count " << count << (weights ? ", weighted" : "");
      EXPECT_EQ(double(want_changes), b[1]) << "count " << count << (weights ? ", weighted" : "");
    }
    detail::AsyncSum async;
    async.queue(dv.data(), count, shared_context().stream(), nullptr, dnow.data(), dbefore.data());
    SKINNY_CUDA_TRY(cudaStreamSynchronize(shared_context().stream()));
    EXPECT_EQ(static_cast<unsigned long long>(want_changes), async.changes()) << "count " << count;
  }
}

/// Also over several iterations: the move in the first one changes the centroids after fit has queued the
/// second iteration's assignment, which must then be done again on the moved centroids.
TEST_F(KmeansGpu, EmptyClusterMovesToTheFarthestPoint) {
  Context& ctx = shared_context();
  const std::int64_t n = 300, d = 3;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  make_blobs<float>(ctx, x.data(), n, d, 2, 5);
  const std::vector<float> host = x.to_host();
  std::vector<float> init = first_points(host, 3, d);
  for (std::int64_t j = 0; j < d; ++j) init[static_cast<std::size_t>(2 * d + j)] = 1e6f;  // nobody's nearest
  for (const int iterations : {1, 3}) {
    Params p;
    p.k = 3;
    p.max_iter = iterations;
    p.tol = 0;
    p.stop_when_stable = false;
    p.init = Init::given;
    const Result<float> gpu = fit<float>(ctx, x.data(), n, d, p, init);
    const Result<float> cpu = reference_fit<float>(host, n, d, p, init);
    EXPECT_LT(std::abs(gpu.centroids[6]), 1e5f) << "the empty cluster was not moved";
    EXPECT_LE(relative_difference(gpu.centroids, cpu.centroids), 1e-5) << iterations << " iterations";
    EXPECT_EQ(cpu.labels, gpu.labels) << iterations << " iterations";
    EXPECT_EQ(gpu.n_iter, iterations);
  }
}

TEST_F(KmeansGpu, RunsAreBitIdentical) {
  Context& ctx = shared_context();
  const std::int64_t n = 20000, d = 64;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  make_blobs<float>(ctx, x.data(), n, d, 16, 9, 3.0, 2.0);
  Params p;
  p.k = 16;
  p.max_iter = 20;
  p.tol = 0;
  p.backend = gemm::Algo::tsm2;
  const Result<float> a = fit<float>(ctx, x.data(), n, d, p), b = fit<float>(ctx, x.data(), n, d, p);
  EXPECT_EQ(a.labels, b.labels);
  ASSERT_EQ(a.centroids.size(), b.centroids.size());
  EXPECT_EQ(0, std::memcmp(a.centroids.data(), b.centroids.data(), a.centroids.size() * sizeof(float)));
  EXPECT_EQ(a.inertia, b.inertia);
}

TEST_F(KmeansGpu, TolSemantics) {
  Context& ctx = shared_context();
  const std::int64_t n = 5000, d = 16;
  DeviceBuffer<double> x(static_cast<std::size_t>(n * d));
  make_blobs<double>(ctx, x.data(), n, d, 4, 2);
  Params p;
  p.k = 4;
  p.max_iter = 30;
  p.tol = 0;
  p.stop_when_stable = false;
  const Result<double> all = fit<double>(ctx, x.data(), n, d, p);
  EXPECT_EQ(30, all.n_iter);
  EXPECT_FALSE(all.converged);
  p.tol = 1e-4;
  const Result<double> early = fit<double>(ctx, x.data(), n, d, p);
  EXPECT_TRUE(early.converged);
  EXPECT_LT(early.n_iter, 30);
  EXPECT_EQ(early.labels, all.labels);  // well separated: the same fixed point
  // Strict convergence: with tol = 0 the fit stops once an iteration changes no label, where the CPU
  // reference stops, with the centroids of the run that went on (nothing moves after that).
  p.tol = 0;
  p.stop_when_stable = true;
  p.init = Init::given;
  const std::vector<double> host = x.to_host();
  const std::vector<double> init = first_points(host, 4, d);
  const Result<double> stable = fit<double>(ctx, x.data(), n, d, p, init);
  const Result<double> cpu = reference_fit<double>(host, n, d, p, init);
  EXPECT_TRUE(stable.converged);
  EXPECT_LT(stable.n_iter, 30);
  EXPECT_EQ(cpu.n_iter, stable.n_iter);
  EXPECT_EQ(cpu.labels, stable.labels);
  p.stop_when_stable = false;
  EXPECT_EQ(fit<double>(ctx, x.data(), n, d, p, init).centroids, stable.centroids);
}

/// n_init runs from different seeds and returns the lowest inertia: never worse than the first run alone,
/// and the run it reports gives the same result when run alone from its seed.
TEST_F(KmeansGpu, NInitKeepsTheBestRun) {
  Context& ctx = shared_context();
  const std::int64_t n = 4000, d = 5;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  make_blobs<float>(ctx, x.data(), n, d, 12, 21, 1.5, 4.0);  // overlapping blobs: seeds matter
  Params p;
  p.k = 12;
  p.init = Init::random;
  p.seed = 5;
  const Result<float> one = fit<float>(ctx, x.data(), n, d, p);
  p.n_init = 6;
  const Result<float> best = fit<float>(ctx, x.data(), n, d, p);
  EXPECT_LE(best.inertia, one.inertia);
  p.n_init = 1;
  p.seed = best.seed;
  const Result<float> again = fit<float>(ctx, x.data(), n, d, p);
  EXPECT_EQ(best.labels, again.labels);
  EXPECT_EQ(best.inertia, again.inertia);
  p.n_init = 0;
  EXPECT_THROW(fit<float>(ctx, x.data(), n, d, p), std::invalid_argument);
}

/// Weights: the GPU matches the CPU reference's weighted Lloyd, and integer weights give what repeating
/// the points gives (the same labels for the original points, centroids and inertia to rounding).
template <class T>
void weights_match(std::int64_t n, std::int64_t d, int k, double tolerance) {
  Context& ctx = shared_context();
  const auto x = testing::random_nonzero<T>(static_cast<std::size_t>(n * d), 77);
  std::vector<double> w(static_cast<std::size_t>(n));
  std::vector<T> repeated;
  for (std::int64_t i = 0; i < n; ++i) {
    w[i] = double(1 + (i * 7) % 4);
    for (int r = 0; r < int(w[i]); ++r) repeated.insert(repeated.end(), x.begin() + i * d, x.begin() + (i + 1) * d);
  }
  const std::int64_t m = static_cast<std::int64_t>(repeated.size()) / d;
  Params p;
  p.k = k;
  p.init = Init::given;
  p.max_iter = 50;
  const std::vector<T> init = first_points(x, k, d);
  DeviceBuffer<T> dx(x), drep(repeated);
  const Result<T> weighted = fit<T>(ctx, dx.data(), n, d, p, init, w);
  const Result<T> cpu = reference_fit<T>(x, n, d, p, init, w);
  const Result<T> rep = fit<T>(ctx, drep.data(), m, d, p, init);
  const std::string where = "n=" + std::to_string(n) + " d=" + std::to_string(d) + " k=" + std::to_string(k);
  EXPECT_EQ(cpu.labels, weighted.labels) << where;
  EXPECT_LE(relative_difference(weighted.centroids, cpu.centroids), tolerance) << where;
  EXPECT_NEAR(cpu.inertia, weighted.inertia, tolerance * cpu.inertia) << where;
  std::vector<std::int32_t> rep_of_original;
  for (std::int64_t i = 0, r = 0; i < n; r += static_cast<std::int64_t>(w[i]), ++i) rep_of_original.push_back(rep.labels[r]);
  EXPECT_EQ(rep_of_original, weighted.labels) << where;
  EXPECT_LE(relative_difference(weighted.centroids, rep.centroids), tolerance) << where;
  EXPECT_NEAR(rep.inertia, weighted.inertia, tolerance * rep.inertia) << where;
  std::vector<double> bad = w;
  bad[3] = 0;
  EXPECT_THROW(fit<T>(ctx, dx.data(), n, d, p, init, bad), std::invalid_argument);
  bad[3] = NAN;
  EXPECT_THROW(fit<T>(ctx, dx.data(), n, d, p, init, bad), std::invalid_argument);
  EXPECT_THROW(fit<T>(ctx, dx.data(), n, d, p, init, std::vector<double>(n - 1, 1.0)), std::invalid_argument);
}

TEST_F(KmeansGpu, SampleWeightsMatchTheReferenceAndRepeatedPoints) {
  weights_match<float>(1001, 7, 5, 1e-5);
  weights_match<float>(3000, 33, 17, 1e-5);
  weights_match<double>(1001, 7, 5, 1e-12);
  weights_match<double>(127, 1, 3, 1e-12);
}

TEST_F(KmeansGpu, PredictGivesTheFinalLabels) {
  Context& ctx = shared_context();
  const std::int64_t n = 3001, d = 20;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  make_blobs<float>(ctx, x.data(), n, d, 6, 4, 2.0, 3.0);
  Params p;
  p.k = 6;
  const Result<float> r = fit<float>(ctx, x.data(), n, d, p);
  EXPECT_EQ(r.labels, predict<float>(ctx, x.data(), n, d, r.centroids, 6));
  EXPECT_EQ(r.labels, predict<float>(ctx, x.data(), n, d, r.centroids, 6, gemm::Algo::cublas));
}

TEST_F(KmeansGpu, RandomInitAndValidation) {
  Context& ctx = shared_context();
  const std::int64_t n = 1000, d = 8;
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  const Blobs<float> truth = make_blobs<float>(ctx, x.data(), n, d, 4, 8);
  Params p;
  p.k = 4;
  p.init = Init::random;
  p.seed = 1;
  EXPECT_GT(adjusted_rand_index(truth.labels, fit<float>(ctx, x.data(), n, d, p).labels), 0.5);
  p.k = 1001;
  EXPECT_THROW(fit<float>(ctx, x.data(), n, d, p), std::invalid_argument);
  p.k = 4;
  p.max_iter = 0;
  EXPECT_THROW(fit<float>(ctx, x.data(), n, d, p), std::invalid_argument);
  p.max_iter = 10;
  p.tol = -1;
  EXPECT_THROW(fit<float>(ctx, x.data(), n, d, p), std::invalid_argument);
  p.tol = 0;
  p.backend = gemm::Algo::wmma;  // half inputs only
  EXPECT_THROW(fit<float>(ctx, x.data(), n, d, p), std::invalid_argument);
  p.backend = gemm::Algo::automatic;
  p.init = Init::given;
  EXPECT_THROW(fit<float>(ctx, x.data(), n, d, p, std::vector<float>(3)), std::invalid_argument);
}

TEST_F(KmeansGpu, SixtyFourBitSizes) {
  // n * d > 2^31 elements: 8.6 GB of float.
  const std::int64_t n = (std::int64_t(1) << 21) + 3, d = 1025;
  std::size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free_bytes, &total));
  if (double(free_bytes) < 1.3 * double(n * d) * sizeof(float)) GTEST_SKIP() << "needs ~11 GB of free GPU memory";
  Context& ctx = shared_context();
  DeviceBuffer<float> x(static_cast<std::size_t>(n * d));
  const Blobs<float> truth = make_blobs<float>(ctx, x.data(), n, d, 8, 12);
  Params p;
  p.k = 8;
  p.max_iter = 5;
  const Result<float> r = fit<float>(ctx, x.data(), n, d, p);
  EXPECT_DOUBLE_EQ(1.0, adjusted_rand_index(truth.labels, r.labels));
}

}  // namespace
}  // namespace skinny::kmeans
