// Run under mpirun -n N (ctest: N = 2 on one host; with one GPU the ranks share it): each rank makes its
// shard of the same blobs, fit_distributed over MPI (host-staged MpiCommunicator, which allows ranks that
// share a GPU; and over NCCL too when every rank of the host has a GPU of its own), the labels gathered
// to rank 0, which runs fit over all the rows in one process and checks that labels and centroids are
// the same bits. Prints "SKIPPED: ..." (ctest's skip pattern) when there is no CUDA device.
#include <skinny/gemm/cuda_stream.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/kmeans/distributed.hpp>
#include <skinny/kmeans/kmeans.hpp>
#include <skinny/kmeans/mpi_communicator.hpp>

#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

using namespace skinny;
using namespace skinny::kmeans;

struct Case {
  std::int64_t n, d;
  int k;
  Init init;
  const char* name;
};

/// One case over `comm`: 0 when the gathered labels and the centroids equal fit's on rank 0.
template <class T>
int check(Communicator& comm, MPI_Comm world, const Case& c) {
  const RowRange s = shard_rows(c.n, comm.size(), comm.rank());
  const CudaStream stream;
  Context ctx(stream);
  DeviceBuffer<T> x(static_cast<std::size_t>(s.count * c.d));
  make_blob_rows<T>(ctx, x.data(), s.begin, s.count, c.n, c.d, c.k, 9);
  Params p;
  p.k = c.k;
  p.init = c.init;
  p.seed = 4;
  p.max_iter = 25;
  const DistributedResult<T> r = fit_distributed<T>(ctx, comm, x.data(), s.count, c.n, s.begin, c.d, p);

  std::vector<int> counts(static_cast<std::size_t>(comm.size())), offsets(counts.size());
  const int mine = static_cast<int>(s.count);
  mpi_check(MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, world), "MPI_Gather");
  for (std::size_t i = 1; i < counts.size(); ++i) offsets[i] = offsets[i - 1] + counts[i - 1];
  std::vector<std::int32_t> labels(comm.rank() == 0 ? static_cast<std::size_t>(c.n) : 0);
  mpi_check(MPI_Gatherv(r.labels.data(), mine, MPI_INT32_T, labels.data(), counts.data(), offsets.data(), MPI_INT32_T, 0,
                        world),
            "MPI_Gatherv");
  int failed = 0;
  if (comm.rank() == 0) {
    DeviceBuffer<T> all(static_cast<std::size_t>(c.n * c.d));
    make_blobs<T>(ctx, all.data(), c.n, c.d, c.k, 9);
    const Result<T> single = fit<T>(ctx, all.data(), c.n, c.d, p);
    const bool same_centroids =
        std::memcmp(single.centroids.data(), r.centroids.data(), r.centroids.size() * sizeof(T)) == 0;
    std::int64_t differ = 0;
    for (std::size_t i = 0; i < labels.size(); ++i) differ += labels[i] != single.labels[i];
    failed = !same_centroids || differ != 0 || single.n_iter != r.n_iter;
    std::printf("%s %s over %d ranks (%s, distances %s): %lld labels differ from one process, centroids %s, "
                "iterations %d / %d\n",
                failed ? "FAILED" : "ok", c.name, comm.size(), comm.name().c_str(), r.distances.c_str(),
                static_cast<long long>(differ), same_centroids ? "identical" : "DIFFER", r.n_iter, single.n_iter);
  }
  mpi_check(MPI_Bcast(&failed, 1, MPI_INT, 0, world), "MPI_Bcast");
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1, failed = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int devices = cuda_device_count();
  if (devices == 0) {
    if (rank == 0) std::printf("SKIPPED: no CUDA device on this machine; the MPI test needs an NVIDIA GPU\n");
    MPI_Finalize();
    return 0;
  }
  try {
    // Ranks of one host take its GPUs in turn.
    MPI_Comm host;
    mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host), "MPI_Comm_split_type");
    int local = 0, local_size = 1;
    MPI_Comm_rank(host, &local);
    MPI_Comm_size(host, &local_size);
    SKINNY_CUDA_TRY(cudaSetDevice(local % devices));
    const Case cases[] = {{20011, 40, 6, Init::kmeans_plus_plus, "float blobs, k-means++ (GEMM path)"},
                          {9001, 64, 150, Init::kmeans_parallel, "float blobs, k-means|| (fused nearest)"}};
    MpiCommunicator mpi(MPI_COMM_WORLD);
    for (const Case& c : cases) failed |= check<float>(mpi, MPI_COMM_WORLD, c);
    failed |= check<double>(mpi, MPI_COMM_WORLD, {7000, 24, 5, Init::random, "double blobs, random"});
#if defined(SKINNY_WITH_NCCL)
    int own_gpu = local_size <= devices, all_own = 0;
    MPI_Allreduce(&own_gpu, &all_own, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all_own) {
      auto nccl = nccl_over_mpi(MPI_COMM_WORLD);
      for (const Case& c : cases) failed |= check<float>(*nccl, MPI_COMM_WORLD, c);
    } else if (rank == 0) {
      std::printf("NCCL part skipped: needs a GPU per rank, this host has %d GPU(s) for %d ranks\n", devices, local_size);
    }
#endif
    MPI_Comm_free(&host);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (rank == 0) std::printf("%s\n", failed ? "FAILED" : "PASSED: every rank count gave the one-process result");
  MPI_Finalize();
  return failed;
}
