// The CPU reference GEMM and the error measure, checked on cases whose answers are known exactly.
#include <skinny/gemm/reference.hpp>

#include "support/random_matrix.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace skinny::gemm {
namespace {

HostMatrix rm(std::int64_t r, std::int64_t c, std::int64_t ld = 0) { return {r, c, ld ? ld : c, Layout::row_major}; }
HostMatrix cm(std::int64_t r, std::int64_t c, std::int64_t ld = 0) { return {r, c, ld ? ld : r, Layout::col_major}; }

TEST(Reference, SmallProductKnownByHand) {
  // [1 2 3; 4 5 6] * [7 8; 9 10; 11 12] = [58 64; 139 154]
  const std::vector<double> a{1, 2, 3, 4, 5, 6}, b{7, 8, 9, 10, 11, 12};
  std::vector<double> c(4, 0.0);
  const auto r = reference_gemm(rm(2, 3), a, rm(3, 2), b, rm(2, 2), c, 1.0, 0.0);
  EXPECT_EQ(r, (std::vector<double>{58, 64, 139, 154}));
  EXPECT_EQ(c, (std::vector<double>{58, 64, 139, 154}));
}

TEST(Reference, AlphaBetaAndBetaZeroIgnoresOldC) {
  const std::vector<float> a{1, 2}, b{3, 4};  // 1x2 * 2x1 = 11
  std::vector<float> c{std::numeric_limits<float>::quiet_NaN()};
  reference_gemm(rm(1, 2), a, rm(2, 1), b, rm(1, 1), c, 2.0, 0.0);
  EXPECT_EQ(c[0], 22.0f);  // beta == 0: the NaN in C is not read
  c[0] = 10;
  reference_gemm(rm(1, 2), a, rm(2, 1), b, rm(1, 1), c, -1.0, 0.5);
  EXPECT_EQ(c[0], -11.0f + 5.0f);
}

TEST(Reference, LayoutsAndLeadingDimensionsDescribeTheSameMatrix) {
  // The same 3x2 A stored row-major with ld 4 and column-major with ld 5 gives the same product.
  const std::vector<double> a_rm{1, 2, -1, -1, 3, 4, -1, -1, 5, 6};
  const std::vector<double> a_cm{1, 3, 5, -1, -1, 2, 4, 6};
  const std::vector<double> b{1, -1, 2, 0.5};  // 2x2 row-major
  std::vector<double> c1(6), c2(6);
  const auto r1 = reference_gemm(rm(3, 2, 4), a_rm, rm(2, 2), b, rm(3, 2), c1, 1.0, 0.0);
  const auto r2 = reference_gemm(cm(3, 2, 5), a_cm, rm(2, 2), b, rm(3, 2), c2, 1.0, 0.0);
  EXPECT_EQ(r1, r2);
  EXPECT_EQ(r1, (std::vector<double>{5, 0, 11, -1, 17, -2}));
}

TEST(Reference, ColumnMajorOutputIsWrittenInItsLayoutAndPaddingIsUntouched) {
  const std::vector<double> a{1, 2, 3, 4};  // 2x2 row-major
  const std::vector<double> identity{1, 0, 0, 1};
  std::vector<double> c(6, -7.0);  // column-major 2x2 with ld 3: rows 0..1 used, row 2 is padding
  reference_gemm(rm(2, 2), a, rm(2, 2), identity, cm(2, 2, 3), c, 1.0, 0.0);
  EXPECT_EQ(c, (std::vector<double>{1, 3, -7, 2, 4, -7}));
}

TEST(Reference, AccumulatesInDoubleForHalfInputs) {
  // 4096 products of 1 * 2^-11: exact in double, while a float accumulator would also be exact but a
  // half one would stall at 2^-11 * 2048. Checks the half path converts and accumulates in double.
  const std::int64_t k = 4096;
  const std::vector<__half> a(k, __float2half(1.0f)), b(k, __float2half(0x1p-11f));
  std::vector<float> c(1);
  const auto r = reference_gemm(rm(1, k), a, rm(k, 1), b, rm(1, 1), c, 1.0, 0.0);
  EXPECT_EQ(r[0], 2.0);
}

TEST(Reference, RejectsMismatchedShapesAndShortStorage) {
  std::vector<double> a(6), b(6), c(4);
  EXPECT_THROW(reference_gemm(rm(2, 3), a, rm(2, 3), b, rm(2, 3), c, 1.0, 0.0), std::invalid_argument);
  EXPECT_THROW(reference_gemm(rm(2, 3, 5), a, rm(3, 2), b, rm(2, 2), c, 1.0, 0.0), std::invalid_argument);
}

TEST(Compare, ReportsRelativeErrorAndWorstElement) {
  const std::vector<double> ref{3, 4, 0, 0};  // ||ref|| = 5
  const std::vector<float> got{3, 4, 0, 0.5f};
  const auto rep = compare(rm(2, 2), got, ref);
  EXPECT_DOUBLE_EQ(rep.relative_error, 0.1);
  EXPECT_EQ(rep.worst_row, 1);
  EXPECT_EQ(rep.worst_col, 1);
  EXPECT_DOUBLE_EQ(rep.worst_abs, 0.5);
  EXPECT_EQ(rep.non_finite, 0);
}

TEST(Compare, NonFiniteOutputNeverPasses) {
  const std::vector<double> ref{1, 2};
  const std::vector<float> got{1, std::numeric_limits<float>::quiet_NaN()};
  const auto rep = compare(rm(1, 2), got, ref);
  EXPECT_EQ(rep.non_finite, 1);
  EXPECT_FALSE(rep.relative_error <= 1.0);
}

TEST(ErrorBound, GrowsWithKAndPrecision) {
  EXPECT_LT(error_bound(1, 0x1p-24), error_bound(1000, 0x1p-24));
  EXPECT_LT(error_bound(1000, 0x1p-53), error_bound(1000, 0x1p-24));
  // Typical float GEMM error at k = 4096 is ~1e-6; the bound must be above that and far below 1e-3.
  EXPECT_GT(error_bound(4096, 0x1p-24), 1e-6);
  EXPECT_LT(error_bound(4096, 0x1p-24), 1e-4);
}

TEST(ErrorBound, RandomFloatProductsStayInsideIt) {
  // Float accumulation of random data against the double reference: the bound holds with margin.
  const std::int64_t m = 17, n = 9, k = 2000;
  const auto a = testing::random_nonzero<float>(m * k, 1), b = testing::random_nonzero<float>(k * n, 2);
  std::vector<float> c(m * n), c_float(m * n);
  const auto ref = reference_gemm(rm(m, k), a, rm(k, n), b, rm(m, n), c, 1.0, 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (std::int64_t p = 0; p < k; ++p) acc += a[i * k + p] * b[p * n + j];
      c_float[i * n + j] = acc;
    }
  const auto rep = compare(rm(m, n), c_float, ref);
  EXPECT_GT(rep.relative_error, 0.0);  // float really rounds
  EXPECT_LT(rep.relative_error, error_bound(k, 0x1p-24));
}

}  // namespace
}  // namespace skinny::gemm
