// The distance check of Params::protect on the CPU: float GEMMs simulated in two summation orders (one
// running sum, and 32-term pieces added at the end as a tiled GPU kernel does), and one-product terms as
// the tensor cores add them, over several kinds of data and shapes. Clean rounding stays below the bound
// with a margin; an error above it is seen.
#include "../../kmeans/src/detail.hpp"
#include "../../kmeans/src/protect.hpp"
#include "support/tf32.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace skinny::kmeans::detail {
namespace {

enum class Data { centred, positive, offset_normal, mixed_magnitudes };

std::vector<float> draw(Data kind, std::int64_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f), positive(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& x : v) {
    switch (kind) {
      case Data::centred: x = unit(rng); break;
      case Data::positive: x = positive(rng); break;
      case Data::offset_normal: x = 5.0f + normal(rng); break;
      case Data::mixed_magnitudes: x = unit(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10); break;
    }
  }
  return v;
}

/// x . c in float, as a GPU kernel would round it: one running FMA sum (pieces = 0), or sums of 32-term
/// pieces added in order.
float dot(const float* x, const float* c, std::int64_t d, bool pieces) {
  if (!pieces) {
    float s = 0;
    for (std::int64_t l = 0; l < d; ++l) s = std::fma(x[l], c[l], s);
    return s;
  }
  float total = 0;
  for (std::int64_t l0 = 0; l0 < d; l0 += 32) {
    float s = 0;
    for (std::int64_t l = l0; l < std::min(d, l0 + 32); ++l) s = std::fma(x[l], c[l], s);
    total += s;
  }
  return total;
}

struct Check {
  double max_ratio = 0;  ///< largest clean |difference| / bound
};

/// Clean ratios of n points against k centroids in d dimensions, the check as checked_argmin does it.
Check clean_ratios(Data kind, std::int64_t n, std::int64_t d, std::int64_t k, bool pieces, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<float> x = draw(kind, n * d, rng), c = draw(kind, k * d, rng);
  // The checksum centroid in double, rounded to float (checksum_row), and M.
  std::vector<float> s(static_cast<std::size_t>(d));
  double s_sq = 0, c_sq = 0;
  for (std::int64_t l = 0; l < d; ++l) {
    double sum = 0;
    for (std::int64_t j = 0; j < k; ++j) sum += c[static_cast<std::size_t>(j * d + l)];
    s[static_cast<std::size_t>(l)] = static_cast<float>(sum);
    s_sq += double(s[static_cast<std::size_t>(l)]) * s[static_cast<std::size_t>(l)];
  }
  for (float v : c) c_sq += double(v) * v;
  const double scale = std::sqrt(c_sq) + std::sqrt(s_sq);
  const double factor = distance_bound_factor<float>(d, k);
  Check out;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* xi = x.data() + i * d;
    double row = 0, x_sq = 0;
    for (std::int64_t j = 0; j < k; ++j) row += dot(xi, c.data() + j * d, d, pieces);
    const float carried = dot(xi, s.data(), d, pieces);
    for (std::int64_t l = 0; l < d; ++l) x_sq += double(xi[l]) * xi[l];
    const float x_sq_stored = static_cast<float>(x_sq);  // xnorm is kept in the compute type
    out.max_ratio = std::max(out.max_ratio, std::fabs(row - carried) / distance_bound(x_sq_stored, scale, factor));
  }
  return out;
}

TEST(ProtectBound, CleanRoundingStaysWellBelowTheBound) {
  double worst = 0;
  std::uint64_t seed = 1;
  for (Data kind : {Data::centred, Data::positive, Data::offset_normal, Data::mixed_magnitudes})
    for (std::int64_t d : {1, 2, 3, 17, 128, 1000})
      for (std::int64_t k : {1, 2, 7, 16, 128})
        for (bool pieces : {false, true}) {
          const Check c = clean_ratios(kind, 200, d, k, pieces, seed++);
          EXPECT_LT(c.max_ratio, 0.5) << "kind " << int(kind) << " d " << d << " k " << k << " pieces " << pieces;
          worst = std::max(worst, c.max_ratio);
        }
  std::printf("largest clean |difference| / bound: %.3g (kappa %.3g)\n", worst, kDistanceKappa);
  // The bound is not loose beyond use: somewhere clean rounding comes within 100x of it.
  EXPECT_GT(worst, 0.01);
}

