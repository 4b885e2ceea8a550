// The one-pass kernel (detail::assign_and_sum): its labels, distances and counts against exact distances
// in double, and its cluster sums against the exact integer sums of the fixed-point values of the points
// under its own labels, on odd shapes (n, d, k not multiples of any tile; one to eight blocks per
// cluster), float and 16-bit, with poisoned outputs. Then fit: one_pass is taken where it applies and
// gives the two-pass fit's labels and centroids bit for bit.
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/kmeans/kmeans.hpp>

#include "../../kmeans/src/detail.hpp"
#include "../../kmeans/src/fixed_point.hpp"
#include "test_data.hpp"
#include "support/gpu_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace skinny::kmeans {
namespace {

using testing::shared_context;

class AssignAndSumGpu : public testing::GpuTest {
 protected:
  void SetUp() override {
    testing::GpuTest::SetUp();
    if (IsSkipped()) return;
    int device = 0, major = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (major < 9) GTEST_SKIP() << "the one-pass kernel needs thread-block clusters (compute capability >= 9.0)";
  }
};

template <class T>
void matches_exact(std::int64_t n, std::int64_t d, std::int64_t k) {
  const auto t = testing::few_clusters_case<T>(n, d, k, 71);
  // Each column's scale from its largest magnitude, as the Updater fixes them.
  std::vector<double> scale(static_cast<std::size_t>(d));
  for (std::int64_t j = 0; j < d; ++j) {
    double m = 0;
    for (std::int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(t.xs[i * d + j])));
    scale[j] = detail::fixed_scale(m);
  }

  DeviceBuffer<T> dx(t.x);
  DeviceBuffer<float> dc(t.c), dxn(t.xn), dcn(t.cn), dmin(std::vector<float>(static_cast<std::size_t>(n), NAN));
  DeviceBuffer<std::int32_t> dl(std::vector<std::int32_t>(static_cast<std::size_t>(n), -5));
  DeviceBuffer<int> dcounts(std::vector<int>(static_cast<std::size_t>(k), 0));
  DeviceBuffer<unsigned long long> dsums(std::vector<unsigned long long>(static_cast<std::size_t>(2 * k * d), 0));
  DeviceBuffer<double> dscale(scale);
  ASSERT_TRUE(detail::assign_and_sum_applies(dx.data(), d, k)) << t.where;
  const detail::SumTarget target{dsums.data(), dsums.data() + k * d, dscale.data()};
  detail::assign_and_sum(dx.data(), n, d, dc.data(), k, dxn.data(), dcn.data(), dl.data(), dmin.data(), dcounts.data(),
                         target, shared_context().stream());
  const auto labels = dl.to_host();
  testing::expect_nearest(t, labels, dmin.to_host(), dcounts.to_host());
  if (::testing::Test::HasFatalFailure()) return;

  // The sums: exactly the integers of the points' fixed-point values, added under the kernel's labels.
  const auto sums = dsums.to_host();
  std::vector<__int128> want(static_cast<std::size_t>(k * d), 0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t p = 0; p < d; ++p)
      want[labels[i] * d + p] += std::llrint(double(t.xs[i * d + p]) * scale[p]);  // exact: a power-of-two scale
  std::int64_t wrong = 0, first = -1;
  for (std::int64_t e = 0; e < k * d; ++e) {
    const __int128 got = static_cast<__int128>(static_cast<long long>(sums[e])) * (__int128(1) << 32) +
                         static_cast<__int128>(sums[k * d + e]);
    if (got != want[e] && wrong++ == 0) first = e;
  }
  EXPECT_EQ(0, wrong) << t.where << ": sums differ from the exact integer sums, first at cluster " << first / d
                      << " column " << first % d;
}

TEST_F(AssignAndSumGpu, MatchesExactDistancesAndIntegerSums) {
  // d: one block (4, 8, 132), two (516, 1000), eight (2048 with k > 16, 4096).
  for (const auto [n, d, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 4, 1}, {7, 8, 2}, {1000, 132, 3},
                               {1031, 516, 5}, {777, 1000, 9}, {300, 4096, 16}, {257, 2048, 17}, {4097, 64, 32}}) {
    matches_exact<float>(n, d, k);
    matches_exact<__half>(n, d, k);
    matches_exact<__nv_bfloat16>(n, d, k);
  }
}

/// Enough points that every block flushes its 64-bit sums during the pass, not only at its end.
TEST_F(AssignAndSumGpu, FlushesItsSumsOnLongPasses) {
  matches_exact<float>(2000003, 4, 3);
  matches_exact<__half>(2000003, 4, 3);
}

