// gemm::nearest's choice of exact method (gemm/src/nearest_rules.hpp) at the edges of the shapes it was
// measured on: a change of a threshold shows here before a GPU run.
#include "../../gemm/src/nearest_rules.hpp"

#include <gtest/gtest.h>

namespace skinny::gemm::detail {
namespace {

NearestArguments shape(Element type, std::int64_t d, std::int64_t k) {
  NearestArguments a;
  a.x_type = type;
  a.d = d;
  a.k = k;
  a.math = Math::exact;
  return a;
}

TEST(NearestRules, FloatPointsTakeTheRecheckFromMoreDimensionsOnWgmma) {
  // mma.sync: from d = 16 with 64 clusters and k d >= 16384.
  EXPECT_TRUE(recheck_pays(shape(Element::f32, 16, 1024), false));
  EXPECT_FALSE(recheck_pays(shape(Element::f32, 15, 4096), false));
  EXPECT_FALSE(recheck_pays(shape(Element::f32, 512, 63), false)) << "fewer than 64 clusters";
  EXPECT_FALSE(recheck_pays(shape(Element::f32, 128, 127), false)) << "k d below 16384";
  // wgmma: three products up to d = 32 at k = 1024; the re-check from d = 48, or d = 32 with k d >= 65536.
  EXPECT_FALSE(recheck_pays(shape(Element::f32, 16, 1024), true));
  EXPECT_FALSE(recheck_pays(shape(Element::f32, 16, 8192), true));
  EXPECT_FALSE(recheck_pays(shape(Element::f32, 32, 1024), true));
  EXPECT_TRUE(recheck_pays(shape(Element::f32, 32, 2048), true)) << "k d = 65536 exactly";
  EXPECT_FALSE(recheck_pays(shape(Element::f32, 47, 1024), true));
  EXPECT_TRUE(recheck_pays(shape(Element::f32, 48, 1024), true));
  EXPECT_TRUE(recheck_pays(shape(Element::f32, 128, 128), true));
  EXPECT_FALSE(recheck_pays(shape(Element::f32, 4096, 32), true)) << "fewer than 64 clusters";
}

TEST(NearestRules, SixteenBitPointsTakeTheRecheckFromSixtyFourDimensions) {
  for (const bool wgmma : {false, true}) {
    EXPECT_TRUE(recheck_pays(shape(Element::f16, 64, 128), wgmma));
    EXPECT_FALSE(recheck_pays(shape(Element::f16, 63, 8192), wgmma));
    EXPECT_FALSE(recheck_pays(shape(Element::f16, 64, 127), wgmma)) << "k d below 8192";
    EXPECT_TRUE(recheck_pays(shape(Element::f16, 512, 16), wgmma)) << "any k";
    // bfloat16 also needs d >= 256 or k >= 1024.
    EXPECT_FALSE(recheck_pays(shape(Element::bf16, 128, 512), wgmma));
    EXPECT_TRUE(recheck_pays(shape(Element::bf16, 128, 1024), wgmma));
    EXPECT_TRUE(recheck_pays(shape(Element::bf16, 256, 32), wgmma));
    // ... unless its first pass reads a half copy: then as half.
    NearestArguments on_copy = shape(Element::bf16, 128, 512);
    on_copy.x_half = &on_copy;  // only its presence counts here
    EXPECT_TRUE(recheck_pays(on_copy, wgmma));
  }
}

TEST(NearestRules, CandidatesPayWhereTheirOverheadIsSmallNextToThreeProducts) {
  // A candidate-settled point costs one product against k + 2600 centres; three products cost 3 (16-bit),
  // 2 (TF32) or 4 (half copy) one-product passes.
  EXPECT_GE(candidate_weight(FirstPass::sixteen_bit, 1300), 1.0);
  EXPECT_LT(candidate_weight(FirstPass::sixteen_bit, 1301), 1.0);
  EXPECT_GE(candidate_weight(FirstPass::tf32, 2600), 1.0);
  EXPECT_LT(candidate_weight(FirstPass::tf32, 2601), 1.0);
  EXPECT_GE(candidate_weight(FirstPass::half_copy, 866), 1.0);
  EXPECT_LT(candidate_weight(FirstPass::half_copy, 867), 1.0);
  // The measured shapes: bfloat16 at k = 1024 (the candidates lost: 2.22 against 1.75 ms) stays on three
  // products; at k = 8192 a settled point weighs under half of one run with three.
  EXPECT_NEAR(candidate_weight(FirstPass::sixteen_bit, 1024), 3.54 / 3, 0.01);
  EXPECT_NEAR(candidate_weight(FirstPass::sixteen_bit, 8192), 0.44, 0.01);
}

/// centre_shares for the H100 (132 SMs), blocks of 128 points, tiles of 128 centres.
std::int64_t shares(std::int64_t m, std::int64_t k, std::int64_t row_bytes, std::int64_t centre_row_bytes) {
  return centre_shares(m, (k + 127) / 128, 132, 128, 128, row_bytes, centre_row_bytes);
}

TEST(NearestRules, FewPointsShareTheCentreTilesToFillTheGpu) {
  EXPECT_EQ(1, shares(1 << 20, 8192, 512, 512)) << "8192 point blocks fill the GPU";
  EXPECT_EQ(1, shares(1 << 20, 100, 0, 0)) << "one tile";
  EXPECT_EQ(22, shares(3079, 8192, 0, 0)) << "25 blocks: 528 / 25 rounded up to whole shares of 64 tiles";
  EXPECT_EQ(8, shares(1000, 1024, 0, 0)) << "at most one share per tile";
}

TEST(NearestRules, LongRowsShareTheTilesSoThatResidentPointsFitL2) {
  // The measured shapes: 4096 16-bit values a row (one product), 2048 at k = 1024.
  EXPECT_EQ(16, shares(1 << 19, 8192, 8192, 8192)) << "17 wanted, 16 whole shares of 4 tiles";
  EXPECT_EQ(8, shares(1 << 19, 1024, 8192, 8192));
  EXPECT_EQ(8, shares(1 << 20, 1024, 4096, 4096));
  EXPECT_EQ(1, shares(1 << 20, 8192, 4095, 4095)) << "rows under 4 KB";
  // Three-part exact centres (3 MB a tile): the shares' tiles would not fit.
  EXPECT_EQ(1, shares(1 << 19, 8192, 8192, 3 * 8192));
  EXPECT_EQ(1, shares(1 << 19, 1024, 8192, 3 * 8192));
  // The keys, 12 bytes a point a share, stay under 1 GiB.
  EXPECT_EQ(5, shares(std::int64_t(1) << 24, 8192, 8192, 8192));
}

}  // namespace
}  // namespace skinny::gemm::detail
