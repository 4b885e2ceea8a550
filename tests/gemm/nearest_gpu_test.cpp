// The fused nearest-centre kernel (gemm::nearest) against exact distances computed in double on the
// CPU, on shapes that are not multiples of its tiles (128 points, 128 centres, 32 or 64 inner elements),
// with padded leading dimensions, centre tiles shared over grid y, and poisoned outputs; float, half and
// bfloat16 points.
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/nearest.hpp>

#include "support/gpu_fixture.hpp"
#include "support/random_matrix.hpp"
#include "support/tf32.hpp"

#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace skinny::gemm {
namespace {

class Nearest : public testing::GpuTest {};

std::vector<float> sq_norms(const std::vector<float>& m, std::int64_t rows, std::int64_t d, std::int64_t ld) {
  std::vector<float> out(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) {
    double s = 0;
    for (std::int64_t p = 0; p < d; ++p) s += double(m[i * ld + p]) * double(m[i * ld + p]);
    out[i] = float(s);
  }
  return out;
}

struct Outputs {
  std::vector<std::int32_t> labels;
  std::vector<float> dist;
};

/// The points' element type as nearest() names it, and values rounded to it and back.
template <class P>
constexpr Element element_of() {
  if constexpr (std::is_same_v<P, __half>) return Element::f16;
  else if constexpr (std::is_same_v<P, __nv_bfloat16>) return Element::bf16;
  else return Element::f32;
}
template <class P>
std::vector<P> rounded_to(const std::vector<float>& v) {
  std::vector<P> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<P, __half>) out[i] = __float2half_rn(v[i]);
    else if constexpr (std::is_same_v<P, __nv_bfloat16>) out[i] = __float2bfloat16_rn(v[i]);
    else out[i] = v[i];
  }
  return out;
}
template <class P>
std::vector<float> widened(const std::vector<P>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
  return out;
}

/// The arguments for points x (n x d, leading dimension ldx) and centres c (k x d, ldc) with their norms.
template <class P>
NearestArguments arguments(const DeviceBuffer<P>& x, const DeviceBuffer<float>& c, const DeviceBuffer<float>& xn,
                           const DeviceBuffer<float>& cn, std::int64_t n, std::int64_t k, std::int64_t d,
                           std::int64_t ldx, std::int64_t ldc, Math math, ExactMethod method = ExactMethod::automatic) {
  NearestArguments a;
  a.x = x.data();
  a.x_type = element_of<P>();
  a.n = n;
  a.d = d;
  a.ldx = ldx;
  a.c = c.data();
  a.k = k;
  a.ldc = ldc;
  a.x_sq_norms = xn.data();
  a.c_sq_norms = cn.data();
  a.math = math;
  a.exact_method = method;
  return a;
}

/// Runs nearest on points of type P and float centres (rows padded to ldx, ldc) with poisoned outputs.
template <class P = float>
Outputs run(const std::vector<P>& x, const std::vector<float>& c, std::int64_t n, std::int64_t k, std::int64_t d,
            std::int64_t ldx, std::int64_t ldc, Math math = Math::exact, ExactMethod method = ExactMethod::automatic) {
  const auto xn = sq_norms(widened(x), n, d, ldx), cn = sq_norms(c, k, d, ldc);
  DeviceBuffer<P> dx(x);
  DeviceBuffer<float> dc(c), dxn(xn), dcn(cn), ddist(static_cast<std::size_t>(n));
  DeviceBuffer<std::int32_t> dlabels(static_cast<std::size_t>(n));
  Context& ctx = testing::shared_context();
  dlabels.copy_from(std::vector<std::int32_t>(static_cast<std::size_t>(n), -7));
  ddist.copy_from(std::vector<float>(static_cast<std::size_t>(n), std::numeric_limits<float>::quiet_NaN()));
  NearestArguments a = arguments(dx, dc, dxn, dcn, n, k, d, ldx, ldc, math, method);
  a.labels = dlabels.data();
  a.sq_distances = ddist.data();
  const Support s = nearest_can_implement(ctx, a);
  EXPECT_TRUE(s.ok) << s.reason;
  nearest(ctx, a);
  ctx.synchronize();
  return {dlabels.to_host(), ddist.to_host()};
}

/// The bound of Math::fast's distances relative to ||x||^2 + max ||c||^2: TF32 products (2^-10 relative
/// each) for float points, centres rounded to half (2^-11) or bfloat16 (2^-8) for 16-bit points.
template <class P>
double fast_relative_bound() {
  return std::is_same_v<P, __nv_bfloat16> ? std::ldexp(1.0, -5) : std::ldexp(1.0, -8);
}

/// The exact squared distances, in double, from point i of x (rows of ldx values) to the k centres of c (rows
/// of ldc), d values each: the least and which centre has it, the second least, and the distance to `label`.
struct Ranked {
  double best, second, mine;
  std::int64_t best_j;
};
Ranked rank_centres(const std::vector<float>& x, std::int64_t ldx, const std::vector<float>& c, std::int64_t ldc,
                    std::int64_t i, std::int64_t k, std::int64_t d, std::int64_t label) {
  Ranked r{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(), 0, 0};
  for (std::int64_t j = 0; j < k; ++j) {
    double s = 0;
    for (std::int64_t p = 0; p < d; ++p) {
      const double diff = double(x[i * ldx + p]) - double(c[j * ldc + p]);
      s += diff * diff;
    }
    if (s < r.best) r.second = r.best, r.best = s, r.best_j = j;
    else if (s < r.second) r.second = s;
    if (j == label) r.mine = s;
  }
  return r;
}

