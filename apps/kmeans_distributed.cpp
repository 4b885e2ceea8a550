// kmeans across GPUs (kmeans_distributed.hpp): the ranks of one process (threads) or of an MPI run, each
// on its own device with its own rows, fit_distributed between them; rank 0 reports.
#include "kmeans_distributed.hpp"

#include "common/app_main.hpp"
#include "common/json_writer.hpp"
#include "common/timing.hpp"

#include <skinny/gemm/cuda_stream.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/kmeans/communicator.hpp>
#include <skinny/kmeans/distributed.hpp>
#include <skinny/kmeans/thread_communicator.hpp>
#if defined(SKINNY_WITH_NCCL)
#include <skinny/kmeans/nccl_communicator.hpp>
#endif
#if defined(SKINNY_KMEANS_MPI)
#include <skinny/kmeans/mpi_communicator.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace skinny::apps {

bool built_with_mpi() {
#if defined(SKINNY_KMEANS_MPI)
  return true;
#else
  return false;
#endif
}

bool built_with_nccl() {
#if defined(SKINNY_WITH_NCCL)
  return true;
#else
  return false;
#endif
}

namespace {

/// Environment variables MPI launchers set for their processes (Open MPI, PMI / PMIx: MPICH's Hydra,
/// Slurm's srun --mpi, Intel MPI).
bool started_by_mpi_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

}  // namespace

MpiSession::MpiSession(int& argc, char**& argv) {
#if defined(SKINNY_KMEANS_MPI)
  if (!started_by_mpi_launcher()) return;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  active_ = true;
#else
  (void)argc;
  (void)argv;
#endif
}

MpiSession::~MpiSession() {
#if defined(SKINNY_KMEANS_MPI)
  if (active_) MPI_Finalize();
#endif
}

namespace {

/// One rank's fit: its device, its rows (made, copied from the process's data, or read from the file),
/// fit_distributed over comm.
template <class T>
kmeans::DistributedResult<T> fit_rank(const DistributedRun<T>& run, kmeans::Communicator& comm, int device) {
  SKINNY_CUDA_TRY(cudaSetDevice(device));
  const kmeans::RowRange s = kmeans::shard_rows(run.n, comm.size(), comm.rank());
  const CudaStream stream;
  Context ctx(stream);
  apply_environment_tuning(ctx);
  // The shard, its norms, labels and distances, the sums, and the gathered sample of k-means++ / k-means||.
  const double sample = run.params.init == kmeans::Init::given || run.params.init == kmeans::Init::random
                            ? 0.0
                            : double(kmeans::init_sample_rows(run.n, run.d, run.params.k, sizeof(T))) * double(run.d) *
                                  sizeof(T);
  const double bytes = double(s.count) * double(run.d) * sizeof(T) + double(s.count) * (3 * sizeof(T) + 6 * 4 + 8) +
                       double(run.params.k) * double(run.d) * (2 * sizeof(T) + 24) + sample + double(96 << 20);
  require_gpu_memory(bytes, "rank " + std::to_string(comm.rank()) + "'s " + std::to_string(s.count) + " x " +
                                std::to_string(run.d) + " rows",
                     "; use more GPUs or fewer points");
  DeviceBuffer<T> x(static_cast<std::size_t>(s.count) * static_cast<std::size_t>(run.d));
  if (run.synthetic) {
    kmeans::make_blob_rows<T>(ctx, x.data(), s.begin, s.count, run.n, run.d, run.params.k, run.data_seed);
  } else if (run.data) {
    SKINNY_CUDA_TRY(cudaMemcpyAsync(x.data(), run.data->values.data() + s.begin * run.d, x.bytes(), cudaMemcpyHostToDevice,
                                    stream));
  } else {
    const HostData<T> rows = read_matrix_rows<T>(run.input, run.read, s.begin, s.count);
    SKINNY_CUDA_TRY(cudaMemcpyAsync(x.data(), rows.values.data(), x.bytes(), cudaMemcpyHostToDevice, stream));
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));  // before `rows` goes
  }
  std::vector<double> w;
  if (!run.weights.empty()) w.assign(run.weights.begin() + s.begin, run.weights.begin() + s.begin + s.count);
  kmeans::Params p = run.params;
  if (comm.rank() != 0) p.progress = nullptr, p.init_progress = nullptr;  // rank 0 speaks for all
  auto r = kmeans::fit_distributed<T>(ctx, comm, x.data(), s.count, run.n, s.begin, run.d, p,
                                      comm.rank() == 0 ? run.initial : std::vector<T>{}, w);
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  return r;
}

