// Every registry entry x element type x layouts and leading dimensions x awkward shapes x alpha/beta,
// on the GPU, against the double-precision CPU reference with a norm-wise bound. Outputs are poisoned
// before each run and the padding between rows of C must come back untouched.
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/gemm.hpp>
#include <skinny/gemm/reference.hpp>

#include "support/gpu_fixture.hpp"
#include "support/random_matrix.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <string>

namespace skinny::gemm {
namespace {

struct Shape {
  std::int64_t m, n, k;
};
struct Layouts {
  Layout a, b, c;
  std::int64_t pad;  ///< extra elements in every leading dimension (3 makes 16-byte vectors misaligned)
};
struct Scalars {
  double alpha, beta;
};
struct Case {
  Algo algo;
  DType type;
  Shape shape;
  Layouts layouts;
  Scalars scalars;
};

// Not multiples of any tile size (1, 7, 17, 127, 129, 1000, 1027), plus tile multiples for the fast paths.
const Shape kShapes[] = {{1, 1, 1},       {1, 1027, 17},    {7, 17, 1},      {17, 7, 129},
                         {127, 128, 129}, {128, 129, 127}, {129, 127, 1000}, {1000, 7, 1027},
                         {1027, 1000, 33}, {256, 256, 256}};
// TSM2's shapes: the paper's A is n x m (rows x inner), B m x k with k skinny. Rows and inner from
// {1, 7, 1000, 10243}, k from {1, 3, 16, 17, 64}; few rows over a long inner dimension take the split
// path, many rows over a short one do not. A column-major C puts the skinny side in m.
const Shape kTsm2Shapes[] = {{1, 1, 1},        {7, 3, 1},         {1, 16, 10243},   {7, 17, 10243},
                             {1000, 64, 7},    {1000, 16, 1000},  {10243, 3, 7},    {10243, 1, 1000},
                             {1000, 17, 10243}, {1000, 64, 10243}, {10243, 64, 17},  {10243, 16, 1000}};
constexpr Layout R = Layout::row_major, C = Layout::col_major;
// Each operand in each layout, packed and padded.
const Layouts kLayouts[] = {{R, R, R, 0}, {R, R, R, 3}, {C, R, R, 0}, {R, C, C, 3},
                            {C, C, R, 3}, {C, C, C, 0}, {R, C, R, 0}, {C, R, C, 3}};
const Scalars kScalars[] = {{1.0, 0.0}, {-1.5, 0.5}};

char letter(Layout l) { return l == Layout::row_major ? 'r' : 'c'; }

std::string case_name(const Case& c) {
  std::ostringstream s;
  s << to_string(c.algo) << "_" << to_string(c.type) << "_m" << c.shape.m << "n" << c.shape.n << "k" << c.shape.k
    << "_A" << letter(c.layouts.a) << "B" << letter(c.layouts.b) << "C" << letter(c.layouts.c) << "_pad"
    << c.layouts.pad << (c.scalars.beta == 0 ? "_beta0" : "_beta");
  return s.str();
}

HostMatrix shape_of(std::int64_t rows, std::int64_t cols, Layout l, std::int64_t pad) {
  return {rows, cols, (l == Layout::row_major ? cols : rows) + pad, l};
}

template <class T>
MatrixView<T> view_of(T* data, const HostMatrix& s) {
  return {data, s.rows, s.cols, s.ld, s.layout};
}

// Which element types an algorithm supports, asked from the registry itself (no second list here).
bool supports(Algo algo, DType type) {
  static float f[4];
  static double d[4];
  static __half h[4];
  switch (type) {
    case DType::f32:
      return bool(can_implement(algo, Arguments<float>{row_major<const float>(f, 2, 2), row_major<const float>(f, 2, 2),
                                                       row_major(f, 2, 2)}));
    case DType::f64:
      return bool(can_implement(algo, Arguments<double>{row_major<const double>(d, 2, 2),
                                                        row_major<const double>(d, 2, 2), row_major(d, 2, 2)}));
    case DType::f16:
      return bool(can_implement(algo, Arguments<__half, float>{row_major<const __half>(h, 2, 2),
                                                               row_major<const __half>(h, 2, 2), row_major(f, 2, 2)}));
  }
  return false;
}

bool is_tsm2(Algo a) {
  return a == Algo::tsm2_v0 || a == Algo::tsm2_v1 || a == Algo::tsm2_v2 || a == Algo::tsm2_v3 || a == Algo::tsm2;
}

// The algorithm varies fastest, so consecutive cases share inputs and one cached reference.
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const bool tsm2_shapes : {false, true})
    for (const auto& shape : tsm2_shapes ? std::vector<Shape>(std::begin(kTsm2Shapes), std::end(kTsm2Shapes))
                                         : std::vector<Shape>(std::begin(kShapes), std::end(kShapes)))
      for (const auto& layouts : kLayouts)
        for (const auto& scalars : kScalars)
          for (DType type : {DType::f32, DType::f64, DType::f16})
            for (const auto& info : algorithms())
              if (is_tsm2(info.algo) == tsm2_shapes && supports(info.algo, type))
                cases.push_back({info.algo, type, shape, layouts, scalars});
  return cases;
}