/// Each label is a nearest centre up to the round-off of the distance trick, whose error scales with the
/// squared norms: float arithmetic for Math::exact (any point type, either ExactMethod); Math::fast's
/// bound otherwise. Each distance is that centre's exact distance within the same bound (fast's for
/// fast_then_recheck, whose certified points keep their one-product distance), and where the runner-up is
/// farther than twice the bound, the label is the exact argmin. The reference sees the points' own
/// (rounded) values.
template <class P = float>
void expect_nearest(std::int64_t n, std::int64_t k, std::int64_t d, std::int64_t pad = 0, Math math = Math::exact,
                    ExactMethod method = ExactMethod::three_products) {
  const std::int64_t per_copy = 16 / static_cast<std::int64_t>(sizeof(P));
  const std::int64_t ldx = d + pad + (per_copy - (d + pad) % per_copy) % per_copy, ldc = d + pad;
  const std::vector<P> points = rounded_to<P>(testing::random_nonzero<float>(static_cast<std::size_t>(n * ldx), 21));
  const std::vector<float> x = widened(points);
  const auto c = testing::random_nonzero<float>(static_cast<std::size_t>(k * ldc), 22);
  const Outputs got = run(points, c, n, k, d, ldx, ldc, math, method);
  const double relative =
      math == Math::exact ? 64 * double(std::numeric_limits<float>::epsilon()) : fast_relative_bound<P>();
  const double distance_relative =
      math == Math::exact && method == ExactMethod::three_products ? relative : fast_relative_bound<P>();
  const auto xn = sq_norms(x, n, d, ldx), cn = sq_norms(c, k, d, ldc);
  const char* type = std::is_same_v<P, float> ? "float" : std::is_same_v<P, __half> ? "half" : "bf16";
  const std::string where = std::string(type) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                            " d=" + std::to_string(d) +
                            (math == Math::fast                               ? " fast"
                             : method == ExactMethod::fast_then_recheck ? " exact (fast, re-checked)"
                                                                          : " exact");
  double max_cn = 0;
  for (const float v : cn) max_cn = std::max(max_cn, double(v));
  std::int64_t exact = 0, worst_i = -1;
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t label = got.labels[i];
    ASSERT_TRUE(label >= 0 && label < k) << where << " point " << i << " label " << label;
    const auto [best, second, mine, best_j] = rank_centres(x, ldx, c, ldc, i, k, d, label);
    exact += best_j == label;
    const double bound = relative * (double(xn[i]) + max_cn);
    ASSERT_LE(mine - best, bound) << where << " point " << i << ": label " << label << " is not a nearest centre ("
                                  << best_j << ")";
    if (second - best > 2 * bound)
      ASSERT_EQ(best_j, label) << where << " point " << i << ": a clear nearest centre was missed";
    const double distance_bound = distance_relative * (double(xn[i]) + max_cn);
    ASSERT_NEAR(mine, double(got.dist[i]), distance_bound) << where << " point " << i;
    if (std::abs(mine - got.dist[i]) / distance_bound > worst)
      worst = std::abs(mine - got.dist[i]) / distance_bound, worst_i = i;
  }
  // Ties within float round-off are rare with random data: nearly every exact label is the exact argmin.
  if (math == Math::exact) EXPECT_GE(exact, n - n / 100 - 1) << where;
  std::printf("nearest %s: %lld of %lld labels the exact argmin; worst distance error %.3g of the bound (point %lld)\n",
              where.c_str(), static_cast<long long>(exact), static_cast<long long>(n), worst,
              static_cast<long long>(worst_i));
}

TEST_F(Nearest, MatchesExactDistancesOnOddShapes) {
  for (const ExactMethod method : {ExactMethod::three_products, ExactMethod::fast_then_recheck}) {
    expect_nearest(1, 1, 1, 0, Math::exact, method);
    expect_nearest(7, 3, 5, 3, Math::exact, method);        // d not a multiple of 4: the last 16-byte copy is partial
    expect_nearest(17, 1, 127, 0, Math::exact, method);
    expect_nearest(17, 2, 3, 0, Math::exact, method);
    expect_nearest(127, 17, 1000, 4, Math::exact, method);  // many inner stages, padded rows
    expect_nearest(1000, 129, 36, 0, Math::exact, method);  // two centre tiles, the second with one column
    expect_nearest(300, 1300, 8, 0, Math::exact, method);   // few point blocks: centre tiles shared over grid y
    expect_nearest(10243, 260, 64, 0, Math::exact, method);
    expect_nearest(2000, 50, 300, 0, Math::exact, method);  // one tile of 33-64 centres: wgmma 64 wide
    expect_nearest(1000, 168, 40, 0, Math::exact, method);  // the second tile 64 wide, beside the first's sums
  }
}

TEST_F(Nearest, FastMathMatchesWithinTf32Bounds) {
  for (const Math math : {Math::fast}) {
    expect_nearest(1, 1, 1, 0, math);
    expect_nearest(7, 3, 5, 3, math);
    expect_nearest(127, 17, 1000, 4, math);
    expect_nearest(1000, 129, 36, 0, math);
    expect_nearest(300, 1300, 8, 0, math);
    expect_nearest(10243, 260, 64, 0, math);
    expect_nearest(2000, 50, 300, 0, math);
    expect_nearest(1000, 168, 40, 0, math);
  }
}