/// Bytes the group of allreduces moves per rank per iteration (as each rank contributes them).
std::int64_t allreduce_bytes(std::int64_t k, std::int64_t d, bool weighted) {
  return k * d * 16 + (weighted ? k * 16 : 0) + k * 4 + 3 * 8 + 8;
}

template <class T>
void report(const DistributedRun<T>& run, const kmeans::DistributedResult<T>& r, const std::vector<std::int32_t>& labels,
            int gpus, const std::string& where) {
  const std::int64_t k = run.params.k;
  std::printf("kmeans on %s: %lld points x %lld dimensions, %s, k = %d over %d ranks (%s), distances through %s, %s\n",
              where.c_str(), static_cast<long long>(run.n), static_cast<long long>(run.d), run.precision.c_str(),
              run.params.k, r.ranks, r.communicator.c_str(), r.distances.c_str(), run.data_name.c_str());
  const double it_ms = median(r.timing.iteration_ms), comm_ms = median(r.allreduce_iteration_ms);
  std::printf("%.3f ms per iteration (median of %d; distances %.3f, argmin %.3f, update %.3f ms of which allreduce "
              "%.3f ms for %.2f MB per rank)\n",
              it_ms, r.n_iter, median(r.timing.distances_iteration_ms), median(r.timing.argmin_iteration_ms),
              median(r.timing.update_iteration_ms), comm_ms,
              double(allreduce_bytes(k, run.d, !run.weights.empty())) / 1e6);
  std::printf("%d iterations, %s; inertia %.9e\n", r.n_iter,
              r.converged ? "converged (--tol, or an iteration changed no label)" : "stopped at --iters", r.inertia);
  std::printf("set-up, not in the iteration times: init %.1f ms (%s), first assignment %.1f ms\n", r.timing.init_ms,
              run.init_description.c_str(), r.timing.setup_ms);
  double ari = NAN;
  if (run.synthetic) {
    std::vector<std::int32_t> truth(static_cast<std::size_t>(run.n));
    for (std::int64_t i = 0; i < run.n; ++i) truth[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % k);
    ari = kmeans::adjusted_rand_index(truth, labels);
    std::printf("adjusted Rand index against the true blobs: %.6f\n", ari);
  }
  if (!run.output_labels.empty()) write_matrix(run.output_labels, labels.data(), run.n, 1);
  if (!run.output_centroids.empty()) write_matrix(run.output_centroids, r.centroids.data(), k, run.d);
  if (run.json.empty()) return;
  JsonWriter json;
  json.begin_object().field("benchmark", "kmeans-distributed").field("precision", run.precision);
  write_environment(json);
  json.field("gpus", gpus).field("ranks", r.ranks).field("communicator", r.communicator).field("n", run.n)
      .field("d", run.d).field("k", k).field("backend", run.backend).field("distances", r.distances)
      .field("init", run.init_description).field("seed", run.params.seed).field("tol", run.params.tol)
      .field("max_iter", run.params.max_iter).field("data", run.data_name)
      .field("allreduce_bytes_per_iteration", allreduce_bytes(k, run.d, !run.weights.empty()));
  json.field("inertia_", r.inertia).field("n_iter_", r.n_iter).field("converged", r.converged)
      .field("median_iteration_ms", it_ms).field("median_allreduce_ms", comm_ms)
      .field("median_distances_ms", median(r.timing.distances_iteration_ms))
      .field("median_argmin_ms", median(r.timing.argmin_iteration_ms))
      .field("median_update_ms", median(r.timing.update_iteration_ms)).field("init_ms", r.timing.init_ms)
      .field("setup_ms", r.timing.setup_ms);
  if (run.synthetic) json.field("adjusted_rand_index", ari);
  json.key("iteration_ms").begin_array();
  for (double ms : r.timing.iteration_ms) json.value(ms);
  json.end_array();
  json.key("allreduce_ms").begin_array();
  for (double ms : r.allreduce_iteration_ms) json.value(ms);
  json.end_array();
  json.key("cluster_centers_").begin_array();
  for (std::int64_t c = 0; c < k; ++c) {
    json.begin_array();
    for (std::int64_t j = 0; j < run.d; ++j) json.value(double(r.centroids[std::size_t(c * run.d + j)]));
    json.end_array();
  }
  json.end_array();
  if (run.n <= 100000) {
    json.key("labels_").begin_array();
    for (auto l : labels) json.value(int(l));
    json.end_array();
  } else {
    json.field("labels_", "omitted for n > 100000: use --output-labels");
  }
  json.end_object();
  write_file_atomically(run.json, json.str());
}

