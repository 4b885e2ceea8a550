// The public API's checks, which run on the host before any GPU work: validation errors name the
// offending values, can_implement explains refusals, and the registry is one consistent table.
#include <skinny/gemm/gemm.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace skinny::gemm {
namespace {

// Host addresses stand in for device pointers: validation never dereferences them.
float fa[64], fb[64], fc[64];
double da[64], db[64], dc[64];
__half ha[64], hb[64];

Arguments<float> float_args(std::int64_t m, std::int64_t n, std::int64_t k) {
  return {row_major<const float>(fa, m, k), row_major<const float>(fb, k, n), row_major(fc, m, n)};
}

std::string error_of(const Arguments<float>& args) {
  try {
    can_implement(Algo::cublas, args);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Validation, ShapeMismatchNamesTheShapes) {
  auto args = float_args(2, 3, 4);
  args.b = row_major<const float>(fb, 5, 3);  // B should have 4 rows
  const std::string msg = error_of(args);
  EXPECT_NE(msg.find("shape mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("A is 2x4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("B is 5x3"), std::string::npos) << msg;
}

TEST(Validation, NullPointerIsNamed) {
  auto args = float_args(2, 2, 2);
  args.c.data = nullptr;
  EXPECT_NE(error_of(args).find("C.data is null"), std::string::npos) << error_of(args);
}

TEST(Validation, SmallLeadingDimensionIsNamed) {
  auto args = float_args(4, 4, 4);
  args.a.ld = 3;  // row-major 4x4 needs ld >= 4
  const std::string msg = error_of(args);
  EXPECT_NE(msg.find("A.ld = 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ld >= 4"), std::string::npos) << msg;
  args.a = col_major<const float>(fa, 5, 4, 4);  // column-major 5x4 needs ld >= 5
  args.c = row_major(fc, 5, 4);
  EXPECT_NE(error_of(args).find("ld >= 5"), std::string::npos) << error_of(args);
}

TEST(Validation, ZeroAndNegativeSizesAreRejected) {
  EXPECT_NE(error_of(float_args(0, 2, 2)).find("must be >= 1"), std::string::npos);
  auto args = float_args(2, 2, 2);
  args.b.cols = -3;
  args.c.cols = -3;
  EXPECT_NE(error_of(args).find("-3"), std::string::npos) << error_of(args);
}

TEST(Validation, ValidArgumentsPassEveryLayout) {
  for (Layout la : {Layout::row_major, Layout::col_major})
    for (Layout lb : {Layout::row_major, Layout::col_major})
      for (Layout lc : {Layout::row_major, Layout::col_major}) {
        Arguments<float> args{{fa, 3, 5, la == Layout::row_major ? 5 : 3, la},
                              {fb, 5, 2, lb == Layout::row_major ? 2 : 5, lb},
                              {fc, 3, 2, lc == Layout::row_major ? 2 : 3, lc}};
        EXPECT_TRUE(can_implement(Algo::cublas, args)) << "layouts " << int(la) << int(lb) << int(lc);
      }
}

TEST(CanImplement, WmmaRefusesFloatAndDoubleWithAReason) {
  const Support f = can_implement(Algo::wmma, float_args(16, 16, 16));
  EXPECT_FALSE(f);
  EXPECT_NE(f.reason.find("wmma"), std::string::npos) << f.reason;
  EXPECT_NE(f.reason.find("f32"), std::string::npos) << f.reason;
  const Support d = can_implement(
      Algo::wmma, Arguments<double>{row_major<const double>(da, 4, 4), row_major<const double>(db, 4, 4), row_major(dc, 4, 4)});
  EXPECT_FALSE(d);
  EXPECT_NE(d.reason.find("f64"), std::string::npos) << d.reason;
}

TEST(CanImplement, LadderRefusesHalfInputsAndAcceptsBothPrecisions) {
  const Arguments<__half, float> half{row_major<const __half>(ha, 4, 4), row_major<const __half>(hb, 4, 4),
                                      row_major(fc, 4, 4)};
  EXPECT_TRUE(can_implement(Algo::wmma, half));
  EXPECT_TRUE(can_implement(Algo::cublas, half));
  for (const auto& info : algorithms()) {
    if (info.algo == Algo::cublas || info.algo == Algo::wmma) continue;
    const Support s = can_implement(info.algo, half);
    EXPECT_FALSE(s) << info.name;
    EXPECT_NE(s.reason.find(std::string(info.name)), std::string::npos) << s.reason;
    EXPECT_TRUE(can_implement(info.algo, float_args(7, 9, 11))) << info.name;
    EXPECT_TRUE(can_implement(info.algo, Arguments<double>{row_major<const double>(da, 3, 3),
                                                           row_major<const double>(db, 3, 3), row_major(dc, 3, 3)}))
        << info.name;
  }
}

TEST(CanImplement, GridLimitIsExplained) {
  // n = 2^22 columns: 131072 blocks of 32 along y for the naive kernel, over CUDA's 65535.
  Arguments<float> args{row_major<const float>(fa, 1, 1), row_major<const float>(fb, 1, 1 << 22, 1 << 22),
                        row_major(fc, 1, 1 << 22)};
  const Support s = can_implement(Algo::naive, args);
  EXPECT_FALSE(s);
  EXPECT_NE(s.reason.find("65535"), std::string::npos) << s.reason;
}

TEST(Registry, NamesAreUniqueAndRoundTrip) {
  std::set<std::string_view> names;
  for (const auto& info : algorithms()) {
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate " << info.name;
    EXPECT_EQ(algo_from_name(info.name), info.algo);
    EXPECT_EQ(to_string(info.algo), info.name);
    EXPECT_FALSE(info.summary.empty());
  }
  EXPECT_EQ(algo_from_name("auto"), Algo::automatic);
  EXPECT_EQ(algo_names().front(), "auto");
  EXPECT_EQ(algo_names().size(), algorithms().size() + 1);
}

TEST(Registry, UnknownNameListsTheValidOnes) {
  try {
    algo_from_name("tsm9");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'tsm9'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cublas"), std::string::npos) << msg;
    EXPECT_NE(msg.find("vectorized"), std::string::npos) << msg;
  }
}

TEST(Views, TransposeFlipsLayoutAndShape) {
  const auto v = row_major<const float>(fa, 3, 5, 8);
  const auto t = v.transposed();
  EXPECT_EQ(t.rows, 5);
  EXPECT_EQ(t.cols, 3);
  EXPECT_EQ(t.ld, 8);
  EXPECT_EQ(t.layout, Layout::col_major);
  EXPECT_EQ(t.data, v.data);
}

}  // namespace
}  // namespace skinny::gemm