/// Half and bfloat16 points read as they are: both precision modes, odd shapes (d from 1; rows padded to
/// 16-byte copies), several inner stages, centre tiles shared over grid y, and centres far from 1 in size
/// (the exact mode's per-centre power of two).
template <class P>
void sixteen_bit_points_match() {
  const std::pair<Math, ExactMethod> modes[] = {{Math::exact, ExactMethod::three_products},
                                                {Math::exact, ExactMethod::fast_then_recheck},
                                                {Math::fast, ExactMethod::automatic}};
  for (const auto& [math, method] : modes) {
    expect_nearest<P>(1, 1, 1, 0, math, method);
    expect_nearest<P>(7, 3, 5, 3, math, method);
    expect_nearest<P>(17, 2, 3, 0, math, method);
    expect_nearest<P>(127, 17, 1000, 8, math, method);
    expect_nearest<P>(1000, 129, 36, 0, math, method);
    expect_nearest<P>(300, 1300, 8, 0, math, method);
    expect_nearest<P>(10243, 260, 64, 0, math, method);
    expect_nearest<P>(2000, 50, 300, 0, math, method);
    expect_nearest<P>(1000, 168, 40, 0, math, method);
  }
}

/// Up to 32 or 64 centres with rows the TMA copies (32 bytes and up) take stages of 32 or 64 centre rows
/// (the rings of few centres); 65 takes the wide one. Each mode, several inner stages and a partial last
/// one, point blocks past a multiple of 128.
TEST_F(Nearest, FewCentresMatchThroughTheShortRing) {
  for (const std::int64_t k : {1, 2, 16, 31, 32, 33, 50, 64, 65}) {
    expect_nearest(2049, k, 300, 0, Math::fast);
    expect_nearest(2049, k, 300, 0, Math::exact, ExactMethod::three_products);
    expect_nearest(2049, k, 300, 0, Math::exact, ExactMethod::fast_then_recheck);
    expect_nearest<__half>(1000, k, 1000, 8, Math::fast);
    expect_nearest<__nv_bfloat16>(1000, k, 72, 0, Math::fast);
  }
}

TEST_F(Nearest, HalfPointsMatchInBothModes) { sixteen_bit_points_match<__half>(); }
TEST_F(Nearest, Bfloat16PointsMatchInBothModes) { sixteen_bit_points_match<__nv_bfloat16>(); }

/// Rows of one stage or less (d <= 32 float, 64 16-bit) copy the points into the ring's first round of
/// stages only, and every later tile reuses them: enough point blocks (n > 528 x 128) that each block
/// takes every centre tile alone, and more tiles than stages, through cp.async (rows under 32 bytes,
/// k <= 1024), the TMA (narrow rows beyond 1024 centres, wider rows), and a k not a multiple of the tile.
TEST_F(Nearest, RowsOfOneStageKeepTheirPointsAcrossTiles) {
  const std::pair<Math, ExactMethod> modes[] = {{Math::exact, ExactMethod::three_products},
                                                {Math::exact, ExactMethod::fast_then_recheck},
                                                {Math::fast, ExactMethod::automatic}};
  for (const auto& [math, method] : modes) {
    expect_nearest(70001, 1000, 2, 0, math, method);
    expect_nearest(70001, 1500, 3, 0, math, method);
    expect_nearest(70001, 1100, 17, 0, math, method);
    expect_nearest<__half>(70001, 700, 6, 0, math, method);
    expect_nearest<__nv_bfloat16>(70001, 1100, 40, 0, math, method);
  }
}

/// Exact mode on 16-bit points gives the labels and distances of float points with the same values: every
/// product is exact in both, whatever the centres' sizes (tiny, huge, mixed within a centre). Through
/// fast_then_recheck the same labels (centres beyond half's range certify no point: all are re-checked),
/// and distances within the one-product bound.
template <class P>
void exact_equals_float_on_the_same_values(double scale, ExactMethod method) {
  const std::int64_t n = 3001, k = 300, d = 48;
  std::vector<float> c = testing::random_nonzero<float>(static_cast<std::size_t>(k * d), 42);
  for (std::size_t i = 0; i < c.size(); ++i) c[i] *= float(scale * (i % 7 == 0 ? 1e-3 : 1.0));
  std::vector<float> raw = testing::random_nonzero<float>(static_cast<std::size_t>(n * d), 41);
  for (float& v : raw) v *= float(std::min(scale, 1.0));  // within half's range
  const std::vector<P> points = rounded_to<P>(raw);
  const std::vector<float> same_values = widened(points);
  const Outputs want = run(same_values, c, n, k, d, d, d, Math::exact, ExactMethod::three_products);
  const Outputs got = run(points, c, n, k, d, d, d, Math::exact, method);
  const auto xn = sq_norms(same_values, n, d, d), cn = sq_norms(c, k, d, d);
  const double max_cn = *std::max_element(cn.begin(), cn.end());
  const double relative = method == ExactMethod::three_products ? 64 * double(std::numeric_limits<float>::epsilon())
                                                                : fast_relative_bound<P>();
  // Half's subnormal centres (the small scale) are rounded to multiples of 2^-25: ||c^ - c|| <= r, so a
  // one-product distance is off by up to 2 r sqrt(distance) + r^2 more.
  const double r = std::is_same_v<P, __half> && method == ExactMethod::fast_then_recheck ? std::sqrt(double(d)) * 0x1p-25 : 0;
  std::int64_t same = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    same += want.labels[i] == got.labels[i];
    const double subnormal = 2 * r * std::sqrt(std::max(0.0, double(want.dist[i]))) + r * r;
    ASSERT_NEAR(want.dist[i], got.dist[i], relative * (xn[i] + max_cn) + subnormal) << "scale " << scale << " point " << i;
  }
  // Both sides round only their sums (3xTF32 against three exact 16-bit products): ties within float
  // round-off may go either way, nothing else.
  EXPECT_GE(same, n - n / 200) << "scale " << scale;
  std::printf("16-bit exact against float on the same values, centres scaled by %g: %lld of %lld labels equal\n", scale,
              static_cast<long long>(same), static_cast<long long>(n));
}

