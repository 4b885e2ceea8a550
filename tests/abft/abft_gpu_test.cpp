// ABFT on the GPU: every encoder against the CPU reference over odd shapes and densities, outputs
// poisoned first; protected GEMMs that stay clean, and that locate and correct single bit flips; the
// thresholds the GPU computes against the host model, and the rounding model against the L1 bound;
// multiply_and_verify (one pass over C) against multiply, then verify_and_correct.
#include "../../abft/src/threshold.hpp"

#include <skinny/abft/abft.hpp>
#include <skinny/gemm/device_buffer.hpp>

#include "support/gpu_fixture.hpp"
#include "support/random_matrix.hpp"
#include "support/relative_difference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace skinny::abft {
namespace {

using testing::shared_context;

class AbftGpu : public testing::GpuTest {};

template <class T>
void encodes_like_the_reference(Backend backend, std::int64_t m, std::int64_t n, std::int64_t density) {
  if (!cannot_encode(backend, m, n, density).empty()) return;
  Context& ctx = shared_context();
  const std::int64_t lda = m + 3;  // a leading dimension that is not the height
  const std::vector<T> host = testing::random_nonzero<T>(std::size_t(lda * n), 21);
  std::vector<double> packed(std::size_t(m * n));
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i) packed[std::size_t(j * m + i)] = host[std::size_t(j * lda + i)];
  std::vector<double> r_ref, k_ref;
  reference_encode(packed, m, n, density, r_ref, k_ref);
  DeviceBuffer<T> a(host), r(r_ref.size()), k(k_ref.size());
  r.copy_from(std::vector<T>(r.size(), std::numeric_limits<T>::quiet_NaN()));
  k.copy_from(std::vector<T>(k.size(), std::numeric_limits<T>::quiet_NaN()));
  encode<T>(ctx, a.data(), m, n, lda, {Side::both, backend, density}, r.data(), k.data());
  const double bound = 8 * std::sqrt(double(std::max(m, n))) * (sizeof(T) == 8 ? 0x1p-53 : 0x1p-24);
  const std::string where = std::string(to_string(backend)) + " " + std::to_string(m) + "x" + std::to_string(n) +
                            " density " + std::to_string(density);
  EXPECT_LE(testing::relative_difference(r.to_host(), r_ref), bound) << "row checksums, " << where;
  EXPECT_LE(testing::relative_difference(k.to_host(), k_ref), bound) << "column checksums, " << where;
}

TEST_F(AbftGpu, EveryEncoderMatchesTheReference) {
  for (const Backend backend : {Backend::cublas, Backend::tsm2, Backend::fused})
    for (const auto [m, n] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {7, 17}, {127, 1}, {1000, 1027}, {1027, 513},
                              {2048, 1100}})
      for (const std::int64_t density : {0, 512, 100}) {
        encodes_like_the_reference<float>(backend, m, n, density);
        encodes_like_the_reference<double>(backend, m, n, density);
      }
}

template <class T>
void campaign(std::int64_t n, int trials, BitRange range) {
  Context& ctx = shared_context();
  const auto a_host = testing::random_nonzero<T>(std::size_t(n * n), 1), b_host = testing::random_nonzero<T>(std::size_t(n * n), 2);
  DeviceBuffer<T> a(a_host), b(b_host), c(std::size_t(n * n)), clean(std::size_t(n * n));
  ProtectedGemm<T> pg(ctx, n, n, n, gemm::Algo::cublas);
  pg.multiply(a.data(), b.data(), c.data());
  const Report clean_report = pg.verify_and_correct(c.data());
  EXPECT_EQ(Finding::clean, clean_report.finding) << "false alarm on clean data";
  const std::vector<T> reference = c.to_host();
  clean.copy_from(reference);
  int above = 0;
  for (int t = 0; t < trials; ++t) {
    SKINNY_CUDA_TRY(cudaMemcpy(c.data(), clean.data(), std::size_t(n * n) * sizeof(T), cudaMemcpyDeviceToDevice));
    const Injection inj = inject_bit_flip<T>(ctx, c.data(), n, n, 1000 + t, range);
    const double tau = std::max(pg.threshold_row(inj.row), pg.threshold_col(inj.col));
    const Report r = pg.verify_and_correct(c.data());
    // Below the threshold, or within the rounding of it: not promised.
    if (std::abs(inj.after - inj.before) <= tau + clean_report.max_difference) continue;
    ++above;
    ASSERT_EQ(Finding::corrected, r.finding) << "trial " << t << " bit " << inj.bit;
    EXPECT_EQ(inj.row, r.row);
    EXPECT_EQ(inj.col, r.col);
    T fixed{};
    SKINNY_CUDA_TRY(cudaMemcpy(&fixed, c.data() + inj.col * n + inj.row, sizeof(T), cudaMemcpyDeviceToHost));
    EXPECT_LE(std::abs(double(fixed) - double(reference[std::size_t(inj.col * n + inj.row)])), tau) << "trial " << t;
  }
  EXPECT_GT(above, trials / 4) << "the campaign must test flips above the threshold";
}

