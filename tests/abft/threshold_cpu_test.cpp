// The thresholds of checksum comparisons, on the CPU: the rounding model against simulated protected GEMMs
// in float and double (every summation order, every data kind, square, long-k, short-k and odd shapes),
// the terms it cannot do without, and verification's decision on checks with errors around the threshold.
// SKINNY_ABFT_SIMULATION_SCALE=N runs N times the seeds (the calibration in docs/abft-threshold.md).
#include "../../abft/src/detail.hpp"
#include "../../abft/src/threshold.hpp"
#include "simulated_checks.hpp"

#include <skinny/abft/abft.hpp>
#include <skinny/gemm/splitmix64.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

namespace skinny::abft {
namespace {

using simulation::Check;
using simulation::Data;
using simulation::Order;
using simulation::Shape;

constexpr Threshold kRounding{};  // the default: the rounding model at its calibrated gamma
constexpr Threshold kSigma{1, 0, ThresholdModel::rounding};  // gamma 1: the model's sigma
constexpr Threshold kL1{0, 0, ThresholdModel::l1_bound};

int scale() {
  const char* s = std::getenv("SKINNY_ABFT_SIMULATION_SCALE");
  return s != nullptr && std::atoi(s) > 0 ? std::atoi(s) : 1;
}

TEST(AbftThreshold, NamesDefaultsAndFormulas) {
  EXPECT_EQ(ThresholdModel::rounding, Threshold{}.model);
  EXPECT_EQ(ThresholdModel::l1_bound, threshold_model_from_name("l1"));
  EXPECT_EQ("rounding", to_string(threshold_model_from_name("rounding")));
  EXPECT_THROW(threshold_model_from_name("l2"), std::invalid_argument);
  EXPECT_EQ(16, default_gamma<float>(ThresholdModel::l1_bound));
  EXPECT_EQ(5, default_gamma<float>(ThresholdModel::rounding));
  EXPECT_EQ(5, default_gamma<double>(ThresholdModel::rounding));
  detail::CheckMagnitudes m;
  m.squares = 9;  // sqrt(9 + 16 + 0 + 0) = 5
  m.carried_squares = 16;
  m.l1 = 100;
  // k + h = 100: gamma u 10 * 5, plus the subnormal floor 100 * 2^-149 (far below).
  EXPECT_NEAR(5 * 0x1p-24 * 10 * 5, detail::check_threshold<float>(kRounding, 60, 40, m), 1e-20);
  EXPECT_DOUBLE_EQ(16 * 0x1p-53 * 10 * 100, detail::check_threshold<double>(kL1, 60, 40, m));
  EXPECT_EQ(0.5, detail::check_threshold<double>(Threshold{0, 0.5}, 60, 40, m));
  m.checksum = -1e300;  // R^2 would overflow; the threshold does not
  EXPECT_NEAR(5 * 0x1p-53 * 10 * 1e300, detail::check_threshold<double>(kRounding, 60, 40, m), 1e288);
  m.squares = std::numeric_limits<double>::infinity();  // squares that overflowed T
  EXPECT_FALSE(std::isfinite(detail::check_threshold<float>(kRounding, 60, 40, m)));
  EXPECT_GT(detail::check_threshold<float>(kRounding, 60, 40, detail::CheckMagnitudes{}), 0)
      << "zero data keeps a threshold above zero";
}

/// |difference| / threshold for every simulated check of one (shape, data, order), pooled over seeds.
template <class T>
std::vector<double> ratios(const Shape& shape, Data data, Order order, int seeds, int checks, const Threshold& t,
                           detail::CheckMagnitudes (*edit)(detail::CheckMagnitudes) = nullptr) {
  std::vector<double> r;
  for (int s = 0; s < seeds; ++s)
    for (const Check& c : simulation::simulate<T>(shape, data, order, 1000 + 7 * s, checks, checks)) {
      const detail::CheckMagnitudes m = edit ? edit(c.magnitudes) : c.magnitudes;
      r.push_back(std::abs(c.difference) / detail::check_threshold<T>(t, c.k, c.h, m));
    }
  return r;
}

double rms(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x * x;
  return std::sqrt(s / double(v.size()));
}
double largest(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

struct Case {
  Shape shape;
  int seeds, checks;  ///< A, B pairs drawn; columns and rows checked in each
};
/// Square, odd, long inner dimension (k >> h), short inner dimension (k << h), tiny.
const Case kCases[] = {{{64, 64, 64}, 6, 64},   {{257, 257, 257}, 2, 32}, {{97, 1531, 203}, 1, 32},
                       {{64, 2048, 64}, 1, 32}, {{2048, 61, 1999}, 1, 16}, {{2048, 2048, 2048}, 1, 4},
                       {{3, 5, 2}, 40, 3}};

/// The calibrated band: in sequential sums (one thread's accumulator, the worst order) the clean
/// differences spread as 0.13-0.28 sigma (rms) for every data kind and shape; blocked sums spread less,
/// and less as k grows (the model does not know the order). With the calibrated gamma (5), the largest
/// clean difference seen stays below half the threshold.
template <class T>
void clean_differences_stay_in_the_band() {
  const double gamma = default_gamma<T>(ThresholdModel::rounding);
  std::printf("%-7s %-18s %-11s %-22s %s\n", sizeof(T) == 8 ? "double" : "float", "data", "order", "rms |d|/sigma",
              "max |d|/sigma");
  std::vector<double> pooled;  // every ratio: the tail the calibration reads
  for (const Data data : simulation::kData)
    for (const Order order : simulation::kOrders) {
      double low = 1e9, high = 0, worst = 0;
      for (const Case& c : kCases) {
        const std::vector<double> r = ratios<T>(c.shape, data, order, c.seeds * scale(), c.checks, kSigma);
        pooled.insert(pooled.end(), r.begin(), r.end());
        const double spread = rms(r);
        const std::string where = std::string(simulation::to_string(data)) + ", " +
                                  std::string(simulation::to_string(order)) + ", " + std::to_string(c.shape.m) + "x" +
                                  std::to_string(c.shape.k) + "x" + std::to_string(c.shape.n);
        EXPECT_LE(largest(r), gamma / 2) << where << ": a clean difference above half the threshold";
        EXPECT_LE(spread, 0.35) << where << ": the model underestimates the rounding";
        EXPECT_GE(spread, order == Order::blocked ? 0.008 : 0.1) << where << ": the model overestimates the rounding";
        low = std::min(low, spread);
        high = std::max(high, spread);
        worst = std::max(worst, largest(r));
      }
      std::printf("%-7s %-18s %-11s %.3f - %.3f          %.3f\n", "", std::string(simulation::to_string(data)).c_str(),
                  std::string(simulation::to_string(order)).c_str(), low, high, worst);
    }
  std::sort(pooled.begin(), pooled.end());
  const auto quantile = [&](double q) { return pooled[std::size_t(q * double(pooled.size() - 1))]; };
  std::printf("%zu comparisons: |d|/sigma quantiles 0.99 %.3f, 0.999 %.3f, 0.9999 %.3f, largest %.3f\n", pooled.size(),
              quantile(0.99), quantile(0.999), quantile(0.9999), pooled.back());
}

/// multiply_and_verify takes P from the C it verifies: an error E at an element c of C moves P by
/// 2 c E + E^2 (times h w_j in a weighted check), and the threshold by at most
/// gamma u sqrt(k + h) sqrt(h w_j) (|E| + sqrt(2 |c| |E|)) (docs/abft-threshold.md; w = 1 and no h for a
/// plain check), so an error 1 % above a plain check's clean threshold stays above its moved one.
template <class T>
void a_fault_moves_its_own_threshold_by_little() {
  const std::int64_t k = 2048, h = 2048;
  const double u = (sizeof(T) == 8 ? 0x1p-53 : 0x1p-24), gamma = default_gamma<T>(ThresholdModel::rounding);
  std::uint64_t state = 99;
  const auto uniform = [&] { return double(splitmix64(state++) >> 11) * 0x1p-53; };
  int above = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const double c = 40 * (uniform() - 0.5), error = std::ldexp(uniform() - 0.5, int(60 * uniform()) - 30);
    const double weight = trial % 2 == 0 ? 1.0 : std::floor(1 + h * uniform());  // plain, then weighted checks
    const double factor = trial % 2 == 0 ? 1.0 : double(h) * weight;  // what multiplies c^2 in P
    detail::CheckMagnitudes clean;
    clean.squares = 1e3 * uniform();
    clean.carried_squares = 1e3 * uniform();
    const double others = 1e4 * uniform();  // P's terms of the row's other elements
    clean.result_squares = others + factor * c * c;
    clean.checksum = 100 * (uniform() - 0.5);
    detail::CheckMagnitudes faulty = clean;
    faulty.result_squares = others + factor * (c + error) * (c + error);
    const double before = detail::check_threshold<T>(kRounding, k, h, clean);
    const double after = detail::check_threshold<T>(kRounding, k, h, faulty);
    const double bound = gamma * u * std::sqrt(double(k + h)) * std::sqrt(factor) *
                         (std::abs(error) + std::sqrt(2 * std::abs(c) * std::abs(error)));
    EXPECT_LE(std::abs(after - before), bound * (1 + 1e-12) + 1e-300) << "trial " << trial;
    if (trial % 2 == 0 && std::abs(error) >= 1.01 * before) {  // a plain check: what detection reads
      ++above;
      EXPECT_GT(std::abs(error), after) << "trial " << trial << ": an error 1 % above the clean threshold is seen";
    }
  }
  EXPECT_GT(above, 200) << "the trials must test errors above the threshold";
}

TEST(AbftThreshold, AFaultMovesItsOwnThresholdByLittleFloat) { a_fault_moves_its_own_threshold_by_little<float>(); }
TEST(AbftThreshold, AFaultMovesItsOwnThresholdByLittleDouble) { a_fault_moves_its_own_threshold_by_little<double>(); }

TEST(AbftThreshold, CleanDifferencesStayInTheCalibratedBandFloat) { clean_differences_stay_in_the_band<float>(); }
TEST(AbftThreshold, CleanDifferencesStayInTheCalibratedBandDouble) { clean_differences_stay_in_the_band<double>(); }

/// The heaviest tail: a checksum over many terms of one size and random signs (a column of C when A's rows
/// have means of random signs), whose partial sums wander further in some columns than in others. Its
/// tail is what gamma must clear: above sigma in about 4e-4 of the sums, falling by more than e^-8 per
/// further sigma (docs/abft-threshold.md).
TEST(AbftThreshold, TheHeaviestTailIsARandomWalkOfEqualTerms) {
  const int h = 2048;
  const long sums = 20000L * scale();
  std::vector<float> x(h);
  long above_one = 0, above_one_and_half = 0;
  double worst = 0;
  for (long t = 0; t < sums; ++t) {
    detail::CheckMagnitudes m;
    for (int i = 0; i < h; ++i) {
      const std::uint64_t z = splitmix64(std::uint64_t(t) * std::uint64_t(h) + std::uint64_t(i));
      x[std::size_t(i)] = float(((z & 1) ? 30.0 : -30.0) + 4.0 * (double(z >> 11) * 0x1p-53 - 0.5));
      m.checksum += double(x[std::size_t(i)]);
      m.result_squares += double(x[std::size_t(i)]) * double(x[std::size_t(i)]);
    }
    float sum = 0;
    for (const float v : x) sum += v;
    const double r = std::abs(double(sum) - m.checksum) / detail::check_threshold<float>(kSigma, 1, h, m);
    above_one += r > 1;
    above_one_and_half += r > 1.5;
    worst = std::max(worst, r);
  }
  std::printf("%ld sums of %d terms of one size: P(|d| > sigma) %.2e, P(|d| > 1.5 sigma) %.2e, largest %.3f sigma\n",
              sums, h, double(above_one) / double(sums), double(above_one_and_half) / double(sums), worst);
  EXPECT_LE(double(above_one) / double(sums), 2e-3);
  EXPECT_LE(worst, default_gamma<float>(ThresholdModel::rounding) / 2);
}

/// Each term of the model is what keeps one kind of data below the threshold: without it the largest
/// difference grows several times, on the shape where that term dominates.
template <class T>
void every_term_is_needed() {
  struct Term {
    const char* name;
    Data data;  ///< the kind it is for
    Shape shape;
    detail::CheckMagnitudes (*drop)(detail::CheckMagnitudes);
  };
  const Term terms[] = {
      {"R^2 (sums that drift)", Data::uniform_positive, {257, 513, 257},
       [](detail::CheckMagnitudes m) {
         m.checksum = 0;
         return m;
       }},
      {"P (row means that cancel in the checksums)", Data::offset_rows, {64, 2048, 64},
       [](detail::CheckMagnitudes m) {
         m.result_squares = 0;
         return m;
       }},
      {"Q_K (carried checksums that drift over a signed B)", Data::positive_times_signed, {2048, 64, 1999},
       [](detail::CheckMagnitudes m) {
         m.carried_squares = 0;
         return m;
       }},
  };
  for (const Term& term : terms) {
    const double with = largest(ratios<T>(term.shape, term.data, Order::fma, 1, 32, kSigma));
    const double without = largest(ratios<T>(term.shape, term.data, Order::fma, 1, 32, kSigma, term.drop));
    EXPECT_GE(without, 3 * with) << "without " << term.name << " on " << simulation::to_string(term.data);
  }
}

TEST(AbftThreshold, EveryTermIsNeededFloat) { every_term_is_needed<float>(); }
TEST(AbftThreshold, EveryTermIsNeededDouble) { every_term_is_needed<double>(); }

TEST(AbftThreshold, FarTighterThanTheL1BoundOnDataOfMixedSigns) {
  // Issue 22: on uniform[-1, 1] data the L1 bound sits about sqrt(k h) / 3 above the rounding model.
  const std::vector<double> rounding = ratios<float>({1024, 1024, 1024}, Data::uniform_signed, Order::fma, 1, 8, kRounding);
  const std::vector<double> l1 = ratios<float>({1024, 1024, 1024}, Data::uniform_signed, Order::fma, 1, 8, kL1);
  EXPECT_GE(largest(rounding) / largest(l1), 50);
  EXPECT_LE(largest(l1), 0.01) << "the old bound: errors 100x the rounding pass it";
}

/// Verification's checks of a simulated GEMM whose every row and column is checked, thresholds from the
/// model; `cols` and `rows` as ProtectedGemm builds them.
template <class T>
void simulated_checks(const Shape& s, Data data, Order order, detail::Checks& cols, detail::Checks& rows) {
  cols = rows = detail::Checks{};
  for (const Check& c : simulation::simulate<T>(s, data, order, 5, int(s.n), int(s.m))) {
    detail::Checks& to = c.row ? rows : cols;
    // The carried value 0 and the computed one the difference: what the decision reads.
    auto& carried = c.weighted ? to.carried_w : to.carried_e;
    auto& computed = c.weighted ? to.computed_w : to.computed_e;
    auto& tau = c.weighted ? to.tau_w : to.tau_e;
    carried.push_back(0);
    computed.push_back(c.difference);
    tau.push_back(detail::check_threshold<T>(kRounding, c.k, c.h, c.magnitudes));
  }
}

/// An error of `size` at (i, j): what it adds to the plain and weighted checks of column j and row i.
void add_error(detail::Checks& cols, detail::Checks& rows, std::int64_t i, std::int64_t j, double size) {
  cols.computed_e[std::size_t(j)] += size;
  cols.computed_w[std::size_t(j)] += double(i + 1) * size;
  rows.computed_e[std::size_t(i)] += size;
  rows.computed_w[std::size_t(i)] += double(j + 1) * size;
}

/// Clean checks are clean; an error just above the detection bound (the largest plain threshold, plus
/// the largest clean difference) or of 100x the largest clean difference is detected and located
/// wherever it is, for every data kind and order.
template <class T>
void flags_every_error_above_the_bound() {
  const Shape shape{67, 301, 45};
  for (const Data data : simulation::kData)
    for (const Order order : simulation::kOrders) {
      const std::string where = std::string(simulation::to_string(data)) + ", " + std::string(simulation::to_string(order));
      detail::Checks cols, rows;
      simulated_checks<T>(shape, data, order, cols, rows);
      const Report clean = detail::analyze(cols, rows);
      ASSERT_EQ(Finding::clean, clean.finding) << where;
      double bound = 0;
      for (const double tau : cols.tau_e) bound = std::max(bound, tau);
      for (const double tau : rows.tau_e) bound = std::max(bound, tau);
      const double above = (bound + clean.max_difference) * 1.001, hundred = 100 * clean.max_difference;
      for (const double error : {above, -above, 10 * above, -1e3 * above, 1e6 * above, hundred, -hundred})
        for (std::int64_t i = 0; i < shape.m; i += 11)
          for (std::int64_t j = 0; j < shape.n; j += 7) {
            detail::Checks c = cols, r = rows;
            add_error(c, r, i, j, error);
            const Report found = detail::analyze(c, r);
            ASSERT_EQ(Finding::corrected, found.finding) << where << ", error " << error << " at " << i << ", " << j;
            EXPECT_EQ(i, found.row) << where;
            EXPECT_EQ(j, found.col) << where;
          }
    }
}

TEST(AbftThreshold, VerificationFlagsEveryErrorAboveTheBoundFloat) { flags_every_error_above_the_bound<float>(); }
TEST(AbftThreshold, VerificationFlagsEveryErrorAboveTheBoundDouble) { flags_every_error_above_the_bound<double>(); }

TEST(AbftThreshold, ErrorsBelowEveryThresholdAreNotFlagged) {
  detail::Checks cols, rows;
  simulated_checks<float>({67, 301, 45}, Data::uniform_signed, Order::fma, cols, rows);
  double smallest = std::numeric_limits<double>::infinity();
  for (const double tau : cols.tau_e) smallest = std::min(smallest, tau);
  for (const double tau : rows.tau_e) smallest = std::min(smallest, tau);
  const Report clean = detail::analyze(cols, rows);
  add_error(cols, rows, 3, 4, (smallest - clean.max_difference) / 2);
  EXPECT_EQ(Finding::clean, detail::analyze(cols, rows).finding) << "within the rounding: not promised, not flagged";
}

TEST(AbftThreshold, ALoneInconsistentCheckIsLocatedThroughTheOtherDirection) {
  // An error just above its column's threshold but below its row's: only the column flags it. The column's
  // weighted check carries rounding of 40 (a fifth of its threshold, as 256 weights make it), which
  // moves the weights' ratio by 40 / 1.5 = 27 rows; the rows' plain checks still point at row 100.
  detail::Checks cols, rows;
  for (int j = 0; j < 4; ++j) {
    cols.carried_e.push_back(0), cols.carried_w.push_back(0), cols.tau_e.push_back(1), cols.tau_w.push_back(181);
    cols.computed_e.push_back(0.1 * j), cols.computed_w.push_back(j == 2 ? 40 : -10.0 * j);
  }
  for (int i = 0; i < 256; ++i) {
    rows.carried_e.push_back(0), rows.carried_w.push_back(0), rows.tau_e.push_back(2), rows.tau_w.push_back(8);
    rows.computed_e.push_back(0.3 * std::sin(i)), rows.computed_w.push_back(0.5 * std::cos(i));
  }
  ASSERT_EQ(Finding::clean, detail::analyze(cols, rows).finding);
  add_error(cols, rows, 100, 2, 1.5);
  const Report r = detail::analyze(cols, rows);
  EXPECT_EQ(1, r.inconsistent_cols);
  EXPECT_EQ(0, r.inconsistent_rows);
  ASSERT_EQ(Finding::corrected, r.finding);
  EXPECT_EQ(100, r.row);
  EXPECT_EQ(2, r.col);
}

}  // namespace
}  // namespace skinny::abft