TEST_F(Nearest, SixteenBitExactEqualsFloatOnTheSameValues) {
  for (const ExactMethod method : {ExactMethod::three_products, ExactMethod::fast_then_recheck})
    for (const double scale : {1.0, 0x1p-20, 0x1p+20}) {
      exact_equals_float_on_the_same_values<__half>(scale, method);
      exact_equals_float_on_the_same_values<__nv_bfloat16>(scale, method);
    }
}

/// f() with SKINNY_NEAREST_CANDIDATES set to `value`, the variable restored afterwards (a caller's setting
/// holds for the tests around).
template <class F>
auto with_candidates(const char* value, F&& f) {
  const char* was = std::getenv("SKINNY_NEAREST_CANDIDATES");
  const std::string before = was ? was : "";
  setenv("SKINNY_NEAREST_CANDIDATES", value, 1);
  auto result = f();
  if (was) setenv("SKINNY_NEAREST_CANDIDATES", before.c_str(), 1);
  else unsetenv("SKINNY_NEAREST_CANDIDATES");
  return result;
}

/// fast_then_recheck on points whose nearest centre has an identical twin: no such point can be certified
/// (its best two distances are equal), so nearly all are re-checked, in two batches; the labels are the
/// lower twins. On Hopper the twins are the points' candidates (SKINNY_NEAREST_CANDIDATES=1: their cross
/// terms summed in double, distances within float's bound of three products', labels those of three
/// products but at ties within float's round-off); with them off (=0), and elsewhere, the exact kernel runs
/// them again: the labels and distances of three products to the bit.
TEST_F(Nearest, RecheckSettlesExactTiesInBatches) {
  const std::int64_t n = 70001, half_k = 40, k = 2 * half_k, d = 19, ld = 20;
  std::vector<float> c = testing::random_nonzero<float>(static_cast<std::size_t>(half_k * ld), 52);
  c.insert(c.end(), c.begin(), c.end());  // centre j + 40 is centre j
  const auto x = testing::random_nonzero<float>(static_cast<std::size_t>(n * ld), 51);
  Context& ctx = testing::shared_context();
  const Outputs three = run(x, c, n, k, d, ld, ld, Math::exact, ExactMethod::three_products);
  const auto xn = sq_norms(x, n, d, ld), cn = sq_norms(c, k, d, ld);
  const double max_cn = *std::max_element(cn.begin(), cn.end());
  for (const bool candidates : {true, false}) {
    ctx.nearest_recheck() = {};
    const Outputs rechecked = with_candidates(candidates ? "1" : "0", [&] {
      return run(x, c, n, k, d, ld, ld, Math::exact, ExactMethod::fast_then_recheck);
    });
    const Context::NearestRecheck seen = ctx.nearest_recheck();
    const bool by_candidates = candidates && nearest_uses_wgmma(ctx);
    for (const std::int32_t label : rechecked.labels) ASSERT_LT(label, half_k);
    EXPECT_GT(seen.rechecked_share + seen.candidates_share, 0.99);
    if (by_candidates) {
      // Sums in double against float sums: a label may differ only where two centres tie within float's
      // round-off (the distances, each of its own label, agree to that).
      EXPECT_GT(seen.candidates_share, 0.99) << "twins are two candidates";
      std::int64_t differ = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        differ += three.labels[i] != rechecked.labels[i];
        ASSERT_NEAR(three.dist[i], rechecked.dist[i],
                    64 * double(std::numeric_limits<float>::epsilon()) * (xn[i] + max_cn))
            << "point " << i;
      }
      EXPECT_LE(differ, n / 10000);
    } else {
      EXPECT_EQ(three.labels, rechecked.labels);
      EXPECT_EQ(0, std::memcmp(three.dist.data(), rechecked.dist.data(), three.dist.size() * sizeof(float)));
    }
  }
  ctx.nearest_recheck() = {};
}

/// The candidates of a collecting pass (Hopper, SKINNY_NEAREST_CANDIDATES=1): centres in groups of near
/// twins, apart by far less than the one-product bound and far more than float's round-off, so that nearly
/// every point is left by the certificate with its group as candidates. Groups of 4 and 16 (every slot
/// filled) are settled by their candidates; of a group of 64, more than the 16 slots lie within reach of
/// most points (half's reach is about 2.4 standard deviations of the group's distances, bfloat16's and
/// TF32's many more), and those points go to three products. Either way each label is a nearest centre up to float's round-off, and the
/// exact (double) argmin where the runner-up is farther than that, for float, half and bfloat16 points.
template <class P>
void groups_of_near_twins(std::int64_t group) {
  Context& ctx = testing::shared_context();
  if (!nearest_uses_wgmma(ctx)) GTEST_SKIP() << "collecting passes run on Hopper's wgmma kernels";
  const std::int64_t n = 5000, d = 64, bases = 260 / group, k = bases * group;
  const std::vector<float> base = testing::random_nonzero<float>(static_cast<std::size_t>(bases * d), 91);
  const std::vector<float> jitter = testing::random_nonzero<float>(static_cast<std::size_t>(k * d), 92);
  std::vector<float> c(static_cast<std::size_t>(k * d));
  for (std::int64_t j = 0; j < k; ++j)
    for (std::int64_t p = 0; p < d; ++p) c[j * d + p] = base[(j / group) * d + p] + 1e-3f * jitter[j * d + p];
  const std::vector<P> points = rounded_to<P>(testing::random_nonzero<float>(static_cast<std::size_t>(n * d), 93));
  const std::vector<float> x = widened(points);
  ctx.nearest_recheck() = {};
  const Outputs got =
      with_candidates("1", [&] { return run(points, c, n, k, d, d, d, Math::exact, ExactMethod::fast_then_recheck); });
  const Context::NearestRecheck seen = ctx.nearest_recheck();
  const char* type = std::is_same_v<P, float> ? "float" : std::is_same_v<P, __half> ? "half" : "bf16";
  const std::string where = std::string(type) + ", groups of " + std::to_string(group);
  EXPECT_GT(seen.rechecked_share + seen.candidates_share, 0.5) << where << ": the groups should leave most points";
  if (group <= 16) EXPECT_EQ(seen.rechecked_share, 0.0) << where << ": a point's candidates are its group";
  else EXPECT_GT(seen.rechecked_share, 0.25) << where << ": more than 16 of a group of 64 lie within reach";
  const auto xn = sq_norms(x, n, d, d), cn = sq_norms(c, k, d, d);
  const double max_cn = *std::max_element(cn.begin(), cn.end());
  std::int64_t clear = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(got.labels[i] >= 0 && got.labels[i] < k) << where << " point " << i;
    const auto [best, second, mine, best_j] = rank_centres(x, d, c, d, i, k, d, got.labels[i]);
    const double bound = 64 * double(std::numeric_limits<float>::epsilon()) * (xn[i] + max_cn);
    ASSERT_LE(mine - best, bound) << where << " point " << i << ": label " << got.labels[i] << " is not nearest";
    if (second - best > 2 * bound) {  // a tie within float's round-off may go either way
      ++clear;
      ASSERT_EQ(best_j, got.labels[i]) << where << " point " << i;
    }
    // Certified points keep their one-product distance.
    ASSERT_NEAR(best, got.dist[i], fast_relative_bound<P>() * (xn[i] + max_cn)) << where << " point " << i;
  }
  EXPECT_GT(clear, n / 2) << where;
  std::printf("groups of near twins, %s: %.1f %% settled by candidates, %.1f %% by three products\n", where.c_str(),
              100 * seen.candidates_share, 100 * seen.rechecked_share);
  ctx.nearest_recheck() = {};
}