/// Block checks (few clusters on the GEMM path): a block of kCheckBlockRows points, column j: the sum of
/// its float terms (in double) against (sum of its points in double) . c_j, relative to the block's bound.
double block_ratio(Data kind, std::int64_t d, std::int64_t k, bool pieces, std::uint64_t seed) {
  constexpr std::int64_t rows = kCheckBlockRows;
  std::mt19937_64 rng(seed);
  const std::vector<float> x = draw(kind, rows * d, rng), c = draw(kind, k * d, rng);
  std::vector<double> totals(static_cast<std::size_t>(d), 0.0);
  double norms = 0;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t l = 0; l < d; ++l) {
      const double v = x[static_cast<std::size_t>(i * d + l)];
      totals[static_cast<std::size_t>(l)] += v;
      norms += v * v;
    }
  const double factor = distance_bound_factor(d, kCheckBlockRows, unit_roundoff<float>());
  double worst = 0;
  for (std::int64_t j = 0; j < k; ++j) {
    const float* cj = c.data() + j * d;
    double sum = 0, carried = 0, c_sq = 0;
    for (std::int64_t i = 0; i < rows; ++i) sum += dot(x.data() + i * d, cj, d, pieces);
    for (std::int64_t l = 0; l < d; ++l) {
      carried += totals[static_cast<std::size_t>(l)] * cj[l];
      c_sq += double(cj[l]) * cj[l];
    }
    worst = std::max(worst, std::fabs(sum - carried) / distance_bound(norms, std::sqrt(c_sq), factor));
  }
  return worst;
}

TEST(ProtectBound, BlockChecksStayWellBelowTheirBound) {
  double worst = 0;
  std::uint64_t seed = 100;
  for (Data kind : {Data::centred, Data::positive, Data::offset_normal, Data::mixed_magnitudes})
    for (std::int64_t d : {1, 3, 17, 128, 1000})
      for (bool pieces : {false, true}) {
        const double r = block_ratio(kind, d, 16, pieces, seed++);
        EXPECT_LT(r, 0.5) << "kind " << int(kind) << " d " << d << " pieces " << pieces;
        worst = std::max(worst, r);
      }
  std::printf("block checks: largest clean |difference| / bound: %.3g\n", worst);
  EXPECT_GT(worst, 0.01);
}

/// The one-product terms of the fused kernel, simulated pessimistically: points truncated and centroids
/// rounded to TF32 (the products are then exact), and each step of `step` products added to the running
/// term as the tensor cores add them, every value aligned to the largest one's 24-bit unit and truncated
/// toward zero, the sum truncated to float (real tensor cores keep a few more bits).
float truncated(double v, double unit) { return static_cast<float>(std::trunc(v / unit) * unit); }
float tensor_core_term(const float* x, const float* c, std::int64_t d, int step) {
  float acc = 0;
  for (std::int64_t l0 = 0; l0 < d; l0 += step) {
    double largest = std::fabs(acc), p[16];
    const int m = static_cast<int>(std::min<std::int64_t>(step, d - l0));
    for (int i = 0; i < m; ++i) {
      p[i] = double(x[l0 + i]) * c[l0 + i];
      largest = std::max(largest, std::fabs(p[i]));
    }
    if (largest == 0) continue;
    const double unit = std::ldexp(1.0, std::ilogb(largest) - 23);
    double sum = std::trunc(acc / unit) * unit;
    for (int i = 0; i < m; ++i) sum += std::trunc(p[i] / unit) * unit;
    acc = sum == 0 ? 0.f : truncated(sum, std::ldexp(1.0, std::ilogb(sum) - 23));
  }
  return acc;
}


/// The largest clean |difference| / one_product_block_bound of two blocks of kOneProductBlockRows points;
/// with `error`, that of the first block with one term off by 4 bounds instead.
double one_product_ratio(Data kind, std::int64_t d, std::int64_t k, int step, std::uint64_t seed, bool error = false) {
  constexpr std::int64_t rows = kOneProductBlockRows;
  std::mt19937_64 rng(seed);
  const std::vector<float> x = draw(kind, 2 * rows * d, rng), c = draw(kind, k * d, rng);
  std::vector<float> xt(x.size()), ct(c.size());
  std::transform(x.begin(), x.end(), xt.begin(), testing::tf32_truncated);
  std::transform(c.begin(), c.end(), ct.begin(), testing::tf32_rounded);
  std::vector<double> s(static_cast<std::size_t>(d), 0.0);  // s^ in double
  double c_sq = 0, s_sq = 0;
  for (std::int64_t j = 0; j < k; ++j)
    for (std::int64_t l = 0; l < d; ++l) {
      s[static_cast<std::size_t>(l)] += ct[static_cast<std::size_t>(j * d + l)];
      c_sq += double(c[static_cast<std::size_t>(j * d + l)]) * c[static_cast<std::size_t>(j * d + l)];
    }
  for (double v : s) s_sq += v * v;
  const double scale = std::sqrt(c_sq) + std::sqrt(s_sq);
  double worst = 0;
  for (std::int64_t b = 0; b < 2; ++b) {
    double sums = 0, carried = 0, norm = 0;
    for (std::int64_t i = b * rows; i < (b + 1) * rows; ++i) {
      // As the kernel adds them: a lane's 16 terms in float, those sums in double.
      float lane = 0;
      for (std::int64_t j = 0; j < k; ++j) {
        lane += tensor_core_term(xt.data() + i * d, ct.data() + j * d, d, step);
        if (j % 16 == 15 || j == k - 1) {
          sums += lane;
          lane = 0;
        }
      }
      for (std::int64_t l = 0; l < d; ++l) {
        carried += double(xt[static_cast<std::size_t>(i * d + l)]) * s[static_cast<std::size_t>(l)];
        norm += double(x[static_cast<std::size_t>(i * d + l)]) * x[static_cast<std::size_t>(i * d + l)];
      }
    }
    const double bound = one_product_block_bound(norm, carried, scale, one_product_factor(d, k), one_product_bias(d));
    if (error) return std::fabs(sums + 4 * bound - carried) / bound;
    worst = std::max(worst, std::fabs(sums - carried) / bound);
  }
  return worst;
}