TEST_F(AbftGpu, CampaignLocatesAndCorrectsSingleFlipsFloat) { campaign<float>(257, 200, BitRange::any); }
TEST_F(AbftGpu, CampaignLocatesAndCorrectsSingleFlipsDouble) { campaign<double>(300, 200, BitRange::any); }
TEST_F(AbftGpu, ExponentFlipsIncludingInfinities) { campaign<float>(129, 60, BitRange::exponent); }

TEST_F(AbftGpu, CampaignWithTheL1Bound) {
  Context& ctx = shared_context();
  const std::int64_t n = 257;
  DeviceBuffer<float> a(testing::random_nonzero<float>(std::size_t(n * n), 5)),
      b(testing::random_nonzero<float>(std::size_t(n * n), 6)), c(std::size_t(n * n));
  ProtectedGemm<float> pg(ctx, n, n, n, gemm::Algo::cublas, Threshold{0, 0, ThresholdModel::l1_bound});
  EXPECT_EQ(16, pg.threshold().gamma);
  pg.multiply(a.data(), b.data(), c.data());
  EXPECT_EQ(Finding::clean, pg.verify_and_correct(c.data()).finding);
  inject_add<float>(ctx, c.data(), n, 30, 40, float(2 * pg.max_threshold()));
  const Report r = pg.verify_and_correct(c.data());
  EXPECT_EQ(Finding::corrected, r.finding);
  EXPECT_EQ(30, r.row);
  EXPECT_EQ(40, r.col);
}

/// The magnitudes the GPU carries give the thresholds the model gives from a double reference on the
/// host: every index of the stacked squares (or absolute values), weights and checks lands where it should.
template <class T>
void thresholds_match_the_host_model(std::int64_t m, std::int64_t k, std::int64_t n, double offset,
                                     ThresholdModel model = ThresholdModel::rounding) {
  Context& ctx = shared_context();
  std::vector<T> ah = testing::random_nonzero<T>(std::size_t(m * k), 7), bh = testing::random_nonzero<T>(std::size_t(k * n), 8);
  for (auto& x : ah) x = T(double(x) + offset);  // a non-zero mean: the drift terms matter
  DeviceBuffer<T> a(ah), b(bh), c(std::size_t(m * n));
  ProtectedGemm<T> pg(ctx, m, n, k, gemm::Algo::cublas, Threshold{0, 0, model});
  pg.multiply(a.data(), b.data(), c.data());
  ctx.synchronize();
  const std::vector<T> ch = c.to_host();
  const auto A = [&](std::int64_t i, std::int64_t l) { return double(ah[std::size_t(l * m + i)]); };
  const auto B = [&](std::int64_t l, std::int64_t j) { return double(bh[std::size_t(j * k + l)]); };
  const auto C = [&](std::int64_t i, std::int64_t j) { return double(ch[std::size_t(j * m + i)]); };
  const Threshold t = pg.threshold();
  for (const bool weighted : {false, true}) {
    for (std::int64_t j = 0; j < n; ++j) {  // column checks: sums over i with weights 1 or i + 1
      detail::CheckMagnitudes mg;
      for (std::int64_t l = 0; l < k; ++l) {
        double ka = 0, sq = 0, abs_sum = 0;
        for (std::int64_t i = 0; i < m; ++i) {
          const double w = weighted ? double(i + 1) : 1.0;
          ka += w * A(i, l);
          sq += w * A(i, l) * A(i, l);
          abs_sum += w * std::abs(A(i, l));
        }
        mg.squares += sq * B(l, j) * B(l, j);
        mg.carried_squares += ka * ka * B(l, j) * B(l, j);
        mg.checksum += ka * B(l, j);
        mg.l1 += abs_sum * std::abs(B(l, j));
      }
      for (std::int64_t i = 0; i < m; ++i) mg.result_squares += (weighted ? double(i + 1) : 1.0) * C(i, j) * C(i, j);
      if (weighted) mg.squares *= double(m), mg.result_squares *= double(m);
      const double want = detail::check_threshold<T>(t, k, m, mg);
      EXPECT_NEAR(want, pg.threshold_col(j, weighted), 1e-3 * want) << "column " << j << " weighted " << weighted;
    }
    for (std::int64_t i = 0; i < m; ++i) {  // row checks: sums over j
      detail::CheckMagnitudes mg;
      for (std::int64_t l = 0; l < k; ++l) {
        double rb = 0, sq = 0, abs_sum = 0;
        for (std::int64_t j = 0; j < n; ++j) {
          const double w = weighted ? double(j + 1) : 1.0;
          rb += w * B(l, j);
          sq += w * B(l, j) * B(l, j);
          abs_sum += w * std::abs(B(l, j));
        }
        mg.squares += A(i, l) * A(i, l) * sq;
        mg.carried_squares += A(i, l) * A(i, l) * rb * rb;
        mg.checksum += A(i, l) * rb;
        mg.l1 += std::abs(A(i, l)) * abs_sum;
      }
      for (std::int64_t j = 0; j < n; ++j) mg.result_squares += (weighted ? double(j + 1) : 1.0) * C(i, j) * C(i, j);
      if (weighted) mg.squares *= double(n), mg.result_squares *= double(n);
      const double want = detail::check_threshold<T>(t, k, n, mg);
      EXPECT_NEAR(want, pg.threshold_row(i, weighted), 1e-3 * want) << "row " << i << " weighted " << weighted;
    }
  }
}

