// TSM2-specific GPU checks beyond the registry-wide comparison with the reference (gemm_gpu_test.cpp):
// the test shapes really exercise both the split and the no-split path, and results are bit-identical
// run after run (the split reduction has a fixed order).
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/gemm.hpp>

#include "../../gemm/src/tsm2/tsm2_plan.hpp"
#include "support/gpu_fixture.hpp"
#include "support/random_matrix.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace skinny::gemm {
namespace {

detail::Problem row_major_problem(DType type, std::int64_t m, std::int64_t n, std::int64_t k) {
  detail::Problem p;
  p.in_type = p.out_type = type;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = p.b = p.c = reinterpret_cast<void*>(std::uintptr_t(256));  // planning never dereferences
  p.lda = k;
  p.ldb = n;
  p.ldc = n;
  return p;
}

class Tsm2 : public testing::GpuTest {};

/// True when environment variable `name` is set to `value` (the ctest runs with forced plans).
bool env_is(const char* name, const std::string& value) {
  const char* e = std::getenv(name);
  return e != nullptr && e == value;
}

TEST_F(Tsm2, TestShapesCoverTheSplitAndTheNoSplitPath) {
  Context& ctx = testing::shared_context();
  // The same shapes as gemm_gpu_test.cpp's kTsm2Shapes: a few rows over a long inner dimension must
  // split it, many rows over a short one must not.
  const detail::Tsm2Plan few_rows = detail::plan_tsm2(row_major_problem(DType::f32, 7, 17, 10243), ctx);
  const detail::Tsm2Plan many_rows = detail::plan_tsm2(row_major_problem(DType::f32, 10243, 3, 7), ctx);
  EXPECT_GT(few_rows.split, 1);
  EXPECT_EQ(many_rows.split, 1);
  const detail::Tsm2Plan kmeans = detail::plan_tsm2(row_major_problem(DType::f64, 262144, 16, 4096), ctx);
  EXPECT_GE(kmeans.split, 1);
}

/// A shape that splits gets a lean wave's split under Tsm2SplitRule::lean: one wave of at most 5 blocks
/// per SM (on the H100 the wave-filling plan of this shape has 720 blocks, 5.5 per SM).
void expect_lean_waves(Context& ctx) {
  detail::Problem p = row_major_problem(DType::f32, 10240, 4, 10240);
  p.a_layout = Layout::col_major;
  p.lda = p.m;
  const detail::Tsm2Plan plan = detail::plan_tsm2(p, ctx);
  EXPECT_GT(plan.split, 1) << plan.describe();
  EXPECT_LE(plan.grid_x * plan.split, 5 * ctx.properties().multiProcessorCount) << plan.describe();
}

/// Column-major A with 16-byte vectors runs DMMA at 512 threads per block, in float and in double.
void expect_dmma_at_512(Context& ctx) {
  for (DType type : {DType::f32, DType::f64}) {
    detail::Problem p = row_major_problem(type, 1000, 16, 1000);
    p.a_layout = Layout::col_major;
    p.lda = p.m;
    const detail::Tsm2Plan plan = detail::plan_tsm2(p, ctx);
    EXPECT_EQ(plan.t1, 512) << plan.describe();
    EXPECT_STREQ(plan.kernel, "dmma") << plan.describe();
  }
}

TEST_F(Tsm2, TuningOnTheContextSteersThePlan) {
  Tsm2Tuning lean;
  lean.split_rule = Tsm2SplitRule::lean;
  Context lean_ctx;
  lean_ctx.set_tsm2_tuning(lean);
  expect_lean_waves(lean_ctx);

  Tsm2Tuning dmma;
  dmma.col_major_kernel = Tsm2ColMajorKernel::dmma;
  dmma.t1 = 512;
  Context dmma_ctx;
  dmma_ctx.set_tsm2_tuning(dmma);
  expect_dmma_at_512(dmma_ctx);

  // Plans are cached per tuning: the default Context still plans this shape its own way.
  Context plain_ctx;
  detail::Problem p = row_major_problem(DType::f64, 1000, 16, 1000);
  p.a_layout = Layout::col_major;
  p.lda = p.m;
  EXPECT_NE(detail::plan_tsm2(p, plain_ctx).t1, 512);
}

// ctest runs the TSM2 cases again with SKINNY_TSM2_SPLIT_RULE=lean (gemm_gpu_tests_tsm2_lean_split) and
// with SKINNY_TSM2_CM_KERNEL=dmma SKINNY_TSM2_T1=512 (gemm_gpu_tests_tsm2_cm_dmma_t1_512): there the
// shared Context, tuned from the environment, must plan that way, so those runs cannot pass on another plan.
TEST_F(Tsm2, LeanSplitRunPlansLeanWaves) {
  if (!env_is("SKINNY_TSM2_SPLIT_RULE", "lean"))
    GTEST_SKIP() << "checks the runs with SKINNY_TSM2_SPLIT_RULE=lean";
  expect_lean_waves(testing::shared_context());
}

TEST_F(Tsm2, DmmaAt512RunPlansDmmaAt512) {
  if (!env_is("SKINNY_TSM2_CM_KERNEL", "dmma") || !env_is("SKINNY_TSM2_T1", "512"))
    GTEST_SKIP() << "checks the runs with SKINNY_TSM2_CM_KERNEL=dmma SKINNY_TSM2_T1=512";
  expect_dmma_at_512(testing::shared_context());
}

template <class T>
void expect_bit_identical(std::int64_t m, std::int64_t n, std::int64_t k, Layout a_layout = Layout::row_major) {
  const auto a = testing::random_nonzero<T>(std::size_t(m * k), 11), b = testing::random_nonzero<T>(std::size_t(k * n), 12);
  DeviceBuffer<T> da(a), db(b), dc(std::size_t(m * n));
  Context& ctx = testing::shared_context();
  const auto a_view = a_layout == Layout::row_major ? row_major<const T>(da.data(), m, k)
                                                    : col_major<const T>(da.data(), m, k);
  const Arguments<T> args{a_view, col_major<const T>(db.data(), k, n), row_major(dc.data(), m, n)};
  std::vector<T> first;
  for (int run = 0; run < 5; ++run) {
    gemm(ctx, args, Algo::tsm2);
    ctx.synchronize();
    const std::vector<T> got = dc.to_host();
    if (run == 0)
      first = got;
    else
      ASSERT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(T))) << "run " << run << " differs";
  }
}

TEST_F(Tsm2, RepeatedRunsAreBitIdenticalWithSplit) {
  expect_bit_identical<float>(1000, 16, 10243);
  expect_bit_identical<double>(7, 17, 10243);
  // A column-major: the column-major kernels' splits
  expect_bit_identical<float>(1000, 16, 10243, Layout::col_major);
  expect_bit_identical<double>(7, 17, 10243, Layout::col_major);
}

TEST_F(Tsm2, RepeatedRunsAreBitIdenticalWithoutSplit) {
  expect_bit_identical<float>(10243, 16, 1000);
  expect_bit_identical<double>(10243, 3, 7);
}

}  // namespace
}  // namespace skinny::gemm
