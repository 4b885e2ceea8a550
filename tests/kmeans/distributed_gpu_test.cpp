// fit_distributed on a GPU: over one rank it equals fit bit for bit (LocalCommunicator, and NCCL over one
// device); over 2, 3 and 4 ranks simulated on one GPU (ThreadCommunicator: the ranks are threads, each
// with its own stream and shard, and every collective goes through host memory) it equals the one-rank
// fit bit for bit, labels, centroids, inertia and iterations; NCCL over 2 and 4 GPUs the same, skipped
// on machines with fewer. The simulated ranks run exactly the code NCCL ranks run (the same
// Communicator calls in the same order); only the transport differs. This is the test that fails if a
// result depends on the number of ranks.
#include <skinny/gemm/cuda_stream.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/kmeans/distributed.hpp>
#include <skinny/kmeans/kmeans.hpp>
#include <skinny/kmeans/thread_communicator.hpp>
#if defined(SKINNY_WITH_NCCL)
#include <skinny/kmeans/nccl_communicator.hpp>
#endif

#include "support/gpu_fixture.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace skinny::kmeans {
namespace {

using testing::shared_context;

class DistributedGpu : public testing::GpuTest {};

/// A problem: data on the host and what fit gets.
template <class T>
struct Problem {
  std::int64_t n = 0, d = 0;
  std::vector<T> x;
  Params params;
  std::vector<T> initial;
  std::vector<double> weights;
  std::string name;
};

/// Blobs (well separated) or uniform noise (many near-ties: every point's label is tested for
/// independence from the split).
template <class T>
std::vector<T> make_data(std::int64_t n, std::int64_t d, int k, bool blobs, std::uint64_t seed) {
  if (blobs) {
    DeviceBuffer<T> x(static_cast<std::size_t>(n * d));
    make_blobs<T>(shared_context(), x.data(), n, d, k, seed);
    shared_context().synchronize();
    return x.to_host();
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> x(static_cast<std::size_t>(n * d));
  for (auto& v : x) v = static_cast<T>(u(rng));
  return x;
}

/// The problems every comparison runs: the fused nearest kernel (float, k >= 128), the GEMM path (float
/// and double), weights, an empty cluster that must take the farthest point, each initialisation, n_init.
template <class T>
std::vector<Problem<T>> problems() {
  std::vector<Problem<T>> out;
  const auto add = [&](std::string name, std::int64_t n, std::int64_t d, int k, bool blobs, Init init,
                       bool weighted = false, int n_init = 1, int max_iter = 30) {
    Problem<T> p;
    p.name = std::move(name);
    p.n = n;
    p.d = d;
    p.x = make_data<T>(n, d, k, blobs, 11);
    p.params.k = k;
    p.params.init = init;
    p.params.seed = 5;
    p.params.n_init = n_init;
    p.params.max_iter = max_iter;
    if (init == Init::given) p.initial.assign(p.x.begin(), p.x.begin() + k * d);
    if (weighted) {
      std::mt19937_64 rng(3);
      for (std::int64_t i = 0; i < n; ++i) p.weights.push_back(0.25 + double(rng() % 16) / 4.0);
    }
    out.push_back(std::move(p));
  };
  if constexpr (std::is_same_v<T, float>) {
    add("fused nearest, uniform noise, given", 6000, 64, 128, false, Init::given);
    add("fused nearest, k-means||, weighted", 5003, 32, 130, true, Init::kmeans_parallel, true);
  }
  add("gemm path, blobs, k-means++", 4099, 37, 5, true, Init::kmeans_plus_plus);
  add("gemm path, blobs, random, n_init 3", 3001, 16, 7, true, Init::random, false, 3);
  add("gemm path, uniform noise, weighted, given", 2500, 8, 6, false, Init::given, true);
  // Two given centroids far from every point: empty clusters after the first assignment.
  {
    add("empty clusters move to the farthest points", 3000, 12, 6, true, Init::given, true);
    Problem<T>& p = out.back();
    for (std::int64_t j = 0; j < p.d; ++j) {
      p.initial[static_cast<std::size_t>(4 * p.d + j)] = T(1000);
      p.initial[static_cast<std::size_t>(5 * p.d + j)] = T(-1000);
    }
  }
  return out;
}

/// fit_distributed over `ranks` ThreadCommunicator ranks, all on the current device, each with its own
/// stream, Context and copy of its shard; results by rank.
template <class T>
std::vector<DistributedResult<T>> fit_on_threads(const Problem<T>& p, int ranks) {
  int device = 0;
  SKINNY_CUDA_TRY(cudaGetDevice(&device));
  ThreadGroup group(ranks);
  std::vector<DistributedResult<T>> results(static_cast<std::size_t>(ranks));
  run_ranks(
      ranks,
      [&](int r) {
        SKINNY_CUDA_TRY(cudaSetDevice(device));
        const RowRange s = shard_rows(p.n, ranks, r);
        const std::vector<T> shard(p.x.begin() + s.begin * p.d, p.x.begin() + (s.begin + s.count) * p.d);
        const std::vector<double> w =
            p.weights.empty() ? std::vector<double>{}
                              : std::vector<double>(p.weights.begin() + s.begin, p.weights.begin() + s.begin + s.count);
        const CudaStream stream;
        Context ctx(stream);
        const DeviceBuffer<T> x(shard);
        ThreadCommunicator comm(group, r);
        results[static_cast<std::size_t>(r)] =
            fit_distributed<T>(ctx, comm, x.data(), s.count, p.n, s.begin, p.d, p.params, r == 0 ? p.initial : std::vector<T>{}, w);
      },
      [&] { group.abort(); });
  return results;
}

/// The ranks' labels in row order.
template <class T>
std::vector<std::int32_t> all_labels(const std::vector<DistributedResult<T>>& rs) {
  std::vector<std::int32_t> out;
  for (const auto& r : rs) out.insert(out.end(), r.labels.begin(), r.labels.end());
  return out;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// Everything fit_distributed returns that must not depend on the ranks.
template <class T>
void expect_identical(const DistributedResult<T>& a, const std::vector<std::int32_t>& a_labels, const DistributedResult<T>& b,
                      const std::vector<std::int32_t>& b_labels, const std::string& what) {
  EXPECT_TRUE(same_bits(a.centroids, b.centroids)) << what << ": centroids differ";
  EXPECT_EQ(a_labels, b_labels) << what << ": labels differ";
  EXPECT_EQ(std::memcmp(&a.inertia, &b.inertia, sizeof(double)), 0) << what << ": inertia " << a.inertia << " vs " << b.inertia;
  EXPECT_EQ(a.n_iter, b.n_iter) << what;
  EXPECT_EQ(a.converged, b.converged) << what;
  EXPECT_EQ(a.seed, b.seed) << what;
}

template <class T>
void one_rank_equals_fit() {
  Context& ctx = shared_context();
  for (const Problem<T>& p : problems<T>()) {
    const DeviceBuffer<T> x(p.x);
    const Result<T> single = fit<T>(ctx, x.data(), p.n, p.d, p.params, p.initial, p.weights);
    LocalCommunicator local;
    const DistributedResult<T> r = fit_distributed<T>(ctx, local, x.data(), p.n, p.n, 0, p.d, p.params, p.initial, p.weights);
    EXPECT_TRUE(same_bits(r.centroids, single.centroids)) << p.name << ": centroids differ from fit's";
    EXPECT_EQ(r.labels, single.labels) << p.name;
    EXPECT_EQ(r.n_iter, single.n_iter) << p.name;
    EXPECT_EQ(r.converged, single.converged) << p.name;
    // fit adds the inertia in double, fit_distributed exactly in fixed point: the same to rounding.
    EXPECT_NEAR(r.inertia, single.inertia, 1e-12 * single.inertia) << p.name;
    EXPECT_EQ(r.communicator, "local");
  }
}

TEST_F(DistributedGpu, OneLocalRankEqualsFitFloat) { one_rank_equals_fit<float>(); }
TEST_F(DistributedGpu, OneLocalRankEqualsFitDouble) { one_rank_equals_fit<double>(); }

template <class T>
void simulated_ranks_equal_one_rank() {
  for (const Problem<T>& p : problems<T>()) {
    const auto one = fit_on_threads(p, 1);
    EXPECT_EQ(one[0].communicator, "threads");
    for (int ranks : {2, 3, 4}) {
      const auto many = fit_on_threads(p, ranks);
      const std::string what = p.name + ", " + std::to_string(ranks) + " ranks";
      for (int r = 0; r < ranks; ++r) {
        // Every rank holds the same centroids and scalars.
        EXPECT_TRUE(same_bits(many[static_cast<std::size_t>(r)].centroids, many[0].centroids)) << what << " rank " << r;
        EXPECT_EQ(many[static_cast<std::size_t>(r)].n_iter, many[0].n_iter) << what;
        EXPECT_EQ(many[static_cast<std::size_t>(r)].row_offset, shard_rows(p.n, ranks, r).begin);
      }
      expect_identical(one[0], all_labels(one), many[0], all_labels(many), what);
      EXPECT_EQ(many[0].distances, one[0].distances);
    }
  }
}

TEST_F(DistributedGpu, SimulatedRanksOnOneGpuEqualOneRankFloat) { simulated_ranks_equal_one_rank<float>(); }
TEST_F(DistributedGpu, SimulatedRanksOnOneGpuEqualOneRankDouble) { simulated_ranks_equal_one_rank<double>(); }

TEST_F(DistributedGpu, BlobRowsAreTheRowsOfMakeBlobs) {
  Context& ctx = shared_context();
  const std::int64_t n = 1001, d = 9;
  DeviceBuffer<float> all(static_cast<std::size_t>(n * d)), part(static_cast<std::size_t>(300 * d));
  const Blobs<float> b = make_blobs<float>(ctx, all.data(), n, d, 4, 17);
  const Blobs<float> p = make_blob_rows<float>(ctx, part.data(), 500, 300, n, d, 4, 17);
  ctx.synchronize();
  const std::vector<float> a = all.to_host(), q = part.to_host();
  EXPECT_TRUE(same_bits(std::vector<float>(a.begin() + 500 * d, a.begin() + 800 * d), q));
  EXPECT_TRUE(same_bits(b.centers, p.centers));
  EXPECT_EQ(std::vector<std::int32_t>(b.labels.begin() + 500, b.labels.begin() + 800), p.labels);
}

TEST_F(DistributedGpu, EveryRankThrowsWhenOneRefusesItsArguments) {
  Problem<float> p = problems<float>()[2];
  p.weights.assign(static_cast<std::size_t>(p.n), 1.0);
  p.weights[static_cast<std::size_t>(p.n - 1)] = -1;  // in the last rank's shard only
  try {
    fit_on_threads(p, 3);
    FAIL() << "a negative weight must be refused";
  } catch (const std::invalid_argument& e) {
    // The first failure in time: the refusing rank's own message or another rank's pointer to it.
    EXPECT_NE(std::string(e.what()).find("rank"), std::string::npos) << e.what();
  }
}

TEST_F(DistributedGpu, ShardsOutOfOrderAreRefusedOnEveryRank) {
  const Problem<float> p = problems<float>()[2];
  ThreadGroup group(2);
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int r) {
    const RowRange s = shard_rows(p.n, 2, 1 - r);  // rank 0 holds the second half
    const CudaStream stream;
    Context ctx(stream);
    const DeviceBuffer<float> x(std::vector<float>(p.x.begin() + s.begin * p.d, p.x.begin() + (s.begin + s.count) * p.d));
    ThreadCommunicator comm(group, r);
    try {
      fit_distributed<float>(ctx, comm, x.data(), s.count, p.n, s.begin, p.d, p.params, p.initial);
    } catch (const std::invalid_argument& e) {
      errors[static_cast<std::size_t>(r)] = e.what();
    }
  });
  for (const auto& e : errors) EXPECT_NE(e.find("shards must follow the ranks' order"), std::string::npos) << e;
}

#if defined(SKINNY_WITH_NCCL)
/// fit_distributed over NCCL on devices 0 .. ranks - 1 of this process (a thread per device).
template <class T>
std::vector<DistributedResult<T>> fit_on_nccl(const Problem<T>& p, int ranks) {
  std::vector<int> devices(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) devices[static_cast<std::size_t>(r)] = r;
  auto comms = NcclCommunicator::for_devices(devices);
  std::vector<DistributedResult<T>> results(static_cast<std::size_t>(ranks));
  run_ranks(
      ranks,
      [&](int r) {
        SKINNY_CUDA_TRY(cudaSetDevice(r));
        const RowRange s = shard_rows(p.n, ranks, r);
        const CudaStream stream;
        Context ctx(stream);
        const DeviceBuffer<T> x(std::vector<T>(p.x.begin() + s.begin * p.d, p.x.begin() + (s.begin + s.count) * p.d));
        const std::vector<double> w =
            p.weights.empty() ? std::vector<double>{}
                              : std::vector<double>(p.weights.begin() + s.begin, p.weights.begin() + s.begin + s.count);
        results[static_cast<std::size_t>(r)] = fit_distributed<T>(ctx, *comms[static_cast<std::size_t>(r)], x.data(), s.count,
                                                                  p.n, s.begin, p.d, p.params, p.initial, w);
      },
      [&] {
        for (auto& c : comms) c->abort();
      });
  SKINNY_CUDA_TRY(cudaSetDevice(0));
  return results;
}

TEST_F(DistributedGpu, NcclOverOneDeviceEqualsFit) {
  Context& ctx = shared_context();
  for (const Problem<float>& p : problems<float>()) {
    const DeviceBuffer<float> x(p.x);
    const Result<float> single = fit<float>(ctx, x.data(), p.n, p.d, p.params, p.initial, p.weights);
    const auto r = fit_on_nccl(p, 1);
    EXPECT_EQ(r[0].communicator, "nccl");
    EXPECT_TRUE(same_bits(r[0].centroids, single.centroids)) << p.name;
    EXPECT_EQ(r[0].labels, single.labels) << p.name;
    EXPECT_EQ(r[0].n_iter, single.n_iter) << p.name;
  }
}

class NcclGpus : public DistributedGpu, public ::testing::WithParamInterface<int> {};

TEST_P(NcclGpus, EqualOneRank) {
  const int ranks = GetParam();
  const int have = cuda_device_count();
  if (have < ranks)
    GTEST_SKIP() << "needs " << ranks << " GPUs, this machine has " << have;
  for (const Problem<float>& p : problems<float>()) {
    const auto one = fit_on_threads(p, 1);
    const auto many = fit_on_nccl(p, ranks);
    expect_identical(one[0], all_labels(one), many[0], all_labels(many), p.name + ", NCCL over " + std::to_string(ranks));
  }
}
INSTANTIATE_TEST_SUITE_P(Ranks, NcclGpus, ::testing::Values(2, 4, 8));
#endif

}  // namespace
}  // namespace skinny::kmeans