TEST_F(AbftGpu, RoundingThresholdsMatchTheHostModel) {
  thresholds_match_the_host_model<float>(37, 53, 29, 0);
  thresholds_match_the_host_model<float>(70, 300, 45, 0.75);
  thresholds_match_the_host_model<double>(37, 530, 29, 0.75);
  thresholds_match_the_host_model<float>(1, 1, 1, 0);
  thresholds_match_the_host_model<double>(300, 7, 1, 0.5);  // narrow bands of one tile: many partial sums
}

TEST_F(AbftGpu, L1ThresholdsMatchTheHostModel) {
  thresholds_match_the_host_model<float>(37, 53, 29, 0.75, ThresholdModel::l1_bound);
  thresholds_match_the_host_model<double>(127, 17, 300, 0, ThresholdModel::l1_bound);
}

/// multiply_and_verify: its one pass over C gives the thresholds multiply() gives on a clean product, a
/// fault struck between the product and that pass is located and corrected, and the fault hook is used once.
template <class T>
void multiply_and_verify_matches_the_two_passes(std::int64_t m, std::int64_t k, std::int64_t n, ThresholdModel model) {
  Context& ctx = shared_context();
  DeviceBuffer<T> a(testing::random_nonzero<T>(std::size_t(m * k), 11)),
      b(testing::random_nonzero<T>(std::size_t(k * n), 12)), c(std::size_t(m * n));
  ProtectedGemm<T> two_passes(ctx, m, n, k, gemm::Algo::cublas, Threshold{0, 0, model});
  ProtectedGemm<T> one_pass(ctx, m, n, k, gemm::Algo::cublas, Threshold{0, 0, model});
  const std::string shape = std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
  two_passes.multiply(a.data(), b.data(), c.data());
  EXPECT_EQ(Finding::clean, two_passes.verify_and_correct(c.data()).finding) << shape;
  const std::vector<T> reference = c.to_host();
  c.copy_from(std::vector<T>(c.size(), std::numeric_limits<T>::quiet_NaN()));
  EXPECT_EQ(Finding::clean, one_pass.multiply_and_verify(a.data(), b.data(), c.data()).finding) << shape;
  for (const bool weighted : {false, true}) {
    for (std::int64_t i = 0; i < m; ++i) {
      const double want = two_passes.threshold_row(i, weighted);
      EXPECT_NEAR(want, one_pass.threshold_row(i, weighted), 1e-12 * want) << shape << " row " << i;
    }
    for (std::int64_t j = 0; j < n; ++j) {
      const double want = two_passes.threshold_col(j, weighted);
      EXPECT_NEAR(want, one_pass.threshold_col(j, weighted), 1e-12 * want) << shape << " column " << j;
    }
  }
  const std::int64_t i = m / 2, j = n - 1;
  const T error = T(4 * two_passes.max_threshold());
  one_pass.inject_into_next_product([&](T* product) { inject_add<T>(ctx, product, m, i, j, error); });
  const Report r = one_pass.multiply_and_verify(a.data(), b.data(), c.data());
  ASSERT_EQ(Finding::corrected, r.finding) << shape;
  EXPECT_EQ(i, r.row);
  EXPECT_EQ(j, r.col);
  const double tau = std::max(two_passes.threshold_row(i), two_passes.threshold_col(j));
  EXPECT_NEAR(double(reference[std::size_t(j * m + i)]), double(c.to_host()[std::size_t(j * m + i)]), tau) << shape;
  EXPECT_EQ(Finding::clean, one_pass.multiply_and_verify(a.data(), b.data(), c.data()).finding)
      << shape << ": the fault hook strikes once";
}