double unit_roundoff(DType t) {
  // f16 inputs are exact in the reference; what remains is float accumulation on the tensor cores,
  // which aligns addends with truncation: allow a few bits more than round-to-nearest float.
  return t == DType::f64 ? 0x1p-53 : t == DType::f32 ? 0x1p-24 : 0x1p-21;
}

constexpr double kPaddingSentinel = 4242.0;

template <class TIn, class TOut>
void run_case(const Case& c) {
  const auto [m, n, k] = c.shape;
  const HostMatrix as = shape_of(m, k, c.layouts.a, c.layouts.pad);
  const HostMatrix bs = shape_of(k, n, c.layouts.b, c.layouts.pad);
  const HostMatrix cs = shape_of(m, n, c.layouts.c, c.layouts.pad);
  const std::uint32_t seed = std::uint32_t(m * 7919 + n * 104729 + k * 31 + c.layouts.pad);
  const auto a = testing::random_nonzero<TIn>(as.span(), seed);
  const auto b = testing::random_nonzero<TIn>(bs.span(), seed + 1);
  // C: the padding holds a sentinel; used elements hold NaN (poison) when beta == 0, data otherwise.
  std::vector<TOut> c0(cs.span(), TOut(kPaddingSentinel));
  const auto c_data = testing::random_nonzero<TOut>(cs.span(), seed + 2);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      c0[cs.offset(i, j)] = c.scalars.beta == 0 ? std::numeric_limits<TOut>::quiet_NaN() : c_data[cs.offset(i, j)];

  // The reference depends on everything but the algorithm: keep the last one.
  static std::string cached_key;
  static std::vector<double> reference;
  Case key_case = c;
  key_case.algo = Algo::cublas;
  const std::string key = case_name(key_case);
  if (key != cached_key) {
    std::vector<TOut> c_expected = c0;
    reference = reference_gemm(as, a, bs, b, cs, c_expected, c.scalars.alpha, c.scalars.beta);
    cached_key = key;
  }

  DeviceBuffer<TIn> da(a), db(b);
  DeviceBuffer<TOut> dc(c0);
  Context& ctx = testing::shared_context();
  const Arguments<TIn, TOut> args{view_of<const TIn>(da.data(), as), view_of<const TIn>(db.data(), bs),
                                  view_of(dc.data(), cs), TOut(c.scalars.alpha), TOut(c.scalars.beta)};
  const Support support = can_implement(c.algo, args);
  ASSERT_TRUE(support) << support.reason;
  gemm(ctx, args, c.algo);
  ctx.synchronize();
  const std::vector<TOut> got = dc.to_host();

  const ErrorReport r = compare(cs, got, reference);
  const double bound = error_bound(k, unit_roundoff(c.type));
  EXPECT_EQ(r.non_finite, 0) << "elements left NaN/Inf (unwritten?)";
  EXPECT_LE(r.relative_error, bound) << "worst element C(" << r.worst_row << "," << r.worst_col
                                     << ") = " << r.worst_value << ", reference " << r.worst_reference
                                     << " (|diff| " << r.worst_abs << ")";
  std::int64_t padding_changed = 0;
  for (std::size_t idx = 0; idx < got.size(); ++idx) {
    const std::int64_t lead = std::int64_t(idx) / cs.ld, inner = std::int64_t(idx) % cs.ld;
    const bool used = inner < (cs.layout == Layout::row_major ? n : m) && lead < (cs.layout == Layout::row_major ? m : n);
    if (!used && double(got[idx]) != kPaddingSentinel) ++padding_changed;
  }
  EXPECT_EQ(padding_changed, 0) << "writes outside C's m x n elements";
}

class GemmAgainstReference : public testing::GpuTestWithParam<Case> {};

TEST_P(GemmAgainstReference, MatchesWithinNormwiseBound) {
  const Case& c = GetParam();
  switch (c.type) {
    case DType::f32: run_case<float, float>(c); break;
    case DType::f64: run_case<double, double>(c); break;
    case DType::f16: run_case<__half, float>(c); break;
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, GemmAgainstReference, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return case_name(info.param); });

class GemmApi : public testing::GpuTest {};

TEST_F(GemmApi, AutomaticRunsAndRefusalsThrowWithTheReason) {
  const std::int64_t m = 33, n = 17, k = 65;
  const auto a = testing::random_nonzero<float>(m * k, 5), b = testing::random_nonzero<float>(k * n, 6);
  std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> c_ref = c;
  const auto ref = reference_gemm(HostMatrix{m, k, k, R}, a, HostMatrix{k, n, n, R}, b, HostMatrix{m, n, n, R}, c_ref,
                                  1.0, 0.0);
  DeviceBuffer<float> da(a), db(b), dc(c);
  Context& ctx = testing::shared_context();
  const Arguments<float> args{row_major<const float>(da.data(), m, k), row_major<const float>(db.data(), k, n),
                              row_major(dc.data(), m, n)};
  gemm(ctx, args);
  ctx.synchronize();
  EXPECT_LE(compare(HostMatrix{m, n, n, R}, dc.to_host(), ref).relative_error, error_bound(k, 0x1p-24));
  try {
    gemm(ctx, args, Algo::wmma);
    FAIL() << "wmma accepted float inputs";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("wmma"), std::string::npos) << e.what();
  }
}

