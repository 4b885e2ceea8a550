// The exact sums behind the centroid update (kmeans/src/fixed_point.hpp), on the CPU: the scale keeps
// every value within kFixedBits, a partial sum splits into (high, low) words without loss, and sums
// formed from any split of the values in any order are the same integers, close to the exact sum.
#include "../../kmeans/src/fixed_point.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace skinny::kmeans::detail {
namespace {

TEST(FixedPoint, ScaleKeepsTheLargestValueWithinTheBits) {
  for (const double m : {1.0, 0.75, 1e-30, 3.0e20, 1.17e-38, 65504.0, 1.0 - 1e-16}) {
    const double s = fixed_scale(m);
    EXPECT_LE(m * s, std::ldexp(1.0, kFixedBits)) << m;
    EXPECT_GE(m * s, std::ldexp(1.0, kFixedBits - 1)) << m;  // and uses them
    EXPECT_EQ(std::ldexp(1.0, std::ilogb(s)), s) << "a power of two: exact products";
  }
  EXPECT_EQ(1.0, fixed_scale(0.0));
  EXPECT_EQ(1.0, fixed_scale(NAN));
}

TEST(FixedPoint, HighAndLowWordsRebuildThePartialSum) {
  std::mt19937_64 rng(5);
  const std::int64_t limit = std::int64_t(1) << 62;
  for (int t = 0; t < 10000; ++t) {
    const long long s = static_cast<long long>(rng() >> 1) - limit;  // [-2^62, 2^62)
    EXPECT_EQ(static_cast<double>(s), from_fixed(fixed_high(s), fixed_low(s), 1.0));
    EXPECT_EQ(s, static_cast<long long>(fixed_high(s) << 32) + static_cast<long long>(fixed_low(s)));
  }
}

/// What update.cu does, on the host: values to integers, blocks of at most kFlushRows partial sums,
/// each added into the (high, low) accumulators.
double fixed_sum(const std::vector<double>& v, const std::vector<std::size_t>& order, std::size_t block, double scale) {
  unsigned long long hi = 0, lo = 0;
  for (std::size_t b = 0; b < order.size(); b += block) {
    long long s = 0;
    for (std::size_t i = b; i < std::min(order.size(), b + block); ++i) s += std::llrint(v[order[i]] * scale);
    hi += fixed_high(s);
    lo += fixed_low(s);
  }
  return from_fixed(hi, lo, 1.0 / scale);
}

TEST(FixedPoint, SumsDoNotDependOnSplitOrOrder) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(1000), std::size_t(100003)}) {
    std::vector<double> v(n);
    for (auto& x : v) x = static_cast<float>(normal(rng) * 1e3);  // float data, mixed signs
    double max_abs = 0;
    for (const double x : v) max_abs = std::max(max_abs, std::abs(x));
    const double scale = fixed_scale(max_abs);
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    const double first = fixed_sum(v, order, std::size_t(kFlushRows), scale);
    for (const std::size_t block : {std::size_t(1), std::size_t(3), std::size_t(256)}) {
      std::shuffle(order.begin(), order.end(), rng);
      EXPECT_EQ(first, fixed_sum(v, order, block, scale)) << "n " << n << " block " << block;
    }
    long double exact = 0;  // floats times 2^scale are integers here: the sum is exact up to its last rounding
    for (const double x : v) exact += x;
    EXPECT_NEAR(static_cast<double>(exact), first, 1e-15 * max_abs * std::sqrt(double(n)) + 1e-300) << n;
  }
}

/// Points moved out of one sum and into another one at a time (each move adds a value's words, or its
/// negation's): the low word grows past 2^53, where it no longer converts exactly, and the sum still
/// converts as the same sum formed in one go does (from_fixed carries the low word up first).
TEST(FixedPoint, AnyWordsOfOneSumConvertAlike) {
  std::mt19937_64 rng(17);
  const long long limit = (1LL << 50) - 1;
  unsigned long long hi = 0, lo = 0;
  long long fresh = 0;  // the sum of the values left in, formed directly (well within 64 bits)
  std::vector<long long> in;
  for (int t = 0; t < 12000000; ++t) {
    const bool out = !in.empty() && rng() % 2 == 0;
    long long q = 0;
    if (out) {
      const std::size_t at = rng() % in.size();
      q = -in[at];
      in[at] = in.back();
      in.pop_back();
    } else {
      q = static_cast<long long>(rng() % (2 * static_cast<unsigned long long>(limit) + 1)) - limit;
      if (in.size() >= 64) continue;  // few values in, many moves: the low word keeps growing
      in.push_back(q);
    }
    hi += fixed_high(q);
    lo += fixed_low(q);
    fresh += q;
  }
  ASSERT_GT(lo, 1ULL << 53) << "the low word should have passed 2^53";
  EXPECT_EQ(from_fixed(fixed_high(fresh), fixed_low(fresh), 1.0), from_fixed(hi, lo, 1.0));
  EXPECT_EQ(static_cast<double>(fresh), from_fixed(hi, lo, 1.0));
}

TEST(FixedPoint, AFullBlockOfLargestValuesDoesNotOverflow) {
  const double m = 3.5, scale = fixed_scale(m);
  std::vector<double> v(static_cast<std::size_t>(kFlushRows), -m);
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  EXPECT_EQ(-m * double(kFlushRows), fixed_sum(v, order, std::size_t(kFlushRows), scale));
}

}  // namespace
}  // namespace skinny::kmeans::detail