TEST_F(AbftGpu, MultiplyAndVerifyMatchesTheTwoPasses) {
  multiply_and_verify_matches_the_two_passes<float>(37, 53, 29, ThresholdModel::rounding);
  multiply_and_verify_matches_the_two_passes<double>(300, 7, 17, ThresholdModel::rounding);
  multiply_and_verify_matches_the_two_passes<float>(1, 1, 1, ThresholdModel::rounding);
  multiply_and_verify_matches_the_two_passes<float>(127, 1000, 17, ThresholdModel::l1_bound);
  multiply_and_verify_matches_the_two_passes<double>(1000, 17, 127, ThresholdModel::l1_bound);
}

TEST_F(AbftGpu, RoundingThresholdIsFarBelowTheL1BoundAndStillClean) {
  Context& ctx = shared_context();
  const std::int64_t n = 1024;
  DeviceBuffer<float> a(testing::random_nonzero<float>(std::size_t(n * n), 9)),
      b(testing::random_nonzero<float>(std::size_t(n * n), 10)), c(std::size_t(n * n));
  ProtectedGemm<float> rounding(ctx, n, n, n, gemm::Algo::cublas);
  ProtectedGemm<float> l1(ctx, n, n, n, gemm::Algo::cublas, Threshold{0, 0, ThresholdModel::l1_bound});
  l1.multiply(a.data(), b.data(), c.data());
  const Report r1 = l1.verify_and_correct(c.data());
  rounding.multiply(a.data(), b.data(), c.data());
  const Report r = rounding.verify_and_correct(c.data());
  EXPECT_EQ(Finding::clean, r.finding);
  EXPECT_EQ(Finding::clean, r1.finding);
  EXPECT_LE(rounding.max_threshold() * 50, l1.min_threshold()) << "issue 22: the L1 bound is ~sqrt(k h) too high";
  EXPECT_LE(r.max_ratio, 0.5) << "the calibrated gamma keeps clean differences below half the threshold";
  EXPECT_GE(r.max_ratio, 0.01) << "and the threshold close to the rounding";
}

TEST_F(AbftGpu, TwoErrorsAreDetected) {
  Context& ctx = shared_context();
  const std::int64_t n = 200;
  DeviceBuffer<float> a(testing::random_nonzero<float>(std::size_t(n * n), 3)),
      b(testing::random_nonzero<float>(std::size_t(n * n), 4)), c(std::size_t(n * n));
  ProtectedGemm<float> pg(ctx, n, n, n);
  pg.multiply(a.data(), b.data(), c.data());
  inject_add<float>(ctx, c.data(), n, 3, 5, 100.f);
  inject_add<float>(ctx, c.data(), n, 70, 90, -100.f);
  EXPECT_EQ(Finding::detected_unlocated, pg.verify_and_correct(c.data()).finding);
}

TEST_F(AbftGpu, RefusesWhatItCannotDo) {
  Context& ctx = shared_context();
  EXPECT_THROW(ProtectedGemm<float>(ctx, 0, 4, 4), std::invalid_argument);
  EXPECT_THROW(ProtectedGemm<float>(ctx, 4, 4, 4, gemm::Algo::wmma), std::invalid_argument);
  DeviceBuffer<float> a(16), r(8), k(8);
  EXPECT_THROW(encode<float>(ctx, a.data(), 4, 4, 3, {}, r.data(), k.data()), std::invalid_argument);
  // Refused on the shape alone, before the (too small) buffers would be touched.
  EXPECT_THROW(encode<float>(ctx, a.data(), 1024, 1024, 1024, {Side::both, Backend::fused, 100}, r.data(), k.data()),
               std::invalid_argument);
}

}  // namespace
}  // namespace skinny::abft