TEST_F(Nearest, CandidatesSettleNearTiesAndLeaveCrowdsToThreeProducts) {
  for (const std::int64_t group : {4, 16, 64}) {
    groups_of_near_twins<float>(group);
    groups_of_near_twins<__half>(group);
    groups_of_near_twins<__nv_bfloat16>(group);
  }
}

/// fast_then_recheck with many clusters certifies again, with each float point's own distance from its
/// TF32 value, what the worst-case bound (2^-10 ||x|| + the centres' rounding) leaves: on points and
/// centres TF32 holds exactly, only near ties within the float sums' error are re-checked, where the bound
/// alone leaves about 8 % of such points (a host model of this shape).
TEST_F(Nearest, RecheckCertifiesWithEachPointsOwnRounding) {
  const std::int64_t n = 20000, k = 1024, d = 64;
  auto x = testing::random_nonzero<float>(static_cast<std::size_t>(n * d), 81);
  auto c = testing::random_nonzero<float>(static_cast<std::size_t>(k * d), 82);
  for (auto* v : {&x, &c})
    for (float& e : *v) e = testing::tf32_truncated(e);
  Context& ctx = testing::shared_context();
  ctx.nearest_recheck() = {};
  const Outputs rechecked = run(x, c, n, k, d, d, d, Math::exact, ExactMethod::fast_then_recheck);
  ASSERT_EQ(ctx.nearest_recheck().n, n);
  EXPECT_LE(ctx.nearest_recheck().rechecked_share + ctx.nearest_recheck().candidates_share, 0.002);
  EXPECT_EQ(run(x, c, n, k, d, d, d, Math::exact, ExactMethod::three_products).labels, rechecked.labels);
  ctx.nearest_recheck() = {};
}

/// A half copy of points x (as float values; rows of ld values, d used) for NearestArguments::x_half: its
/// values (rows of ldh, zeros past d), their squared norms and each row's distance to x, rounded up. `lie`: the copy of
/// other points, with distances 0 (a copy the kernel must not be given).
struct HalfCopy {
  std::vector<__half> values;
  std::vector<float> sq_norms, errors;
  std::int64_t ld = 0;
};
HalfCopy half_copy_of(const std::vector<float>& x, std::int64_t n, std::int64_t d, std::int64_t ld, bool lie = false) {
  HalfCopy h;
  h.ld = (d + 7) / 8 * 8;
  const std::vector<float> other = testing::random_nonzero<float>(x.size(), 99);
  h.values.assign(static_cast<std::size_t>(n * h.ld), __float2half_rn(0.0f));
  for (std::int64_t i = 0; i < n; ++i) {
    double sq = 0, err = 0;
    for (std::int64_t p = 0; p < d; ++p) {
      const float v = (lie ? other : x)[i * ld + p];
      const __half r = __float2half_rn(v);
      h.values[i * h.ld + p] = r;
      sq += double(__half2float(r)) * double(__half2float(r));
      err += (double(__half2float(r)) - double(v)) * (double(__half2float(r)) - double(v));
    }
    h.sq_norms.push_back(float(sq));
    h.errors.push_back(lie ? 0.0f : std::nextafter(float(std::sqrt(err) * (1 + 0x1p-20)), INFINITY));
  }
  return h;
}