TEST(ProtectBound, OneProductBlockChecksStayWellBelowTheirBound) {
  double worst = 0;
  std::uint64_t seed = 300;
  for (Data kind : {Data::centred, Data::positive, Data::offset_normal, Data::mixed_magnitudes})
    for (std::int64_t d : {1, 3, 17, 128, 1000})
      for (std::int64_t k : {1, 7, 130})
        for (int step : {4, 8}) {
          const double r = one_product_ratio(kind, d, k, step, seed++);
          EXPECT_LT(r, 0.5) << "kind " << int(kind) << " d " << d << " k " << k << " step " << step;
          worst = std::max(worst, r);
        }
  std::printf("one-product block checks: largest clean |difference| / bound: %.3g\n", worst);
  EXPECT_GT(worst, 0.01);
  // An error of 4 bounds in one term is seen.
  EXPECT_GT(one_product_ratio(Data::offset_normal, 128, 130, 8, 7, true), 1);
}

TEST(ProtectBound, ABoundIsPositiveAndGrowsWithTheShape) {
  EXPECT_GT(distance_bound_factor<float>(128, 16), distance_bound_factor<float>(16, 16));
  EXPECT_GT(distance_bound_factor<float>(16, 1024), distance_bound_factor<float>(16, 16));
  EXPECT_LT(distance_bound_factor<double>(128, 16), distance_bound_factor<float>(128, 16) * 1e-8);
  EXPECT_DOUBLE_EQ(distance_bound(4.0, 3.0, 0.5), 0.5 * 2.0 * 3.0);
  EXPECT_DOUBLE_EQ(distance_bound(-1.0, 3.0, 0.5), 0.0);  // a norm rounded below 0 counts as 0
}

TEST(ProtectBound, AnErrorAboveTheBoundFailsTheCheck) {
  // One point, the check as the kernel does it: a flipped exponent bit of one term is far above.
  std::mt19937_64 rng(5);
  const std::int64_t d = 64, k = 16;
  const std::vector<float> x = draw(Data::centred, d, rng), c = draw(Data::centred, k * d, rng);
  std::vector<float> s(static_cast<std::size_t>(d), 0.0f);
  double c_sq = 0, s_sq = 0, x_sq = 0;
  for (std::int64_t l = 0; l < d; ++l) {
    double sum = 0;
    for (std::int64_t j = 0; j < k; ++j) sum += c[static_cast<std::size_t>(j * d + l)];
    s[static_cast<std::size_t>(l)] = static_cast<float>(sum);
    s_sq += double(s[static_cast<std::size_t>(l)]) * s[static_cast<std::size_t>(l)];
    x_sq += double(x[static_cast<std::size_t>(l)]) * x[static_cast<std::size_t>(l)];
  }
  for (float v : c) c_sq += double(v) * v;
  const double bound = distance_bound(x_sq, std::sqrt(c_sq) + std::sqrt(s_sq), distance_bound_factor<float>(d, k));
  std::vector<float> g(static_cast<std::size_t>(k));
  for (std::int64_t j = 0; j < k; ++j) g[static_cast<std::size_t>(j)] = dot(x.data(), c.data() + j * d, d, true);
  const float carried = dot(x.data(), s.data(), d, true);
  const auto difference = [&] {
    double row = 0;
    for (float v : g) row += v;
    return std::fabs(row - carried);
  };
  ASSERT_LE(difference(), bound);
  g[3] += static_cast<float>(4 * bound);  // an error 4x the bound
  EXPECT_GT(difference(), bound);
}

}  // namespace
}  // namespace skinny::kmeans::detail
