// fit_host (X in host memory, streamed through the GPU in chunks) against fit (X on the device) on the
// same data: bit-identical labels and centroids where stream.hpp promises them (the fused assignment,
// the GEMM path in fit's row chunks), labels and centroids within 1e-6 on the GEMM path in other chunks;
// per-point arrays on the device or per chunk, weights, empty clusters, restarts, page-locked input;
// and the refusals (NaN with its row, X on the device, a budget too small).
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/pinned_buffer.hpp>
#include <skinny/kmeans/kmeans.hpp>
#include <skinny/kmeans/stream.hpp>

#include "../../kmeans/src/detail.hpp"
#include "../../kmeans/src/stream_plan.hpp"
#include "support/gpu_fixture.hpp"
#include "support/relative_difference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace skinny::kmeans {
namespace {

using testing::relative_difference;
using testing::shared_context;

class StreamGpu : public testing::GpuTest {};

/// n x d blobs (k_blobs of them) generated on the device, with a copy in host memory.
template <class T>
struct Data {
  std::int64_t n, d;
  DeviceBuffer<T> device;
  std::vector<T> host;
};
template <class T>
Data<T> blobs(std::int64_t n, std::int64_t d, int k_blobs, std::uint64_t seed = 7) {
  Data<T> data{n, d, DeviceBuffer<T>(static_cast<std::size_t>(n * d)), {}};
  make_blobs<T>(shared_context(), data.device.data(), n, d, k_blobs, seed);
  data.host = data.device.to_host();
  return data;
}

/// The smallest budget (in steps of 16 KiB from the fixed part) whose plan has at most `chunks` chunks
/// of `rows` rows (0: the planner's choice), per-point arrays on the device or not as asked.
detail::StreamProblem problem_of(std::int64_t n, std::int64_t d, const Params& p, int elem_bytes, bool fused,
                                 bool weighted) {
  detail::StreamProblem pr;
  pr.n = n;
  pr.d = d;
  pr.k = p.k;
  pr.elem_bytes = elem_bytes;
  pr.weighted = weighted;
  pr.fused = fused;
  pr.init = resolve_init(p.init, p.k);
  pr.init_oversampling = p.init_oversampling;
  pr.init_rounds = p.init_rounds;
  return pr;
}
std::size_t budget_for(const detail::StreamProblem& pr, std::int64_t max_chunks, bool per_point_on_device,
                       std::int64_t rows = 0) {
  const std::size_t fixed = detail::plan_stream(pr, std::size_t(64) << 30).fixed_bytes;
  for (std::size_t b = fixed; b < fixed + (std::size_t(256) << 20); b += 16 << 10) {
    try {
      const StreamPlan plan = detail::plan_stream(pr, b, rows);
      if (plan.chunks <= max_chunks && plan.per_point_on_device == per_point_on_device) return b;
    } catch (const std::invalid_argument&) {
    }
  }
  ADD_FAILURE() << "no budget gives " << max_chunks << " chunks";
  return 0;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}


/// fit on the device and fit_host with `options`: the same labels, and the same centroids bit for bit
/// (`identical`) or within 1e-6 norm-wise. Returns the streamed result.
template <class T>
StreamResult<T> expect_same_as_fit(const Data<T>& x, const Params& p, const StreamOptions& options, bool identical,
                                   std::int64_t min_chunks, const std::vector<T>& initial = {},
                                   const std::vector<double>& weights = {}) {
  Context& ctx = shared_context();
  const Result<T> in_memory = fit<T>(ctx, x.device.data(), x.n, x.d, p, initial, weights);
  const StreamResult<T> streamed = fit_host<T>(ctx, x.host.data(), x.n, x.d, p, initial, weights, options);
  EXPECT_GE(streamed.stream.plan.chunks, min_chunks);
  EXPECT_EQ(streamed.labels, in_memory.labels);
  EXPECT_EQ(streamed.n_iter, in_memory.n_iter);
  EXPECT_EQ(streamed.converged, in_memory.converged);
  EXPECT_EQ(streamed.seed, in_memory.seed);
  if (identical) {
    EXPECT_TRUE(same_bits(streamed.centroids, in_memory.centroids))
        << "centroids differ by " << relative_difference(streamed.centroids, in_memory.centroids);
  } else {
    EXPECT_LE(relative_difference(streamed.centroids, in_memory.centroids), 1e-6);
  }
  // The inertia is fit's sum when the per-point arrays stay on the device, chunk sums added otherwise.
  if (streamed.stream.plan.per_point_on_device && identical)
    EXPECT_EQ(streamed.inertia, in_memory.inertia);
  else
    EXPECT_NEAR(streamed.inertia, in_memory.inertia, 1e-9 * in_memory.inertia);
  EXPECT_EQ(streamed.stream.copy_ms.size(), static_cast<std::size_t>(streamed.n_iter));
  EXPECT_EQ(streamed.stream.h2d_gbs.size(), static_cast<std::size_t>(streamed.n_iter));
  for (double g : streamed.stream.h2d_gbs) EXPECT_GT(g, 0);
  return streamed;
}

// ---- the fused assignment (float, automatic, k >= 128): the same bits under any chunking ---------------

TEST_F(StreamGpu, FusedAssignmentGivesFitsBitsThroughASmallBudget) {
  const Data<float> x = blobs<float>(20000, 16, 128);
  ASSERT_EQ(distance_method<float>(shared_context(), x.device.data(), x.n, x.d, 128, gemm::Algo::automatic), "nearest");
  Params p;
  p.k = 128;
  p.init = Init::random;
  p.seed = 11;
  StreamOptions s;
  s.max_gpu_memory = budget_for(problem_of(x.n, x.d, p, 4, true, false), 4, true);
  const StreamResult<float> r = expect_same_as_fit(x, p, s, /*identical=*/true, /*min_chunks=*/3);
  EXPECT_TRUE(r.stream.plan.per_point_on_device);
  EXPECT_EQ(r.stream.h2d_bytes_per_iteration, std::uint64_t(x.n * x.d * sizeof(float)));
  EXPECT_FALSE(r.stream.pinned_input);
}

TEST_F(StreamGpu, FusedAssignmentWithPerPointArraysPerChunk) {
  const Data<float> x = blobs<float>(20000, 16, 128);
  Params p;
  p.k = 128;
  p.init = Init::random;
  StreamOptions s;
  s.chunk_rows = 3000;
  s.max_gpu_memory = budget_for(problem_of(x.n, x.d, p, 4, true, false), 7, false, s.chunk_rows);
  const StreamResult<float> r = expect_same_as_fit(x, p, s, true, 7);
  EXPECT_FALSE(r.stream.plan.per_point_on_device);
  // X and, from the second iteration on, the previous labels.
  EXPECT_GE(r.stream.h2d_bytes_per_iteration, std::uint64_t(x.n * x.d * sizeof(float)));
}

TEST_F(StreamGpu, KMeansPlusPlusAndParallelOnAllRowsAreFits) {
  const Data<float> x = blobs<float>(12000, 32, 128);
  for (const Init init : {Init::kmeans_plus_plus, Init::kmeans_parallel}) {
    Params p;
    p.k = 128;
    p.init = init;
    p.seed = 5;
    StreamOptions s;
    s.chunk_rows = 2500;  // chunks, and a budget (the free memory) that holds all of X for the initialisation
    const StreamResult<float> r = expect_same_as_fit(x, p, s, true, 5);
    EXPECT_EQ(r.stream.plan.init_sample_rows, x.n) << to_string(init);
  }
}

TEST_F(StreamGpu, WeightsAndEmptyClustersMoveTheSamePoints) {
  const Data<float> x = blobs<float>(9000, 16, 128);
  Params p;
  p.k = 128;
  p.init = Init::given;
  // The first k points, three of them moved far away: their clusters are empty at the first update and
  // take the farthest points (the relocation reads those rows from host memory when streaming).
  std::vector<float> initial(x.host.begin(), x.host.begin() + 128 * 16);
  for (int c : {3, 50, 127})
    for (int j = 0; j < 16; ++j) initial[std::size_t(c * 16 + j)] = 1e4f + float(c);
  std::vector<double> weights(static_cast<std::size_t>(x.n));
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 0.5 + double(i % 7);
  for (const bool per_point : {true, false}) {
    StreamOptions s;
    s.chunk_rows = 2000;
    s.max_gpu_memory = budget_for(problem_of(x.n, x.d, p, 4, true, true), 5, per_point, s.chunk_rows);
    const StreamResult<float> r = expect_same_as_fit(x, p, s, true, 5, initial, weights);
    EXPECT_EQ(r.stream.plan.per_point_on_device, per_point);
  }
}

TEST_F(StreamGpu, RestartsKeepFitsBestRun) {
  const Data<float> x = blobs<float>(10000, 16, 128);
  Params p;
  p.k = 128;
  p.init = Init::random;
  p.n_init = 3;
  StreamOptions s;
  s.chunk_rows = 4000;
  expect_same_as_fit(x, p, s, true, 3);
}

TEST_F(StreamGpu, PageLockedInputIsCopiedAsItIs) {
  const Data<float> x = blobs<float>(20000, 16, 128);
  PinnedBuffer<float> pinned(x.host.size());
  std::memcpy(pinned.data(), x.host.data(), x.host.size() * sizeof(float));
  Params p;
  p.k = 128;
  p.init = Init::random;
  StreamOptions s;
  s.chunk_rows = 6000;
  Context& ctx = shared_context();
  const Result<float> in_memory = fit<float>(ctx, x.device.data(), x.n, x.d, p);
  const StreamResult<float> r = fit_host<float>(ctx, pinned.data(), x.n, x.d, p, {}, {}, s);
  EXPECT_TRUE(r.stream.pinned_input);
  EXPECT_EQ(r.labels, in_memory.labels);
  EXPECT_TRUE(same_bits(r.centroids, in_memory.centroids));
}

// ---- the GEMM path ----------------------------------------------------------------------------------

TEST_F(StreamGpu, GemmPathInFitsRowChunksGivesFitsBits) {
  // k = 16 runs the GEMM path (fused from 32 on) with fit's row chunks of 32 MiB / (16 x 4) = 524288
  // rows; chunks of exactly that many rows give the GEMMs fit's shapes. fit without its column copy.
  const std::int64_t rows = detail::chunk_rows(3 * 524288 + 1000, 16, sizeof(float));
  ASSERT_EQ(rows, 524288);
  const Data<float> x = blobs<float>(3 * rows + 1000, 8, 16);
  Params p;
  p.k = 16;
  p.init = Init::random;
  p.column_copy = false;
  ASSERT_NE(distance_method<float>(shared_context(), x.device.data(), x.n, x.d, 16, p.backend), "nearest");
  StreamOptions s;
  s.chunk_rows = rows;
  expect_same_as_fit(x, p, s, true, 4);
}

TEST_F(StreamGpu, GemmPathInOtherChunksGivesTheSameLabels) {
  // k = 5: fit's GEMM covers all 20000 rows at once, the chunks fewer: the GEMM may be planned
  // differently, so the centroids are compared within 1e-6 (blobs leave no point near a tie).
  const Data<float> x = blobs<float>(20000, 17, 5);
  Params p;
  p.k = 5;
  p.seed = 3;
  p.init = Init::random;
  StreamOptions s;
  s.max_gpu_memory = budget_for(problem_of(x.n, x.d, p, 4, false, false), 4, true);
  const StreamResult<float> r = expect_same_as_fit(x, p, s, /*identical=*/false, 3);
  const Result<float> in_memory = fit<float>(shared_context(), x.device.data(), x.n, x.d, p);
  std::printf("[ info ] GEMM path, k = 5, %lld chunks: centroids %s\n", static_cast<long long>(r.stream.plan.chunks),
              same_bits(r.centroids, in_memory.centroids) ? "bit-identical to fit's" : "within 1e-6 of fit's");
}

TEST_F(StreamGpu, DoubleGemmPath) {
  const Data<double> x = blobs<double>(15000, 12, 6);
  Params p;
  p.k = 6;
  p.init = Init::kmeans_plus_plus;
  StreamOptions s;
  s.chunk_rows = 4000;
  expect_same_as_fit(x, p, s, false, 4);
}

// ---- refusals ------------------------------------------------------------------------------------------

TEST_F(StreamGpu, NonFiniteValueIsReportedWithItsRow) {
  Data<float> x = blobs<float>(20000, 16, 8);
  x.host[std::size_t(12345 * 16 + 3)] = std::numeric_limits<float>::quiet_NaN();
  Params p;
  p.k = 8;
  StreamOptions s;
  s.chunk_rows = 5000;
  try {
    fit_host<float>(shared_context(), x.host.data(), x.n, x.d, p, {}, {}, s);
    FAIL() << "no NonFiniteInput";
  } catch (const NonFiniteInput& e) {
    EXPECT_EQ(e.row(), 12345);
    EXPECT_EQ(e.column(), 3);
    EXPECT_EQ(e.chunk_row0(), 10000);
    EXPECT_EQ(e.chunk_rows(), 5000);
    EXPECT_NE(std::string(e.what()).find("non-finite value (nan) at row 12345, column 3"), std::string::npos) << e.what();
  }
}

TEST_F(StreamGpu, RefusesDeviceMemoryAndABudgetTooSmall) {
  const Data<float> x = blobs<float>(5000, 16, 8);
  Params p;
  p.k = 8;
  try {
    fit_host<float>(shared_context(), x.device.data(), x.n, x.d, p);
    FAIL() << "X in device memory was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("device memory: use fit"), std::string::npos) << e.what();
  }
  StreamOptions s;
  s.max_gpu_memory = std::size_t(1) << 20;
  try {
    fit_host<float>(shared_context(), x.host.data(), x.n, x.d, p, {}, {}, s);
    FAIL() << "a 1 MiB budget was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("budget of 1.0 MiB"), std::string::npos) << e.what();
  }
  p.k = 0;
  EXPECT_THROW(fit_host<float>(shared_context(), x.host.data(), x.n, x.d, p), std::invalid_argument);
}

}  // namespace
}  // namespace skinny::kmeans