/// One process: ranks as threads on devices first_device + rank % gpus.
template <class T>
int run_threads(const DistributedRun<T>& run) {
  const int devices = cuda_device_count();
  if (run.first_device + run.gpus > devices)
    throw std::invalid_argument("--gpus " + std::to_string(run.gpus) + " from --device " + std::to_string(run.first_device) +
                                " needs devices up to " + std::to_string(run.first_device + run.gpus - 1) + ", this machine has " +
                                std::to_string(devices) + " (0 .. " + std::to_string(devices - 1) + ")");
  const int ranks = run.ranks > 0 ? run.ranks : run.gpus;
  if (ranks > run.n)
    throw std::invalid_argument("--ranks " + std::to_string(ranks) + " is more than the " + std::to_string(run.n) + " points");
  std::string comm = run.comm;
  if (comm == "mpi") throw std::invalid_argument("--comm mpi needs an MPI run (mpirun -n N kmeans ...)");
  if (comm == "auto") comm = built_with_nccl() && ranks == run.gpus ? "nccl" : "threads";
  if (comm == "nccl" && !built_with_nccl())
    throw std::invalid_argument("--comm nccl: this kmeans was built without NCCL (SKINNY_WITH_NCCL=OFF)");
  if (comm == "nccl" && ranks != run.gpus)
    throw std::invalid_argument("--comm nccl takes one rank per GPU (NCCL refuses two ranks on one device): --ranks " +
                                std::to_string(ranks) + " on --gpus " + std::to_string(run.gpus) + " needs --comm threads");
  std::vector<int> device_of(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) device_of[static_cast<std::size_t>(r)] = run.first_device + r % run.gpus;

  std::vector<kmeans::DistributedResult<T>> results(static_cast<std::size_t>(ranks));
  std::vector<std::unique_ptr<kmeans::Communicator>> comms;
  std::function<void()> abort_all;
  kmeans::ThreadGroup group(ranks);
#if defined(SKINNY_WITH_NCCL)
  std::vector<std::unique_ptr<kmeans::NcclCommunicator>> nccl;
  if (comm == "nccl") {
    nccl = kmeans::NcclCommunicator::for_devices(device_of);
    abort_all = [&] {
      for (auto& c : nccl) c->abort();
    };
  }
#endif
  if (comm == "threads") {
    for (int r = 0; r < ranks; ++r) comms.push_back(std::make_unique<kmeans::ThreadCommunicator>(group, r));
    abort_all = [&] { group.abort(); };
  }
  kmeans::run_ranks(
      ranks,
      [&](int r) {
        kmeans::Communicator* c = nullptr;
#if defined(SKINNY_WITH_NCCL)
        if (comm == "nccl") c = nccl[static_cast<std::size_t>(r)].get();
#endif
        if (!c) c = comms[static_cast<std::size_t>(r)].get();
        results[static_cast<std::size_t>(r)] = fit_rank(run, *c, device_of[static_cast<std::size_t>(r)]);
      },
      abort_all);
  std::vector<std::int32_t> labels;
  for (const auto& r : results) labels.insert(labels.end(), r.labels.begin(), r.labels.end());
  SKINNY_CUDA_TRY(cudaSetDevice(run.first_device));
  report(run, results[0], labels, run.gpus,
         std::to_string(run.gpus) + " x " + device_name() + (ranks != run.gpus ? " (ranks share GPUs)" : ""));
  return 0;
}

