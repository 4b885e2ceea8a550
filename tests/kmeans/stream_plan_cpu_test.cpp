// The streamed fit's planning (no GPU): a device-memory budget becomes rows per chunk, the per-point
// arrays stay on the device when they fit, the GEMM path keeps fit's row chunks, and a budget too small
// for one chunk is refused with the numbers; the initialisation's sample rows.
#include "../../kmeans/src/detail.hpp"
#include "../../kmeans/src/stream_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

namespace skinny::kmeans::detail {
namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;
constexpr std::size_t kGiB = std::size_t(1) << 30;

StreamProblem problem(std::int64_t n, std::int64_t d, std::int64_t k, bool fused = false,
                      Init init = Init::kmeans_plus_plus, bool weighted = false) {
  StreamProblem p;
  p.n = n;
  p.d = d;
  p.k = k;
  p.elem_bytes = 4;
  p.fused = fused;
  p.init = init;
  p.weighted = weighted;
  return p;
}

std::string refusal(const StreamProblem& p, std::size_t budget, std::int64_t rows = 0) {
  try {
    plan_stream(p, budget, rows);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(StreamPlan, WholeProblemInOneChunkWhenItFits) {
  const StreamPlan plan = plan_stream(problem(20000, 16, 5), 8 * kGiB);
  EXPECT_EQ(plan.chunk_rows, 20000);
  EXPECT_EQ(plan.chunks, 1);
  EXPECT_TRUE(plan.per_point_on_device);
  EXPECT_EQ(plan.init_sample_rows, 20000);  // k-means++ on all of X: fit's initialisation
  EXPECT_LE(plan.planned_bytes, plan.budget);
  EXPECT_GE(plan.fixed_bytes, kLibraryScratchBytes);
}

TEST(StreamPlan, ChunksOfAtMostTheTargetSizeHoweverLargeTheBudget) {
  // 2^28 x 32 float (32 GiB), the target, through 8 GiB.
  const StreamProblem p = problem(std::int64_t(1) << 28, 32, 16, /*fused=*/false, Init::random);
  const StreamPlan plan = plan_stream(p, 8 * kGiB);
  EXPECT_LE(std::size_t(plan.chunk_rows) * 32 * 4, kTargetChunkBytes);
  EXPECT_EQ(plan.chunk_rows % chunk_rows(p.n, p.k, 4), 0) << "the GEMM path keeps fit's row chunks";
  EXPECT_EQ(plan.chunks, (p.n + plan.chunk_rows - 1) / plan.chunk_rows);
  EXPECT_TRUE(plan.per_point_on_device) << "4 GiB of per-point arrays fit in 8 GiB";
  EXPECT_EQ(plan.init_sample_rows, 0) << "random init needs no sample";
  EXPECT_LE(plan.planned_bytes, plan.budget);
}

TEST(StreamPlan, LargerBudgetsGiveLargerChunksUpToTheTarget) {
  const StreamProblem p = problem(4000000, 64, 256, /*fused=*/true, Init::random);
  std::int64_t previous = 0;
  for (const std::size_t budget : {80 * kMiB, 96 * kMiB, 128 * kMiB, 256 * kMiB, 2 * kGiB}) {
    const StreamPlan plan = plan_stream(p, budget);
    EXPECT_GE(plan.chunk_rows, previous) << budget;
    EXPECT_LE(plan.planned_bytes, budget) << budget;
    EXPECT_GT(plan.chunks, 1) << budget;
    previous = plan.chunk_rows;
  }
  EXPECT_EQ(previous, std::int64_t(kTargetChunkBytes / (64 * 4)));
}

TEST(StreamPlan, PerPointArraysGoPerChunkWhenTheyDoNotFit) {
  // 2^28 points: 4 GiB of per-point arrays cannot stay in a 1 GiB budget.
  const StreamProblem p = problem(std::int64_t(1) << 28, 32, 16, false, Init::random);
  const StreamPlan plan = plan_stream(p, kGiB);
  EXPECT_FALSE(plan.per_point_on_device);
  EXPECT_GT(plan.chunk_rows, 0);
  EXPECT_LE(plan.planned_bytes, plan.budget);
}

TEST(StreamPlan, GivenChunkRowsAreTakenAsTheyAre) {
  const StreamProblem p = problem(20000, 16, 5);
  const StreamPlan plan = plan_stream(p, 8 * kGiB, 4000);
  EXPECT_EQ(plan.chunk_rows, 4000);
  EXPECT_EQ(plan.chunks, 5);
  EXPECT_TRUE(plan.per_point_on_device);
  EXPECT_EQ(plan.init_sample_rows, 20000) << "the budget still holds all of X for k-means++";
  EXPECT_EQ(plan_stream(p, 8 * kGiB, 50000).chunk_rows, 20000) << "at most n";
}

TEST(StreamPlan, GivenChunkRowsThatDoNotFitAreRefused) {
  const StreamProblem p = problem(std::int64_t(1) << 26, 256, 8, false, Init::random);
  const std::string what = refusal(p, 256 * kMiB, std::int64_t(1) << 24);
  EXPECT_NE(what.find("chunk_rows = 16777216 needs at least"), std::string::npos) << what;
  EXPECT_NE(what.find("more than the budget of 256.0 MiB"), std::string::npos) << what;
  EXPECT_NE(refusal(p, 256 * kMiB, -1).find("chunk_rows = -1 must be >= 0"), std::string::npos);
}

TEST(StreamPlan, BudgetTooSmallForOneChunkIsRefusedWithTheNumbers) {
  const StreamProblem p = problem(100000, 32, 8);
  const std::string what = refusal(p, 10 * kMiB);
  EXPECT_NE(what.find("a device-memory budget of 10.0 MiB"), std::string::npos) << what;
  EXPECT_NE(what.find("cannot hold one chunk of X"), std::string::npos) << what;
  EXPECT_NE(what.find("takes at least"), std::string::npos) << what;
  EXPECT_NE(what.find("per row of a chunk"), std::string::npos) << what;
  // A little more than what stays whatever the rows is enough, with a sample of at least k rows.
  const std::size_t fixed = plan_stream(p, 8 * kGiB).fixed_bytes;
  const StreamPlan plan = plan_stream(p, fixed + 4 * kMiB);
  EXPECT_GE(plan.chunk_rows, 1);
  EXPECT_GE(plan.init_sample_rows, 8);
  EXPECT_LE(plan.planned_bytes, plan.budget);
}

TEST(StreamPlan, SampleShrinksToWhatTheBudgetHolds) {
  const StreamProblem p = problem(10000000, 32, 8);
  const StreamPlan plan = plan_stream(p, 200 * kMiB);
  EXPECT_GE(plan.init_sample_rows, kMinInitSampleRows);
  EXPECT_LT(plan.init_sample_rows, p.n);
  EXPECT_LE(plan.planned_bytes, plan.budget);
}

TEST(StreamPlan, WeightsAndChunkedArraysCostMorePerRow) {
  const StreamProblem plain = problem(std::int64_t(1) << 28, 32, 16, false, Init::random);
  StreamProblem weighted = plain;
  weighted.weighted = true;
  EXPECT_GE(plan_stream(plain, kGiB).chunk_rows, plan_stream(weighted, kGiB).chunk_rows);
}

TEST(StratifiedRows, OneRowFromEachRangeInOrder) {
  const std::int64_t n = 1000003, s = 777;
  const std::vector<std::int64_t> rows = stratified_rows(n, s, 42);
  ASSERT_EQ(rows.size(), std::size_t(s));
  for (std::int64_t j = 0; j < s; ++j) {
    EXPECT_GE(rows[std::size_t(j)], j * n / s);
    EXPECT_LT(rows[std::size_t(j)], (j + 1) * n / s);
  }
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  EXPECT_EQ(std::set<std::int64_t>(rows.begin(), rows.end()).size(), rows.size());
  EXPECT_EQ(rows, stratified_rows(n, s, 42)) << "a pure function of the seed";
  EXPECT_NE(rows, stratified_rows(n, s, 43));
}

TEST(StratifiedRows, AllRowsWhenTheSampleIsAsLargeAsX) {
  const std::vector<std::int64_t> rows = stratified_rows(5, 9, 1);
  EXPECT_EQ(rows, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
}

TEST(FitDeviceBytes, CountsXAndGrowsWithTheProblem) {
  const std::size_t small = fit_device_bytes(1000, 32, 8, 4, Init::kmeans_plus_plus);
  EXPECT_GT(small, std::size_t(1000) * 32 * 4);
  EXPECT_GT(fit_device_bytes(2000, 32, 8, 4, Init::kmeans_plus_plus), small);
  EXPECT_GT(fit_device_bytes(1000, 32, 8, 8, Init::kmeans_plus_plus), small);
  EXPECT_GT(fit_device_bytes(1000, 32, 8, 4, Init::kmeans_parallel), small);
  EXPECT_GT(fit_device_bytes(std::int64_t(1) << 28, 32, 16, 4, Init::random), std::size_t(32) << 30);
}

TEST(FormatBytes, PicksTheUnit) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(10.0 * kMiB), "10.0 MiB");
  EXPECT_EQ(format_bytes(2.5 * kGiB), "2.50 GiB");
}

}  // namespace
}  // namespace skinny::kmeans::detail
