// sq_distances() and count_non_finite() (the Python bindings' transform, score and input check)
// against direct CPU computation, and their argument checks.
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/kmeans/distances.hpp>
#include <skinny/kmeans/finite.hpp>

#include "support/gpu_fixture.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace skinny::kmeans {
namespace {

using testing::shared_context;

class DistancesGpu : public testing::GpuTest {};

TEST_F(DistancesGpu, MatchesDirectComputationInDouble) {
  const std::int64_t n = 1000, d = 37, k = 5;  // not multiples of any tile
  std::vector<double> x(n * d), c(k * d);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * double(i)) * 3;
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = std::cos(0.11 * double(i));
  DeviceBuffer<double> dx(x), out(static_cast<std::size_t>(n * k));
  sq_distances<double>(shared_context(), dx.data(), n, d, c, k, out.data());
  const std::vector<double> got = out.to_host();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < k; ++j) {
      double want = 0;
      for (std::int64_t t = 0; t < d; ++t) want += (x[i * d + t] - c[j * d + t]) * (x[i * d + t] - c[j * d + t]);
      ASSERT_NEAR(got[i * k + j], want, 1e-9 * (1 + want)) << "point " << i << ", centroid " << j;
    }
}

TEST_F(DistancesGpu, ClampsAtZeroAndChecksArguments) {
  const std::vector<float> x{1e4f, 1e4f, 1e4f};  // one point, three dimensions, on the centroid
  DeviceBuffer<float> dx(x), out(1);
  sq_distances<float>(shared_context(), dx.data(), 1, 3, x, 1, out.data());
  EXPECT_GE(out.to_host()[0], 0.0f);
  EXPECT_THROW(sq_distances<float>(shared_context(), dx.data(), 1, 3, {1.0f}, 1, out.data()), std::invalid_argument);
  EXPECT_THROW(sq_distances<float>(shared_context(), nullptr, 1, 3, x, 1, out.data()), std::invalid_argument);
  const std::vector<float> nan_centroid{0, std::numeric_limits<float>::quiet_NaN(), 0};
  EXPECT_THROW(sq_distances<float>(shared_context(), dx.data(), 1, 3, nan_centroid, 1, out.data()),
               std::invalid_argument);
}

TEST_F(DistancesGpu, CountsNonFiniteValues) {
  std::vector<float> v(100000, 1.0f);
  DeviceBuffer<float> clean(v);
  EXPECT_EQ(count_non_finite<float>(shared_context(), clean.data(), std::int64_t(v.size())), 0);
  v[5] = std::numeric_limits<float>::quiet_NaN();
  v[99999] = -std::numeric_limits<float>::infinity();
  DeviceBuffer<float> dirty(v);
  EXPECT_EQ(count_non_finite<float>(shared_context(), dirty.data(), std::int64_t(v.size())), 2);
  EXPECT_EQ(count_non_finite<double>(shared_context(), nullptr, 0), 0);
  EXPECT_THROW(count_non_finite<double>(shared_context(), nullptr, 1), std::invalid_argument);
}

}  // namespace
}  // namespace skinny::kmeans