/// Exact mode through fast_then_recheck with the first pass on a half copy of float or bfloat16 points
/// (x_half): the labels of three products (each point certified with its own distance to the copy, or
/// re-checked on x), with most points certified, on odd shapes and on points with values among half's
/// subnormals (bfloat16 points otherwise convert exactly). A copy of other points changes the labels: the
/// first pass does read it.
template <class P>
void exact_on_a_half_copy() {
  Context& ctx = testing::shared_context();
  for (const auto [n, k, d, ld, tiny] : {std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool>{
                                             1000, 129, 36, 36, false},
                                         {3001, 300, 48, 48, true},
                                         {10243, 260, 65, 68, false},
                                         {2000, 1024, 130, 132, true}}) {
    const std::int64_t ldp = std::is_same_v<P, float> ? ld : (ld + 7) / 8 * 8;  // 16-bit rows: 16-byte copies
    auto raw = testing::random_nonzero<float>(static_cast<std::size_t>(n * ldp), 71);
    if (tiny)  // every fifth value among half's subnormals: the copy's error is no longer relative to x
      for (std::size_t i = 0; i < raw.size(); i += 5) raw[i] *= 1e-6f;
    const std::vector<P> points = rounded_to<P>(raw);
    const std::vector<float> x = widened(points);
    const auto c = testing::random_nonzero<float>(static_cast<std::size_t>(k * d), 72);
    const std::string where = std::string(std::is_same_v<P, float> ? "float" : "bf16") + " n=" + std::to_string(n) +
                              " k=" + std::to_string(k) + " d=" + std::to_string(d) +
                              (tiny ? " with subnormal halves" : "");
    const Outputs want = run(points, c, n, k, d, ldp, d, Math::exact, ExactMethod::three_products);
    const auto on_copy = [&](const HalfCopy& h) {
      const auto xn = sq_norms(x, n, d, ldp), cn = sq_norms(c, k, d, d);
      DeviceBuffer<P> dx(points);
      DeviceBuffer<float> dc(c), dxn(xn), dcn(cn), ddist(static_cast<std::size_t>(n));
      DeviceBuffer<__half> dh(h.values);
      DeviceBuffer<float> dhn(h.sq_norms), dhe(h.errors);
      DeviceBuffer<std::int32_t> dlabels(std::vector<std::int32_t>(static_cast<std::size_t>(n), -7));
      NearestArguments a = arguments(dx, dc, dxn, dcn, n, k, d, ldp, d, Math::exact, ExactMethod::fast_then_recheck);
      a.labels = dlabels.data();
      a.sq_distances = ddist.data();
      a.x_half = dh.data();
      a.ldx_half = h.ld;
      a.x_half_sq_norms = dhn.data();
      a.x_half_errors = dhe.data();
      const Support s = nearest_can_implement(ctx, a);
      EXPECT_TRUE(s.ok) << s.reason;
      ctx.nearest_recheck() = {};
      nearest(ctx, a);
      ctx.synchronize();
      return Outputs{dlabels.to_host(), ddist.to_host()};
    };
    const Outputs got = on_copy(half_copy_of(x, n, d, ldp));
    EXPECT_EQ(want.labels, got.labels) << where;
    const double share = ctx.nearest_recheck().rechecked_share + ctx.nearest_recheck().candidates_share;
    EXPECT_LT(share, 0.5) << where << ": the copy's first pass certified too few points";
    const auto xn = sq_norms(x, n, d, ldp), cn = sq_norms(c, k, d, d);
    const double max_cn = *std::max_element(cn.begin(), cn.end());
    for (std::int64_t i = 0; i < n; ++i)  // certified points keep their one-product distance
      ASSERT_NEAR(want.dist[i], got.dist[i], fast_relative_bound<__half>() * (xn[i] + max_cn)) << where << " point " << i;
    EXPECT_NE(want.labels, on_copy(half_copy_of(x, n, d, ldp, true)).labels) << where << ": a lying copy went unread";
    std::printf("exact on a half copy, %s: %.1f %% re-checked\n", where.c_str(), 100 * share);
  }
  ctx.nearest_recheck() = {};
}

TEST_F(Nearest, ExactOnAHalfCopyGivesTheLabelsOfThreeProducts) {
  exact_on_a_half_copy<float>();
  exact_on_a_half_copy<__nv_bfloat16>();
}

/// ExactMethod::automatic on a shape whose last re-check left most points uncertified takes three products
/// (the Context remembers the share), and tries the re-check again every 4th call.
TEST_F(Nearest, AutomaticLeavesTheRecheckWhereItLeavesMostPointsUncertified) {
  const std::int64_t n = 5000, half_k = 100, k = 2 * half_k, d = 128;
  std::vector<float> c = testing::random_nonzero<float>(static_cast<std::size_t>(half_k * d), 62);
  c.insert(c.end(), c.begin(), c.end());  // twins: no point can be certified
  const auto x = testing::random_nonzero<float>(static_cast<std::size_t>(n * d), 61);
  Context& ctx = testing::shared_context();
  ctx.nearest_recheck() = {};
  const Outputs want = run(x, c, n, k, d, d, d, Math::exact, ExactMethod::three_products);
  EXPECT_EQ(ctx.nearest_recheck().n, 0) << "three_products keeps no share";
  for (int call = 1; call <= 9; ++call) {
    EXPECT_EQ(want.labels, run(x, c, n, k, d, d, d).labels) << "call " << call;
    const Context::NearestRecheck& seen = ctx.nearest_recheck();
    ASSERT_EQ(seen.n, n);
    EXPECT_EQ(seen.rechecked_share + seen.candidates_share, 1.0);
    EXPECT_GT(seen.cost_share, 0.35) << "twins settled by candidates (with 200 centres) cost more than three products";
    // Tried on calls 1, 5 and 9, three products on the three calls between.
    EXPECT_EQ(seen.calls_since_tried, (call - 1) % 4) << "call " << call;
  }
  ctx.nearest_recheck() = {};
}