#if defined(SKINNY_KMEANS_MPI)
/// One rank of an MPI run: the host's ranks take its GPUs in turn from --device.
template <class T>
int run_mpi(const DistributedRun<T>& run) {
  using kmeans::mpi_check;
  const MpiSession& mpi = *run.mpi;
  if (run.gpus != 1 || run.ranks > 1)
    throw std::invalid_argument("--gpus and --ranks are for one process; under mpirun each process is one rank on one GPU");
  if (run.comm == "threads") throw std::invalid_argument("--comm threads is for one process; under mpirun: auto, nccl or mpi");
  if (mpi.size() > run.n)
    throw std::invalid_argument(std::to_string(mpi.size()) + " MPI ranks are more than the " + std::to_string(run.n) + " points");
  MPI_Comm host;
  mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mpi.rank(), MPI_INFO_NULL, &host), "MPI_Comm_split_type");
  int local = 0, local_size = 1;
  MPI_Comm_rank(host, &local);
  MPI_Comm_size(host, &local_size);
  MPI_Comm_free(&host);
  const int devices = cuda_device_count();
  const int device = (run.first_device + local) % devices;
  int own = local_size <= devices - run.first_device, all_own = 0;
  mpi_check(MPI_Allreduce(&own, &all_own, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  std::string comm = run.comm;
  if (comm == "auto") comm = built_with_nccl() && all_own ? "nccl" : "mpi";
  if (comm == "nccl" && (!built_with_nccl() || !all_own))
    throw std::invalid_argument(!built_with_nccl() ? "--comm nccl: this kmeans was built without NCCL"
                                                   : "--comm nccl needs a GPU per rank; a host has " + std::to_string(local_size) +
                                                         " ranks for " + std::to_string(devices) + " GPU(s): use --comm mpi");
  SKINNY_CUDA_TRY(cudaSetDevice(device));
  kmeans::MpiCommunicator host_staged(MPI_COMM_WORLD);
  std::unique_ptr<kmeans::Communicator> nccl;
#if defined(SKINNY_WITH_NCCL)
  if (comm == "nccl") nccl = kmeans::nccl_over_mpi(MPI_COMM_WORLD);
#endif
  kmeans::Communicator& c = nccl ? *nccl : static_cast<kmeans::Communicator&>(host_staged);
  const kmeans::DistributedResult<T> r = fit_rank(run, c, device);

  // Labels to rank 0 (counts fit in int: n < 2^31).
  std::vector<int> counts(static_cast<std::size_t>(mpi.size())), offsets(counts.size());
  const int mine = static_cast<int>(r.labels.size());
  mpi_check(MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
  for (std::size_t i = 1; i < counts.size(); ++i) offsets[i] = offsets[i - 1] + counts[i - 1];
  std::vector<std::int32_t> labels(mpi.rank() == 0 ? static_cast<std::size_t>(run.n) : 0);
  mpi_check(MPI_Gatherv(r.labels.data(), mine, MPI_INT32_T, labels.data(), counts.data(), offsets.data(), MPI_INT32_T, 0,
                        MPI_COMM_WORLD),
            "MPI_Gatherv");
  if (mpi.rank() == 0)
    report(run, r, labels, mpi.size(), std::to_string(mpi.size()) + " MPI ranks, rank 0 on " + device_name());
  return 0;
}
#endif

}  // namespace

template <class T>
int run_kmeans_distributed(const DistributedRun<T>& run) {
  if (run.mpi && run.mpi->active()) {
#if defined(SKINNY_KMEANS_MPI)
    try {
      return run_mpi(run);
    } catch (const std::exception& e) {
      // One rank failing alone would leave the others waiting in a collective: stop them all.
      std::fprintf(stderr, "kmeans: error (rank %d of %d): %s\n", run.mpi->rank(), run.mpi->size(), e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
#endif
  }
  return run_threads(run);
}

template int run_kmeans_distributed(const DistributedRun<float>&);
template int run_kmeans_distributed(const DistributedRun<double>&);

}  // namespace skinny::apps
