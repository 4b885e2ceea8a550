// The two-way sums ProtectedGemm makes over its operands and C (abft/src/two_way_sums.cuh) against a
// double-precision CPU reference: odd shapes, plain and magnitude terms, squared weights, narrow and
// wide bands (the grid follows the SM count), outputs poisoned first; the checks' own weights computed in
// the kernel give the sums of the same weights read from memory, bit for bit.
#include "../../abft/src/two_way_sums.cuh"

#include <skinny/gemm/device_buffer.hpp>

#include "support/gpu_fixture.hpp"
#include "support/random_matrix.hpp"
#include "support/relative_difference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace skinny::abft::detail {
namespace {

class TwoWaySumsGpu : public testing::GpuTest {};

/// Rows: two plain terms (the second weight squared) and two magnitude terms; columns: one plain and
/// three magnitude terms (the last squared). Weights are random non-zero vectors.
template <class T, Magnitude kMag>
void sums_match_the_reference(std::int64_t rows, std::int64_t cols, int sm_count) {
  using RowSide = SideSums<T, 2, 2>;
  using ColSide = SideSums<T, 1, 3>;
  const std::vector<T> x = testing::random_nonzero<T>(std::size_t(rows * cols), 31);
  const std::vector<T> u = testing::random_nonzero<T>(std::size_t(4 * cols), 32);  // row sums' weights, 4 x cols
  const std::vector<T> p = testing::random_nonzero<T>(std::size_t(4 * rows), 33);  // column sums' weights
  const bool row_squared[4] = {false, true, false, false}, col_squared[4] = {false, false, false, true};
  const auto mag = [](double v) { return kMag == Magnitude::square ? v * v : std::abs(v); };
  std::vector<double> want_rows(std::size_t(4 * rows), 0), want_cols(std::size_t(4 * cols), 0);
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t i = 0; i < rows; ++i) {
      const double v = x[std::size_t(j * rows + i)];
      for (int t = 0; t < 4; ++t) {
        double wu = u[std::size_t(t * cols + j)], wp = p[std::size_t(t * rows + i)];
        if (row_squared[t]) wu *= wu;
        if (col_squared[t]) wp *= wp;
        want_rows[std::size_t(t * rows + i)] += (t < RowSide::kPlainTerms ? v : mag(v)) * wu;
        want_cols[std::size_t(t * cols + j)] += (t < ColSide::kPlainTerms ? v : mag(v)) * wp;
      }
    }
  DeviceBuffer<T> dx(x), du(u), dp(p), out_rows(want_rows.size()), out_cols(want_cols.size());
  out_rows.copy_from(std::vector<T>(out_rows.size(), std::numeric_limits<T>::quiet_NaN()));
  out_cols.copy_from(std::vector<T>(out_cols.size(), std::numeric_limits<T>::quiet_NaN()));
  DeviceBuffer<T> parts(std::size_t(two_way_workspace<T>(rows, cols, 4, 4, sm_count)));
  RowSide row_side;
  ColSide col_side;
  for (int t = 0; t < 4; ++t) {
    row_side.w[t] = Weight<T>{du.data() + t * cols, row_squared[t]};
    col_side.w[t] = Weight<T>{dp.data() + t * rows, col_squared[t]};
  }
  row_side.out = out_rows.data();
  col_side.out = out_cols.data();
  two_way_sums<T, kMag>(dx.data(), rows, cols, row_side, col_side, parts.data(), sm_count, nullptr);
  SKINNY_CUDA_TRY(cudaDeviceSynchronize());
  const double u_round = sizeof(T) == 8 ? 0x1p-53 : 0x1p-24;
  const double bound = 8 * std::sqrt(double(std::max(rows, cols))) * u_round;
  const std::string where = std::to_string(rows) + "x" + std::to_string(cols) + " on " + std::to_string(sm_count) +
                            " SMs, " + (kMag == Magnitude::square ? "squares" : "absolute values");
  EXPECT_LE(testing::relative_difference(out_rows.to_host(), want_rows), bound) << "row sums, " << where;
  EXPECT_LE(testing::relative_difference(out_cols.to_host(), want_cols), bound) << "column sums, " << where;
}

TEST_F(TwoWaySumsGpu, MatchTheReferenceOnOddShapes) {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 1}, {7, 17}, {17, 1}, {257, 33}, {300, 1030}, {1000, 7},
                                                          {2049, 600}};
  for (const auto [rows, cols] : shapes)
    for (const int sms : {1, 132}) {  // wide bands (16 tiles) and narrow ones
      sums_match_the_reference<float, Magnitude::square>(rows, cols, sms);
      sums_match_the_reference<float, Magnitude::absolute>(rows, cols, sms);
      sums_match_the_reference<double, Magnitude::square>(rows, cols, sms);
      sums_match_the_reference<double, Magnitude::absolute>(rows, cols, sms);
    }
}

