// Data and checks shared by the K-means GPU tests: blobs in 16 bits (and the float values they hold); for
// the few-clusters kernels (few_nearest, assign_and_sum), random non-zero points and centroids with their
// squared norms, and labels and distances checked against exact distances in double.
#pragma once

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/kmeans/kmeans.hpp>

#include "support/random_matrix.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace skinny::testing {

/// make_blobs' float blobs stored as T: `values` are the floats T holds (what a fit of x sees), `x` the
/// points on the device.
template <class T>
struct NarrowBlobs {
  std::vector<float> values;
  DeviceBuffer<T> x;
};
template <class T>
NarrowBlobs<T> narrow_blobs(Context& ctx, std::int64_t n, std::int64_t d, int k, std::uint64_t seed) {
  DeviceBuffer<float> xf(static_cast<std::size_t>(n * d));
  kmeans::make_blobs<float>(ctx, xf.data(), n, d, k, seed, 1.5, 4.0);
  std::vector<float> values = xf.to_host();
  std::vector<T> narrow(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(narrow[i] = static_cast<T>(values[i]));
  return {std::move(values), DeviceBuffer<T>(narrow)};
}

/// n x d points stored as T, the float values a kernel sees of them, k x d float centroids, and the
/// squared norms of both (float, as the library computes them).
template <class T>
struct FewClustersCase {
  std::int64_t n, d, k;
  std::vector<T> x;
  std::vector<float> xs, c, xn, cn;
  std::string where;
};

template <class T>
FewClustersCase<T> few_clusters_case(std::int64_t n, std::int64_t d, std::int64_t k, std::uint32_t seed) {
  FewClustersCase<T> t{n, d, k, {}, {}, random_nonzero<float>(static_cast<std::size_t>(k * d), seed + 1),
                       std::vector<float>(static_cast<std::size_t>(n)), std::vector<float>(static_cast<std::size_t>(k)),
                       "n=" + std::to_string(n) + " d=" + std::to_string(d) + " k=" + std::to_string(k) +
                           " element bytes=" + std::to_string(sizeof(T))};
  const auto xf = random_nonzero<float>(static_cast<std::size_t>(n * d), seed);
  t.x.resize(xf.size());
  t.xs.resize(xf.size());
  for (std::size_t i = 0; i < xf.size(); ++i) t.xs[i] = static_cast<float>(t.x[i] = static_cast<T>(xf[i]));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < d; ++j) t.xn[i] += t.xs[i * d + j] * t.xs[i * d + j];
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t j = 0; j < d; ++j) t.cn[i] += t.c[i * d + j] * t.c[i * d + j];
  return t;
}

/// Each label names a centroid whose exact distance is within 64 float round-offs of (||x||^2 + the
/// largest ||c||^2) of the nearest one, and the returned distance is that close to the label's exact
/// distance; the counts per label are the labels'.
template <class T>
void expect_nearest(const FewClustersCase<T>& t, const std::vector<std::int32_t>& labels,
                    const std::vector<float>& dist, const std::vector<int>& counts) {
  std::vector<int> want_counts(static_cast<std::size_t>(t.k), 0);
  const double max_cn = *std::max_element(t.cn.begin(), t.cn.end());
  for (std::int64_t i = 0; i < t.n; ++i) {
    ASSERT_TRUE(labels[i] >= 0 && labels[i] < t.k) << t.where << " point " << i << " label " << labels[i];
    ++want_counts[labels[i]];
    double best = INFINITY, mine = 0;
    for (std::int64_t j = 0; j < t.k; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < t.d; ++p) {
        const double diff = double(t.xs[i * t.d + p]) - t.c[j * t.d + p];
        s += diff * diff;
      }
      best = std::min(best, s);
      if (j == labels[i]) mine = s;
    }
    const double bound = 64 * 1.2e-7 * (double(t.xn[i]) + max_cn);
    ASSERT_LE(mine - best, bound) << t.where << " point " << i;
    ASSERT_NEAR(mine, double(dist[i]), bound) << t.where << " point " << i;
  }
  EXPECT_EQ(want_counts, counts) << t.where;
}

}  // namespace skinny::testing