/// Many groups per cluster, with padding columns (zeroed once, then never copied) and rows of a vector
/// per thread (W = 256) or a stage's copies on 192 of the threads (W = 384); k = 2 has a kernel of its own.
TEST_F(AssignAndSumGpu, LongPassesKeepTheirPaddingZero) {
  for (const auto [n, d, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{200003, 132, 7},
                               {200003, 132, 2}, {100001, 516, 5}}) {
    matches_exact<float>(n, d, k);
    matches_exact<__half>(n, d, k);
  }
}

TEST_F(AssignAndSumGpu, AppliesOnlyWhereItCan) {
  DeviceBuffer<float> x(64 * 4100);
  EXPECT_TRUE(detail::assign_and_sum_applies(x.data(), 4096, 16));
  EXPECT_FALSE(detail::assign_and_sum_applies(x.data(), 4100, 16)) << "more than 8 blocks of 512 columns";
  EXPECT_TRUE(detail::assign_and_sum_applies(x.data(), 2048, 32));
  EXPECT_FALSE(detail::assign_and_sum_applies(x.data(), 2052, 17)) << "more than 8 blocks of 256 columns";
  EXPECT_FALSE(detail::assign_and_sum_applies(x.data(), 33, 16)) << "d not a multiple of 4";
  EXPECT_FALSE(detail::assign_and_sum_applies(x.data() + 1, 32, 16)) << "rows not 16-byte aligned";
  EXPECT_FALSE(detail::assign_and_sum_applies(x.data(), 32, 33)) << "more than 32 clusters";
  DeviceBuffer<double> xd(64);
  EXPECT_FALSE(detail::assign_and_sum_applies(xd.data(), 32, 16)) << "double";
}

/// fit takes the one-pass path where it applies, and its result is the two-pass fit's (unit weights take
/// the two-pass path: the same distances kernel family, then the Updater's own pass): the same labels,
/// and centroids bit for bit (the same integer sums).
template <class T>
void one_pass_fits_like_two_passes(std::int64_t n, std::int64_t d, int k) {
  Context& ctx = shared_context();
  const auto blobs = testing::narrow_blobs<T>(ctx, n, d, k, 23);
  const std::vector<float>& host = blobs.values;
  const DeviceBuffer<T>& x = blobs.x;
  Params p;
  p.k = k;
  p.init = Init::given;
  p.max_iter = 8;
  p.tol = 0;
  const std::vector<float> init(host.begin(), host.begin() + std::int64_t(k) * d);
  const std::string where = "n=" + std::to_string(n) + " d=" + std::to_string(d) + " k=" + std::to_string(k);
  const Result<float> one = fit<T>(ctx, x.data(), n, d, p, init);
  const Result<float> two = fit<T>(ctx, x.data(), n, d, p, init, std::vector<double>(static_cast<std::size_t>(n), 1.0));
  EXPECT_TRUE(one.one_pass) << where;
  EXPECT_FALSE(two.one_pass) << where;
  EXPECT_EQ(two.labels, one.labels) << where;
  EXPECT_EQ(two.n_iter, one.n_iter) << where;
  EXPECT_EQ(two.centroids, one.centroids) << where;
  EXPECT_EQ(two.inertia, one.inertia) << where;
  EXPECT_EQ("few-clusters", distance_method<T>(ctx, x.data(), n, d, k, gemm::Algo::automatic)) << where;
  if (std::is_same_v<T, float>)
    EXPECT_NE("few-clusters", distance_method<T>(ctx, x.data(), n, 64, k, gemm::Algo::automatic))
        << where << ": under 128 dimensions the GEMM path is faster";
  p.backend = gemm::Algo::cublas;
  EXPECT_FALSE(fit<T>(ctx, x.data(), n, d, p, init).one_pass) << where << ": a backend named by the user";
}

TEST_F(AssignAndSumGpu, OnePassFitsLikeTwoPasses) {
  // Shapes the one pass takes on either tensor-core path (route_rules.hpp: on wgmma, up to 2 clusters, and
  // 16-bit exact up to 4 from 256 dimensions).
  one_pass_fits_like_two_passes<float>(20001, 132, 2);
  one_pass_fits_like_two_passes<float>(3001, 512, 1);
  one_pass_fits_like_two_passes<__half>(5003, 1000, 4);
  one_pass_fits_like_two_passes<__nv_bfloat16>(4099, 128, 2);
}

}  // namespace
}  // namespace skinny::kmeans
