// gemm::nearest's certificate (gemm/src/nearest_certificate.hpp): a centre the certificate cannot rule out
// as a second best is always among a point's candidates (the collecting pass's bound), and the bound is
// not much looser than the certificate, on random points, centres and gaps of every scale.
#include "../../gemm/src/nearest_certificate.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace skinny::gemm::detail {
namespace {

struct Case {
  CertificateTerms terms;
  double x_sq, x_error;
  float best;
};

/// A point and centres of random sizes: x_sq up to 1e6, ||c|| up to 1e3, the centres' rounding error up
/// to its bound, the best value anywhere from x at a centre to far from all.
Case random_case(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const Element types[] = {Element::f32, Element::f16, Element::bf16};
  const std::int64_t dims[] = {1, 7, 128, 4096};
  Case c;
  const Element type = types[rng() % 3];
  const std::int64_t d = dims[rng() % 4];
  c.terms.bound = certificate_bound(type, d);
  c.terms.sqrt_d = std::sqrt(double(d));
  c.terms.c_norm = std::pow(10.0, 6 * unit(rng) - 3);
  c.terms.c_error = c.terms.c_norm * c.terms.bound.u_c * unit(rng);
  c.x_sq = std::pow(10.0, 9 * unit(rng) - 3);
  c.x_error = rng() % 2 ? -1.0 : std::sqrt(c.x_sq) * 0x1p-10 * unit(rng);  // the bound, or a float point's own
  // best = ||x - c||^2 - ||x||^2 for a centre anywhere from x itself to twice as far as the origin
  const double distance_sq = 4 * (c.x_sq + c.terms.c_norm * c.terms.c_norm) * unit(rng) * unit(rng);
  c.best = static_cast<float>(distance_sq - c.x_sq);
  return c;
}

TEST(NearestCertificate, ACentreTheCertificateCannotRuleOutIsACandidate) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int uncertified = 0;
  for (int trial = 0; trial < 200000; ++trial) {
    const Case c = random_case(rng);
    // a value above the best by a gap of any scale, relative to the point's distance
    const double gap = (std::fabs(double(c.best)) + c.x_sq) * std::pow(10.0, 14 * unit(rng) - 13);
    const float v = static_cast<float>(double(c.best) + gap);
    if (certified(c.terms, c.x_sq, c.best, v, c.x_error)) continue;
    ++uncertified;
    ASSERT_LE(v, collect_bound(c.terms, c.x_sq, c.best, c.x_error))
        << "trial " << trial << ": x_sq " << c.x_sq << " best " << c.best << " v " << v;
  }
  EXPECT_GT(uncertified, 20000) << "the gaps should leave many points uncertified";
}

TEST(NearestCertificate, ACentreWellBeyondTheCandidatesBoundIsRuledOut) {
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 200000; ++trial) {
    const Case c = random_case(rng);
    const double bound = collect_bound(c.terms, c.x_sq, c.best, c.x_error);
    // 2^-14 of the point's scale past the bound (whose own room is 2^-20 of it)
    const float v = static_cast<float>(bound + 0x1p-14 * (std::fabs(bound) + c.x_sq));
    ASSERT_TRUE(certified(c.terms, c.x_sq, c.best, v, c.x_error))
        << "trial " << trial << ": x_sq " << c.x_sq << " best " << c.best << " bound " << bound;
  }
}

TEST(NearestCertificate, NoBestCertifiesNothingAndCollectsNothing) {
  CertificateTerms t;
  t.bound = certificate_bound(Element::f16, 64);
  t.sqrt_d = 8;
  t.c_norm = 1;
  const float nan = std::nanf("");
  EXPECT_FALSE(certified(t, 4.0, nan, 1.0f));
  EXPECT_FALSE(certified(t, 4.0, -1.0f, nan));
  EXPECT_TRUE(std::isnan(collect_bound(t, 4.0, nan))) << "a NaN bound: no value is at most it";
}

}  // namespace
}  // namespace skinny::gemm::detail