/// allow_tf32 reaches cuBLAS, which then rounds float to TF32 (within that bound, beyond float's); the
/// ladder kernels and double ignore it (the same bits as without).
TEST_F(GemmApi, AllowTf32RoundsOnlyInCublasFloat) {
  const std::int64_t m = 256, n = 257, k = 1027;
  const auto a = testing::random_nonzero<float>(m * k, 7), b = testing::random_nonzero<float>(k * n, 8);
  std::vector<float> c_ref(m * n, 0.0f);
  const auto ref = reference_gemm(HostMatrix{m, k, k, R}, a, HostMatrix{k, n, n, R}, b, HostMatrix{m, n, n, R}, c_ref,
                                  1.0, 0.0);
  DeviceBuffer<float> da(a), db(b), dc(static_cast<std::size_t>(m * n));
  Context& ctx = testing::shared_context();
  const auto run = [&](Algo algo, bool tf32) {
    SKINNY_CUDA_TRY(cudaMemset(dc.data(), 0xff, dc.bytes()));  // NaN
    Arguments<float> args{row_major<const float>(da.data(), m, k), row_major<const float>(db.data(), k, n),
                          row_major(dc.data(), m, n)};
    args.allow_tf32 = tf32;
    gemm(ctx, args, algo);
    ctx.synchronize();
    return dc.to_host();
  };
  const std::vector<float> tf32 = run(Algo::cublas, true);
  const double error = compare(HostMatrix{m, n, n, R}, tf32, ref).relative_error;
  EXPECT_LE(error, error_bound(k, 0x1p-11));
  EXPECT_GT(error, error_bound(k, 0x1p-24)) << "cuBLAS kept float accuracy: TF32 was not used";
  EXPECT_LE(compare(HostMatrix{m, n, n, R}, run(Algo::cublas, false), ref).relative_error, error_bound(k, 0x1p-24));
  EXPECT_EQ(run(Algo::vectorized, false), run(Algo::vectorized, true));

  const auto ad = testing::random_nonzero<double>(m * k, 9), bd = testing::random_nonzero<double>(k * n, 10);
  DeviceBuffer<double> dad(ad), dbd(bd), dcd(static_cast<std::size_t>(m * n));
  const auto run_double = [&](bool tf32) {
    Arguments<double> args{row_major<const double>(dad.data(), m, k), row_major<const double>(dbd.data(), k, n),
                           row_major(dcd.data(), m, n)};
    args.allow_tf32 = tf32;
    gemm(ctx, args, Algo::cublas);
    ctx.synchronize();
    return dcd.to_host();
  };
  EXPECT_EQ(run_double(false), run_double(true));
}

TEST_F(GemmApi, AutomaticPicksTsm2ForTallSkinnyAndCublasOtherwise) {
  static float f[1];
  Context& ctx = testing::shared_context();
  const auto args = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
    return Arguments<float>{row_major<const float>(f, m, k), row_major<const float>(f, k, n), row_major(f, m, n)};
  };
  EXPECT_EQ(choose(ctx, args(262144, 16, 4096)), Algo::tsm2);  // K-means: points x centroids
  EXPECT_EQ(choose(ctx, args(4, 10240, 10240)), Algo::tsm2);   // skinny side in m
  EXPECT_EQ(choose(ctx, args(4096, 4096, 4096)), Algo::cublas);
  EXPECT_EQ(choose(ctx, args(4096, 512, 4096)), Algo::cublas);
  static double d[1];
  const auto dargs = [&](std::int64_t m, std::int64_t n, std::int64_t k, Layout a_layout) {
    return Arguments<double>{{d, m, k, a_layout == Layout::row_major ? k : m, a_layout},
                             row_major<const double>(d, k, n), row_major(d, m, n)};
  };
  EXPECT_EQ(choose(ctx, dargs(20480, 8, 20480, Layout::col_major)), Algo::tsm2);
  EXPECT_EQ(choose(ctx, dargs(10240, 16, 10240, Layout::col_major)), Algo::tsm2);
  EXPECT_EQ(choose(ctx, dargs(10240, 17, 10240, Layout::col_major)), Algo::cublas);
  EXPECT_EQ(choose(ctx, dargs(262144, 16, 4096, Layout::row_major)), Algo::cublas);  // a tie: cuBLAS keeps it
  const Arguments<__half, float> half{row_major<const __half>(nullptr, 1, 1), row_major<const __half>(nullptr, 1, 1),
                                      row_major(f, 1, 1)};
  EXPECT_THROW(choose(ctx, half), std::invalid_argument);  // null data: validated before choosing
}

}  // namespace
}  // namespace skinny::gemm
