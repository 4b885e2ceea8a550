// ABFT math on the CPU: the reference encodings, the decision of verification, bit flips, names and limits.
#include "../../abft/src/detail.hpp"

#include <skinny/abft/abft.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace skinny::abft {
namespace {

TEST(AbftReference, ChecksumsOfASmallMatrixByHand) {
  // A (2 x 3, column-major) = [1 2 3; 4 5 6]
  const std::vector<double> a{1, 4, 2, 5, 3, 6};
  std::vector<double> r, k;
  reference_encode(a, 2, 3, 0, r, k);
  // Row checksums (m x 2): e: 6, 15; w: 1*1 + 2*2 + 3*3 = 14, 4 + 10 + 18 = 32.
  EXPECT_EQ((std::vector<double>{6, 15, 14, 32}), r);
  // Column checksums (2 x n): e: 5, 7, 9; w: 1 + 8 = 9, 2 + 10 = 12, 3 + 12 = 15.
  EXPECT_EQ((std::vector<double>{5, 9, 7, 12, 9, 15}), k);
}

TEST(AbftReference, DensityRestartsTheWeightsInEveryBlock) {
  // A (1 x 4) = [1 2 3 4], blocks of 2 columns: (1 + 2, 1 + 4), (3 + 4, 3 + 8).
  const std::vector<double> a{1, 2, 3, 4};
  std::vector<double> r, k;
  reference_encode(a, 1, 4, 2, r, k);
  EXPECT_EQ((std::vector<double>{3, 5, 7, 11}), r);
  EXPECT_EQ(2, blocks(4, 2));
  EXPECT_EQ(1, blocks(4, 0));
  EXPECT_EQ(1, blocks(4, 9));
  EXPECT_EQ(3, blocks(5, 2));
}

TEST(AbftLimits, BackendsSayWhatTheyCannotDo) {
  EXPECT_EQ("", cannot_encode(Backend::cublas, 100, 100, 7));
  EXPECT_NE(std::string::npos, cannot_encode(Backend::tsm2, 10000, 10000, 100).find("at most 32 checksum blocks"));
  EXPECT_EQ("", cannot_encode(Backend::tsm2, 10000, 10000, 1000));
  EXPECT_NE(std::string::npos, cannot_encode(Backend::fused, 4096, 4096, 1000).find("multiple of 512"));
  EXPECT_EQ("", cannot_encode(Backend::fused, 4096, 4096, 1024));
  EXPECT_NE(std::string::npos, cannot_encode(Backend::fused, 0, 5, 0).find("need m, n >= 1"));
  EXPECT_THROW(backend_from_name("magma"), std::invalid_argument);
  EXPECT_EQ(Backend::tsm2, backend_from_name("tsm2"));
  EXPECT_EQ(BitRange::exponent, bit_range_from_name("exponent"));
  EXPECT_THROW(bit_range_from_name("middle"), std::invalid_argument);
}

TEST(AbftInjection, FlipBitChangesExactlyThatBit) {
  EXPECT_EQ(-1.0f, flip_bit(1.0f, 31));
  EXPECT_EQ(1.5f, flip_bit(1.0f, 22));  // the top mantissa bit: 1 + 2^-1
  EXPECT_EQ(1.0f, flip_bit(flip_bit(1.0f, 7), 7));
  EXPECT_EQ(0.25, flip_bit(1.0, 53));  // exponent 1023 - 2: 2^-2
  EXPECT_THROW(flip_bit(1.0f, 32), std::invalid_argument);
}

/// Checks of `count` positions, all consistent with thresholds of 1.
detail::Checks consistent(std::size_t count) {
  detail::Checks c;
  c.carried_e.assign(count, 100);
  c.carried_w.assign(count, 200);
  c.computed_e = c.carried_e;
  c.computed_w = c.carried_w;
  c.tau_e.assign(count, 1);
  c.tau_w.assign(count, 1);
  return c;
}

TEST(AbftVerify, CleanWithinThresholds) {
  detail::Checks cols = consistent(5), rows = consistent(4);
  cols.computed_e[2] += 0.9;  // rounding: below the threshold
  const Report r = detail::analyze(cols, rows);
  EXPECT_EQ(Finding::clean, r.finding);
  EXPECT_NEAR(0.9, r.max_ratio, 1e-12);
}

TEST(AbftVerify, OneRowAndOneColumnLocateTheError) {
  detail::Checks cols = consistent(5), rows = consistent(4);
  // An error of 7 at (row 3, column 1): column 1 off by (7, (3 + 1) 7), row 3 off by (7, (1 + 1) 7).
  cols.computed_e[1] += 7;
  cols.computed_w[1] += 28;
  rows.computed_e[3] += 7;
  rows.computed_w[3] += 14;
  const Report r = detail::analyze(cols, rows);
  EXPECT_EQ(Finding::corrected, r.finding);
  EXPECT_EQ(3, r.row);
  EXPECT_EQ(1, r.col);
}

TEST(AbftVerify, WeightsLocateTheRowWhenOnlyTheColumnSeesIt) {
  detail::Checks cols = consistent(5), rows = consistent(4);
  cols.computed_e[4] += 2;
  cols.computed_w[4] += 6;  // ratio 3: row 2
  const Report r = detail::analyze(cols, rows);
  EXPECT_EQ(Finding::corrected, r.finding);
  EXPECT_EQ(2, r.row);
  EXPECT_EQ(4, r.col);
}

TEST(AbftVerify, SeveralErrorsAreDetectedNotLocated) {
  detail::Checks cols = consistent(5), rows = consistent(4);
  cols.computed_e[0] += 5;
  cols.computed_e[3] += 5;
  rows.computed_e[1] += 5;
  rows.computed_e[2] += 5;
  const Report r = detail::analyze(cols, rows);
  EXPECT_EQ(Finding::detected_unlocated, r.finding);
  EXPECT_EQ(2, r.inconsistent_cols);
  EXPECT_EQ(2, r.inconsistent_rows);
}

TEST(AbftVerify, NonFiniteChecksumsAreInconsistent) {
  detail::Checks cols = consistent(3), rows = consistent(3);
  cols.computed_e[1] = std::numeric_limits<double>::infinity();
  rows.computed_e[0] = std::numeric_limits<double>::quiet_NaN();
  const Report r = detail::analyze(cols, rows);
  EXPECT_EQ(Finding::corrected, r.finding);
  EXPECT_EQ(0, r.row);
  EXPECT_EQ(1, r.col);
}

}  // namespace
}  // namespace skinny::abft