TEST_F(Nearest, RepeatedRunsAreBitIdentical) {
  const std::int64_t n = 2000, k = 700, d = 40;
  const auto x = testing::random_nonzero<float>(static_cast<std::size_t>(n * d), 31);
  const auto c = testing::random_nonzero<float>(static_cast<std::size_t>(k * d), 32);
  const Outputs first = run(x, c, n, k, d, d, d);
  for (int rep = 0; rep < 3; ++rep) {
    const Outputs again = run(x, c, n, k, d, d, d);
    ASSERT_EQ(first.labels, again.labels);
    ASSERT_EQ(0, std::memcmp(first.dist.data(), again.dist.data(), first.dist.size() * sizeof(float)));
  }
}

/// row_sums (Params::protect's checksum test): each point's sum of cross terms against a double reference,
/// the labels unchanged by asking for them, and an injected fault flipped in the term it names, in the sum too.
TEST_F(Nearest, RowSumsAddEveryCrossTermAndAFaultShowsInThem) {
  for (const Math math : {Math::exact, Math::fast}) {
    const std::int64_t n = 1000, k = 300, d = 37, ld = 40;  // several centre tiles, odd sizes
    const auto x = testing::random_nonzero<float>(static_cast<std::size_t>(n * ld), 31);
    const auto c = testing::random_nonzero<float>(static_cast<std::size_t>(k * ld), 32);
    const auto xn = sq_norms(x, n, d, ld), cn = sq_norms(c, k, d, ld);
    DeviceBuffer<float> dx(x), dc(c), dxn(xn), dcn(cn), fault(2);
    DeviceBuffer<std::int32_t> labels(static_cast<std::size_t>(n));
    DeviceBuffer<double> sums(std::vector<double>(static_cast<std::size_t>(n), std::nan("")));
    Context& ctx = testing::shared_context();
    NearestArguments a = arguments(dx, dc, dxn, dcn, n, k, d, ld, ld, math);
    a.labels = labels.data();
    a.row_sums = sums.data();
    nearest(ctx, a);
    const std::vector<double> clean = sums.to_host();
    const std::vector<std::int32_t> clean_labels = labels.to_host();
    EXPECT_EQ(clean_labels, run(x, c, n, k, d, ld, ld, math, ExactMethod::three_products).labels);
    const double u = math == Math::exact ? 0x1p-24 : 0x1p-11;
    for (std::int64_t i = 0; i < n; ++i) {
      double ref = 0, mag = 0;
      for (std::int64_t j = 0; j < k; ++j)
        for (std::int64_t p = 0; p < d; ++p) {
          ref += double(x[i * ld + p]) * double(c[j * ld + p]);
          mag += std::fabs(double(x[i * ld + p]) * double(c[j * ld + p]));
        }
      ASSERT_NEAR(clean[std::size_t(i)], ref, 4 * u * std::sqrt(double(d + k)) * mag) << "point " << i;
    }
    a.fault_row = 517;
    a.fault_col = 211;
    a.fault_bit = 30;  // the exponent's top bit: a huge error
    a.fault_values = fault.data();
    ASSERT_TRUE(nearest_can_implement(ctx, a).ok);
    nearest(ctx, a);
    const std::vector<float> v = fault.to_host();
    const std::vector<double> faulty = sums.to_host();
    EXPECT_NE(v[0], v[1]);
    // Few points: the centre tiles are shared among blocks, whose shares of a sum are added by atomics
    // (the last bits depend on their order).
    const double jump = double(v[1]) - double(v[0]);
    EXPECT_NEAR(faulty[517] - clean[517], jump, 1e-9 * std::fabs(jump) + 1e-3);
    for (std::int64_t i = 0; i < n; ++i)
      if (i != 517) EXPECT_NEAR(clean[std::size_t(i)], faulty[std::size_t(i)], 1e-9 * (1 + std::fabs(clean[std::size_t(i)])));
    a.fault_bit = 32;
    EXPECT_FALSE(nearest_can_implement(ctx, a).ok);
  }
}