/// The checks' own weights, computed in the kernel (CheckWeightSums), give the same sums, bit for bit,
/// as the same weights read from memory: e = 1 and w = position + 1, alternating.
template <class T, Magnitude kMag, int kPlain, int kMagnitude>
void check_weights_match_read_ones(std::int64_t rows, std::int64_t cols, int sm_count) {
  constexpr int kTerms = kPlain + kMagnitude;
  const std::vector<T> x = testing::random_nonzero<T>(std::size_t(rows * cols), 41);
  const std::int64_t longest = std::max(rows, cols);
  std::vector<T> e(static_cast<std::size_t>(longest), T(1)), w(static_cast<std::size_t>(longest));
  for (std::int64_t i = 0; i < longest; ++i) w[std::size_t(i)] = T(i + 1);
  DeviceBuffer<T> dx(x), de(e), dw(w), parts(std::size_t(two_way_workspace<T>(rows, cols, kTerms, kTerms, sm_count)));
  const auto sums = [&](auto row_side, auto col_side) {
    DeviceBuffer<T> out_rows(std::size_t(kTerms * rows)), out_cols(std::size_t(kTerms * cols));
    out_rows.copy_from(std::vector<T>(out_rows.size(), std::numeric_limits<T>::quiet_NaN()));
    out_cols.copy_from(std::vector<T>(out_cols.size(), std::numeric_limits<T>::quiet_NaN()));
    row_side.out = out_rows.data();
    col_side.out = out_cols.data();
    two_way_sums<T, kMag>(dx.data(), rows, cols, row_side, col_side, parts.data(), sm_count, nullptr);
    SKINNY_CUDA_TRY(cudaDeviceSynchronize());
    return std::make_pair(out_rows.to_host(), out_cols.to_host());
  };
  SideSums<T, kPlain, kMagnitude> read;
  for (int t = 0; t < kTerms; ++t) read.w[t] = Weight<T>{t % 2 == 0 ? de.data() : dw.data(), false};
  const auto want = sums(read, read);
  const auto got = sums(CheckWeightSums<T, kPlain, kMagnitude>{}, CheckWeightSums<T, kPlain, kMagnitude>{});
  const std::string where = std::to_string(rows) + "x" + std::to_string(cols) + " on " + std::to_string(sm_count) +
                            " SMs, " + std::to_string(kPlain) + " plain + " + std::to_string(kMagnitude) + " terms";
  EXPECT_TRUE(got.first == want.first) << "row sums, " << where;
  EXPECT_TRUE(got.second == want.second) << "column sums, " << where;
}

TEST_F(TwoWaySumsGpu, CheckWeightsComputedAsRead) {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 1}, {7, 17}, {257, 33}, {1000, 7}, {2049, 600}};
  for (const auto [rows, cols] : shapes)
    for (const int sms : {1, 132}) {
      check_weights_match_read_ones<float, Magnitude::square, 2, 2>(rows, cols, sms);
      check_weights_match_read_ones<float, Magnitude::absolute, 2, 0>(rows, cols, sms);
      check_weights_match_read_ones<double, Magnitude::square, 0, 2>(rows, cols, sms);
      check_weights_match_read_ones<double, Magnitude::absolute, 2, 2>(rows, cols, sms);
    }
}

TEST(TwoWayGrid, KeepsEverySmBusyAndCoversEveryColumn) {
  // 2048 x 2048 float on 132 SMs: 8 row tiles need narrow bands (one 32-column tile each) to reach 528 blocks.
  const TwoWayGrid small = two_way_grid<float>(2048, 2048, 132);
  EXPECT_EQ(8, small.row_tiles);
  EXPECT_EQ(1, small.tiles_per_band);
  EXPECT_EQ(64, small.bands);
  // 8192 x 8192 double: 32 row tiles, bands of the widest 16 tiles (256 columns) already give 1024 blocks.
  const TwoWayGrid large = two_way_grid<double>(8192, 8192, 132);
  EXPECT_EQ(32, large.row_tiles);
  EXPECT_EQ(kMaxTilesPerBand, large.tiles_per_band);
  EXPECT_EQ(32, large.bands);
  for (const std::int64_t cols : {1, 31, 33, 1000, 100000}) {
    const TwoWayGrid g = two_way_grid<float>(300, cols, 132);
    EXPECT_GE(g.bands * g.tiles_per_band * kSumTileCols<float>, cols) << cols;
    EXPECT_LT((g.bands - 1) * g.tiles_per_band * kSumTileCols<float>, cols) << "no empty band, " << cols;
  }
}

}  // namespace
}  // namespace skinny::abft::detail
