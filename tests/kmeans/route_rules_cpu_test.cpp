// The assignment's routes (kmeans/src/route_rules.hpp) at the edges of the shapes they were measured on:
// a change of a threshold shows here before a GPU run.
#include "../../kmeans/src/route_rules.hpp"

#include <gtest/gtest.h>

namespace skinny::kmeans::detail {
namespace {

using gemm::Math;

TEST(RouteRules, FloatTakesTheFusedKernelFromTheMeasuredClusterCounts) {
  // Rows under 8 floats: from 16 clusters, in either mode and on either tensor-core path.
  for (const bool wgmma : {false, true}) {
    EXPECT_EQ(16, fused_min_float_clusters(7, Math::exact, wgmma, false));
    EXPECT_EQ(16, fused_min_float_clusters(2, Math::fast, wgmma, true));
  }
  // On wgmma, where rows have 128 floats or more, unprotected: fast for any k (the update moves only
  // changed points), exact from 9 clusters up to 512 dimensions and from 16 above; else from 32.
  EXPECT_EQ(9, fused_min_float_clusters(128, Math::exact, true, false));
  EXPECT_EQ(9, fused_min_float_clusters(512, Math::exact, true, false));
  EXPECT_EQ(16, fused_min_float_clusters(513, Math::exact, true, false));
  EXPECT_EQ(16, fused_min_float_clusters(4096, Math::exact, true, false));
  EXPECT_EQ(1, fused_min_float_clusters(128, Math::fast, true, false));
  EXPECT_EQ(1, fused_min_float_clusters(4096, Math::fast, true, false));
  EXPECT_EQ(32, fused_min_float_clusters(127, Math::exact, true, false));
  EXPECT_EQ(32, fused_min_float_clusters(8, Math::fast, true, false));
  EXPECT_EQ(32, fused_min_float_clusters(4096, Math::exact, true, true)) << "protected fits keep 32";
  // On mma.sync: exact products from 128 clusters, one product from 32.
  EXPECT_EQ(128, fused_min_float_clusters(128, Math::exact, false, false));
  EXPECT_EQ(32, fused_min_float_clusters(128, Math::fast, false, false));
}

TEST(RouteRules, RowsOfUpToFourValuesTakeTheNarrowKernel) {
  for (std::int64_t d = 1; d <= 4; ++d) {
    EXPECT_TRUE(narrow_rows_pay(d, 8192, Math::exact)) << d;
    EXPECT_TRUE(narrow_rows_pay(d, 1024, Math::fast)) << d;
  }
  // Fast mode with more clusters: up to d = 3 (at d = 4 one half product per term beats the expanded form).
  EXPECT_TRUE(narrow_rows_pay(2, 8192, Math::fast));
  EXPECT_TRUE(narrow_rows_pay(3, 8192, Math::fast));
  EXPECT_FALSE(narrow_rows_pay(4, 1025, Math::fast));
  EXPECT_FALSE(narrow_rows_pay(4, 8192, Math::fast));
  EXPECT_FALSE(narrow_rows_pay(5, 2, Math::exact));
  EXPECT_FALSE(narrow_rows_pay(16, 16, Math::fast));
}

TEST(RouteRules, FastModeTakesTheExpandedFormFromThreeValues) {
  EXPECT_FALSE(narrow_expanded_pays(1));
  EXPECT_FALSE(narrow_expanded_pays(2)) << "the differences' exact labels at d <= 2";
  EXPECT_TRUE(narrow_expanded_pays(3));
  EXPECT_TRUE(narrow_expanded_pays(4));
}

TEST(RouteRules, FastFloatTakesTheTf32GemmOnlyForManyClustersOfManyDimensions) {
  EXPECT_TRUE(tf32_gemm_beats_fused(true, 512, 2048, Math::fast));
  EXPECT_TRUE(tf32_gemm_beats_fused(true, 1024, 1024, Math::fast));  // k d = 2^20 exactly
  EXPECT_FALSE(tf32_gemm_beats_fused(true, 512, 1024, Math::fast)) << "k d below 2^20";
  EXPECT_FALSE(tf32_gemm_beats_fused(true, 511, 8192, Math::fast));
  EXPECT_FALSE(tf32_gemm_beats_fused(true, 4096, 1023, Math::fast));
  EXPECT_FALSE(tf32_gemm_beats_fused(true, 4096, 8192, Math::exact)) << "exact labels never take TF32 alone";
  EXPECT_FALSE(tf32_gemm_beats_fused(false, 4096, 8192, Math::fast)) << "16-bit points";
}

TEST(RouteRules, OnePassPaysFromOneHundredTwentyEightDimensions) {
  for (const bool wgmma : {false, true}) {
    EXPECT_FALSE(one_pass_beats_two(false, 127, 2, wgmma));
    EXPECT_FALSE(one_pass_beats_two(true, 127, 2, wgmma));
    EXPECT_TRUE(one_pass_beats_two(false, 512, 2, wgmma));
    EXPECT_FALSE(one_pass_beats_two(false, 513, 2, wgmma)) << "float: up to 512 dimensions";
    EXPECT_TRUE(one_pass_beats_two(true, 4096, 8, wgmma)) << "16-bit: wherever the kernel applies";
  }
  // Float clusters: up to 8 on mma.sync, up to 2 on wgmma (the fused kernel and the moving update).
  EXPECT_TRUE(one_pass_beats_two(false, 128, 8, false));
  EXPECT_FALSE(one_pass_beats_two(false, 128, 9, false));
  EXPECT_TRUE(one_pass_beats_two(false, 128, 2, true));
  EXPECT_FALSE(one_pass_beats_two(false, 128, 3, true));
}

TEST(RouteRules, SixteenBitFewClustersReadXOnceWhereThatMeasuredFaster) {
  // Without wgmma: up to 8 clusters from 128 dimensions, in both modes.
  for (const Math math : {Math::exact, Math::fast}) {
    EXPECT_TRUE(few_clusters_16bit(4096, 8, math, false));
    EXPECT_TRUE(few_clusters_16bit(128, 1, math, false));
    EXPECT_FALSE(few_clusters_16bit(127, 8, math, false));
    EXPECT_FALSE(few_clusters_16bit(4096, 9, math, false));
  }
  // On wgmma, fast: the few-clusters kernels up to 2 clusters below 1024 dimensions.
  EXPECT_TRUE(few_clusters_16bit(128, 2, Math::fast, true));
  EXPECT_TRUE(few_clusters_16bit(1023, 1, Math::fast, true));
  EXPECT_FALSE(few_clusters_16bit(1024, 1, Math::fast, true));
  EXPECT_FALSE(few_clusters_16bit(128, 3, Math::fast, true));
  EXPECT_FALSE(few_clusters_16bit(512, 8, Math::fast, true));
  // On wgmma, exact: up to 2 clusters, and up to 4 from 256 dimensions.
  EXPECT_TRUE(few_clusters_16bit(128, 2, Math::exact, true));
  EXPECT_TRUE(few_clusters_16bit(4096, 2, Math::exact, true));
  EXPECT_FALSE(few_clusters_16bit(255, 3, Math::exact, true));
  EXPECT_TRUE(few_clusters_16bit(256, 4, Math::exact, true));
  EXPECT_TRUE(few_clusters_16bit(4096, 4, Math::exact, true));
  EXPECT_FALSE(few_clusters_16bit(4096, 5, Math::exact, true));
  EXPECT_FALSE(few_clusters_16bit(127, 2, Math::exact, true));
}

}  // namespace
}  // namespace skinny::kmeans::detail