/// row_sums with fast_then_recheck (Params::protect of Math::exact): every point's sum of one-product terms
/// (points truncated, centres rounded to TF32) and, for each point listed as re-checked, its sum of
/// float-accurate terms; the listed points are distinct, include every point whose nearest centre has a
/// twin (it cannot be certified), and the labels are three products'. Fast mode lists none.
TEST_F(Nearest, RecheckedRowSumsListThePointsRunAgain) {
  const std::int64_t n = 3001, k = 300, d = 37, ld = 40, twins = 20;
  const auto x = testing::random_nonzero<float>(static_cast<std::size_t>(n * ld), 71);
  auto c = testing::random_nonzero<float>(static_cast<std::size_t>(k * ld), 72);
  std::copy(c.begin(), c.begin() + twins * ld, c.end() - twins * ld);  // centres k - 20.. repeat 0..19
  const auto xn = sq_norms(x, n, d, ld), cn = sq_norms(c, k, d, ld);
  DeviceBuffer<float> dx(x), dc(c), dxn(xn), dcn(cn);
  DeviceBuffer<std::int32_t> labels(static_cast<std::size_t>(n)), listed(static_cast<std::size_t>(n));
  DeviceBuffer<double> sums(std::vector<double>(static_cast<std::size_t>(n), std::nan(""))),
      listed_sums(std::vector<double>(static_cast<std::size_t>(n), std::nan("")));
  Context& ctx = testing::shared_context();
  for (const Math math : {Math::exact, Math::fast}) {
    NearestArguments a = arguments(dx, dc, dxn, dcn, n, k, d, ld, ld, math, ExactMethod::fast_then_recheck);
    std::int64_t count = -1;
    bool one_product = false;
    a.labels = labels.data();
    a.row_sums = sums.data();
    a.rechecked_rows = listed.data();
    a.rechecked_row_sums = listed_sums.data();
    a.rechecked_count = &count;
    a.row_sums_one_product = &one_product;
    ASSERT_TRUE(nearest_can_implement(ctx, a).ok) << nearest_can_implement(ctx, a).reason;
    nearest(ctx, a);
    ctx.synchronize();
    EXPECT_TRUE(one_product);
    EXPECT_EQ(labels.to_host(), run(x, c, n, k, d, ld, ld, math, ExactMethod::three_products).labels);
    const std::vector<double> row = sums.to_host();
    for (std::int64_t i = 0; i < n; ++i) {  // one-product terms, added by the tensor cores in float
      double ref = 0, mag = 0;
      for (std::int64_t j = 0; j < k; ++j)
        for (std::int64_t p = 0; p < d; ++p) {
          const double v =
              double(testing::tf32_truncated(x[i * ld + p])) * double(testing::tf32_rounded(c[j * ld + p]));
          ref += v;
          mag += std::fabs(v);
        }
      ASSERT_NEAR(row[std::size_t(i)], ref, double(d + 16) * 0x1p-23 * mag) << "point " << i;
    }
    if (math == Math::fast) {
      EXPECT_EQ(0, count);
      continue;
    }
    ASSERT_GT(count, 0);
    ASSERT_LT(count, n);
    std::vector<std::int32_t> rows = listed.to_host();
    rows.resize(static_cast<std::size_t>(count));
    const std::vector<double> exact_sums = listed_sums.to_host();
    std::vector<bool> seen(static_cast<std::size_t>(n), false);
    for (std::int64_t q = 0; q < count; ++q) {
      const std::int32_t i = rows[std::size_t(q)];
      ASSERT_TRUE(i >= 0 && i < n && !seen[std::size_t(i)]) << "listed row " << i;
      seen[std::size_t(i)] = true;
      double ref = 0, mag = 0;
      for (std::int64_t j = 0; j < k; ++j)
        for (std::int64_t p = 0; p < d; ++p) {
          ref += double(x[i * ld + p]) * double(c[j * ld + p]);
          mag += std::fabs(double(x[i * ld + p]) * double(c[j * ld + p]));
        }
      ASSERT_NEAR(exact_sums[std::size_t(q)], ref, 4 * 0x1p-24 * std::sqrt(double(d + k)) * mag) << "point " << i;
    }
    const std::vector<std::int32_t> l = labels.to_host();
    for (std::int64_t i = 0; i < n; ++i)
      if (l[std::size_t(i)] < twins) EXPECT_TRUE(seen[std::size_t(i)]) << "point " << i << " has a twin centre";
  }
}

/// One product per term takes Hopper's wgmma wherever the build and the device allow it (not silently
/// mma.sync), and never elsewhere; SKINNY_NEAREST_WGMMA=0 turns it off.
TEST_F(Nearest, TakesWgmmaOnHopperWhenBuiltForIt) {
  const Context& ctx = testing::shared_context();
  const bool hopper = ctx.properties().major == 9 && ctx.properties().minor == 0;
  const char* off = std::getenv("SKINNY_NEAREST_WGMMA");
  const bool turned_off = off && std::string(off) == "0";
#ifdef SKINNY_NEAREST_BUILT_FOR_SM90A
  EXPECT_EQ(hopper && !turned_off, nearest_uses_wgmma(ctx));
#else
  EXPECT_FALSE(nearest_uses_wgmma(ctx)) << "built without the 90a target";
  (void)hopper;
  (void)turned_off;
#endif
}

TEST_F(Nearest, RefusesWhatItCannotRunAndSaysWhy) {
  Context& ctx = testing::shared_context();
  DeviceBuffer<float> buf(64);
  DeviceBuffer<std::int32_t> labels(8);
  NearestArguments a;
  a.x = a.c = a.x_sq_norms = a.c_sq_norms = buf.data();
  a.n = 8;
  a.d = 5;
  a.k = 2;
  a.labels = labels.data();
  const Support unaligned = nearest_can_implement(ctx, a);  // ldx = d = 5
  EXPECT_FALSE(unaligned.ok);
  EXPECT_NE(unaligned.reason.find("ldx = 5"), std::string::npos) << unaligned.reason;
  EXPECT_THROW(nearest(ctx, a), std::invalid_argument);
  a.ldx = 8;
  EXPECT_TRUE(nearest_can_implement(ctx, a).ok);
  a.k = 0;
  EXPECT_NE(nearest_can_implement(ctx, a).reason.find("k = 0"), std::string::npos);
  a.k = 2;
  a.labels = nullptr;
  EXPECT_FALSE(nearest_can_implement(ctx, a).ok);
  a.labels = labels.data();
  a.ldc = 3;
  EXPECT_NE(nearest_can_implement(ctx, a).reason.find("ldc = 3"), std::string::npos);
  a.ldc = 0;
  DeviceBuffer<double> sums(8);
  a.row_sums = sums.data();
  a.exact_method = ExactMethod::fast_then_recheck;  // without the re-check's outputs
  EXPECT_NE(nearest_can_implement(ctx, a).reason.find("fast_then_recheck"), std::string::npos);
  DeviceBuffer<std::int32_t> listed(8);
  std::int64_t count = 0;
  a.rechecked_rows = listed.data();
  a.rechecked_row_sums = sums.data();
  EXPECT_NE(nearest_can_implement(ctx, a).reason.find("go together"), std::string::npos);  // no count
  a.rechecked_count = &count;
  EXPECT_TRUE(nearest_can_implement(ctx, a).ok);
  a.row_sums = nullptr;
  EXPECT_NE(nearest_can_implement(ctx, a).reason.find("with row_sums"), std::string::npos);
  a.row_sums = sums.data();
  a.exact_method = ExactMethod::automatic;
  EXPECT_TRUE(nearest_can_implement(ctx, a).ok);
}

}  // namespace
}  // namespace skinny::gemm
