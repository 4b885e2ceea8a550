// kmeans: Lloyd K-means on the GPU with a switchable GEMM backend, on a file or on synthetic blobs.
//   kmeans --n 262144 --k 16 --backend tsm2             the main job (d = 4096, float, 100 iterations)
//   kmeans --input points.npy --k 8 --output-labels labels.npy --json result.json
//   kmeans --n 65536 --k 16 --compare                   cuBLAS against every custom backend, end to end
//   kmeans --input new.npy --predict centroids.npy --output-labels labels.npy   labels for given centroids
//   kmeans --input big.npy --k 64 --max-gpu-memory 2G   X streamed from the mapped file through 2 GiB of GPU memory
//   kmeans --n 268435456 --d 32 --max-gpu-memory 8G     the streaming benchmark: 32 GiB of blobs in host memory
//   kmeans --gpus 8 --n 16777216 --d 1024 --k 1024     one process, 8 GPUs (NCCL), rows split among them
//   mpirun -n 16 kmeans --input points.npy --k 1024    a process per GPU, on one host or several
//   kmeans --n 262144 --k 16 --protect --campaign 2000  fault tolerance: 2000 fits with one injected fault each
#include "kmeans_distributed.hpp"
#include "kmeans_protect.hpp"

#include "common/app_main.hpp"
#include "common/device_data.hpp"
#include "common/h2d_ceiling.hpp"
#include "common/host_blobs.hpp"
#include "common/mapped_npy.hpp"
#include "common/matrix_io.hpp"
#include "common/sizes.hpp"
#include "common/timing.hpp"

#include <skinny/gemm/cuda_event.hpp>
#include <skinny/gemm/cuda_stream.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/gemm.hpp>
#include <skinny/gemm/pinned_buffer.hpp>
#include <skinny/kmeans/kmeans.hpp>
#include <skinny/kmeans/stream.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace skinny::apps {
namespace {

struct KmeansOptions {
  std::string input;              ///< data file (.npy, .csv, raw); empty: synthetic blobs
  std::int64_t n = 262144;        ///< synthetic points
  std::int64_t d = 4096;          ///< synthetic dimensions, or columns of a raw file
  int k = 16;
  std::string backend = "auto";
  std::string math = "exact";
  int iters = 100;
  double tol = 1e-4;
  bool tol_given = false;         ///< without it, synthetic data runs all --iters (tol 0)
  std::string init = "auto";
  std::string init_centroids;     ///< file of k x d initial centroids (implies --init given)
  std::string sample_weight;      ///< file of n weights (.npy 1-D or n x 1, .csv); empty: 1 each
  int n_init = 1;
  int init_rounds = kmeans::Params{}.init_rounds;
  double init_oversampling = kmeans::Params{}.init_oversampling;
  std::string predict;            ///< file of k x d centroids: label the points by them instead of fitting
  std::string output_labels, output_centroids;
  bool compare = false;
  bool no_column_copy = false;
  bool progress = false;
  std::string max_gpu_memory_text;  ///< --max-gpu-memory as given
  std::uint64_t max_gpu_memory = 0; ///< its bytes; 0: stream only data that does not fit the GPU
  std::int64_t chunk_rows = 0;      ///< rows per streamed chunk; 0: from the budget
  std::string host_memory = "pageable";  ///< where streamed synthetic data is generated
  int host_threads = 0;             ///< threads filling the pinned staging buffers; 0: the library's choice
  int gpus = 1;                   ///< GPUs of this process (several: the rows split among them)
  int ranks = 0;                  ///< ranks as threads on those GPUs (0: one per GPU)
  std::string comm = "auto";      ///< how the ranks add up their sums
  bool protect = false;           ///< checksums on the distances and the centroid sums
  std::string inject;             ///< distances or sums: one fault in one fit; empty: none
  int inject_iteration = 1;
  std::uint64_t inject_seed = 0;
  int campaign = 0;               ///< trials of the fault campaign; 0: none
  std::string campaign_targets = "both";
  const MpiSession* mpi = nullptr;  ///< set when started by mpirun: this process is one rank
  CommonOptions common;
  /// Whether this run splits the rows among ranks (several GPUs, simulated ranks, or an MPI run).
  bool distributed() const { return gpus > 1 || ranks > 1 || comm != "auto" || (mpi && mpi->active()); }
};

/// Files up to this size are checked for NaN and infinity while the arguments are parsed (before any
/// GPU work); a larger mapped .npy is checked while it streams, or before its copy to the GPU.
constexpr std::int64_t kCheckWhileParsingBytes = std::int64_t(64) << 20;

/// What was read and checked before any GPU work (a malformed file is refused without a device).
template <class T>
struct Input {
  std::optional<HostData<T>> data;  ///< a file read into memory (CSV, raw, or a .npy of the other precision)
  std::optional<MappedNpy> mapped;  ///< a .npy of this precision, mapped in place; neither: synthetic blobs
  bool finite_checked = true;       ///< false: a mapped file too large to check while parsing
  std::vector<T> initial;           ///< given initial centroids, or the centroids of --predict
  std::vector<double> weights;      ///< --sample-weight, or empty
  bool rows_from_file = false;      ///< an MPI rank: data is empty, each rank reads its rows of --input later

  bool synthetic() const { return !data && !mapped && !rows_from_file; }
  /// The points in host memory (a file's).
  const T* points() const { return mapped ? mapped->values<T>() : data->values.data(); }
};

void setup_kmeans(CLI::App& app, KmeansOptions& o) {
  app.add_option("--input", o.input, "Data file: .npy (float32/float64, C order, 2-D), .csv (header optional), or raw "
                                     "binary with --d (points are rows)");
  app.add_option("--n", o.n, "Synthetic points (without --input)")->check(CLI::Range(std::int64_t(1), std::int64_t(INT32_MAX)))->capture_default_str();
  app.add_option("--d", o.d, "Synthetic dimensions, or columns of a raw --input file")->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 30))->capture_default_str();
  app.add_option("--k", o.k, "Clusters")->check(CLI::Range(1, INT32_MAX))->capture_default_str();
  app.add_option("--backend", o.backend, "GEMM for the distances")->check(CLI::IsMember(gemm::algo_names()))->capture_default_str();
  app.add_option("--math", o.math,
                 "exact: labels of an exact float argmin (where distances are fused with the argmin: one product "
                 "per cross term, each point's label certified or its distances redone at float accuracy, 3xTF32 "
                 "or three exact 16-bit products); fast: one product per cross term there (float: half products on a "
                 "half copy of X where half holds it, else TF32; 16-bit data: the centroids rounded to half/bf16; "
                 "near-ties can pick the other centre); rows of up to 4 values on the FMA units: differences squared, "
                 "exact labels (fast mode: d <= 2), or in fast mode ||c||^2 - 2 x.c (d = 3, and d = 4 with k <= 1024)")
      ->check(CLI::IsMember({"exact", "fast"}))->capture_default_str();
  app.add_option("--iters", o.iters, "Lloyd iterations at most")->check(CLI::Range(1, 1000000))->capture_default_str();
  app.add_option("--tol", o.tol,
                 "Stop when the squared centroid shift <= tol x mean feature variance, or when an iteration changes "
                 "no label (any tol); synthetic data runs all --iters unless --tol is given")
      ->capture_default_str();
  app.add_option("--init", o.init,
                 "Initial centroids: k-means++ (greedy D^2 sampling, one centre at a time), k-means|| (scalable "
                 "k-means++: a few rounds of sampling many at once, then reduced to k), random, or auto (k-means|| "
                 "from " + std::to_string(kmeans::kParallelInitMinClusters) + " clusters on, k-means++ below)")
      ->check(CLI::IsMember({"auto", "k-means++", "kmeans++", "k-means||", "random"}))
      ->capture_default_str();
  app.add_option("--init-rounds", o.init_rounds, "k-means||: sampling rounds (each a pass over the points)")
      ->check(CLI::Range(1, 100))->capture_default_str();
  app.add_option("--init-oversampling", o.init_oversampling,
                 "k-means||: points sampled per round, as a multiple of k (candidates: about rounds x this x k)")
      ->check(CLI::Range(0.01, 1000.0))->capture_default_str();
  app.add_option("--init-centroids", o.init_centroids, "File of k x d initial centroids (.npy or .csv)");
  app.add_option("--n-init", o.n_init, "Runs from different seeds; the lowest inertia is kept (one with --init-centroids)")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--sample-weight", o.sample_weight,
                 "File of one weight > 0 per point (.npy 1-D or n x 1, .csv): weighted means and inertia");
  app.add_option("--predict", o.predict,
                 "Label the points by these k x d centroids (.npy or .csv, e.g. a fit's --output-centroids) "
                 "instead of fitting; k comes from the file");
  app.add_option("--output-labels", o.output_labels, "Write the labels (.npy int32 or .csv)");
  app.add_option("--output-centroids", o.output_centroids, "Write the centroids (.npy or .csv)");
  app.add_flag("--no-column-copy", o.no_column_copy,
               "Run the distance GEMM on X's rows, without the column-major copy of X (n x d more memory)");
  app.add_flag("--compare", o.compare, "Run cuBLAS and every custom backend that can do the shape; print the end-to-end table");
  app.add_option("--max-gpu-memory", o.max_gpu_memory_text,
                 "Stream X from host memory (a .npy --input is mapped, not read) through at most this much GPU memory: "
                 "bytes, or with a suffix K, M, G or T (powers of 1024), e.g. 2G. Without it, data that does not fit "
                 "the GPU streams through its free memory")
      ->check([](const std::string& text) {
        try {
          parse_size(text);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  app.add_option("--chunk-rows", o.chunk_rows, "Rows per streamed chunk (0: from the GPU memory budget)")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(INT32_MAX)))->capture_default_str();
  app.add_option("--host-memory", o.host_memory,
                 "Where synthetic data that streams is generated: pageable (copied through pinned staging buffers) "
                 "or pinned (page-locked: copied as it is)")
      ->check(CLI::IsMember({"pageable", "pinned"}))->capture_default_str();
  app.add_option("--host-threads", o.host_threads,
                 "Threads copying pageable X into the pinned staging buffers of a streamed fit (0: min(8, cores))")
      ->check(CLI::Range(0, 1024))->capture_default_str();
  app.add_flag("--progress", o.progress,
               "Print a line per iteration (inertia, centroid shift, time) and per initialisation step (k-means|| "
               "round, every 256 centres of k-means++ or of the k-means|| reduction)");
  const std::string ft = "Fault tolerance (one GPU)";
  app.add_flag("--protect", o.protect,
               "Verify every point's distances against a checksum centroid computed in the same GEMM (recompute a "
               "chunk that fails) and the centroid sums against X's column totals, exactly (recompute on a mismatch)")
      ->group(ft);
  app.add_option("--inject", o.inject, "Inject one fault into this fit (needs --protect): a bit of a cross term, or of "
                                       "a centroid-sum word")
      ->check(CLI::IsMember({"distances", "sums"}))->group(ft);
  app.add_option("--inject-iteration", o.inject_iteration, "The Lloyd iteration of --inject")
      ->check(CLI::Range(1, 1000000))->capture_default_str()->group(ft);
  app.add_option("--inject-seed", o.inject_seed, "Draws the fault's chunk, element and bit")->capture_default_str()->group(ft);
  app.add_option("--campaign", o.campaign,
                 "Fault campaign (needs --protect): this many fits with one fault each (random iteration, element, "
                 "bit; seeded by --inject-seed), compared with the fault-free fit: detected / corrected / missed")
      ->check(CLI::Range(0, 1000000))->capture_default_str()->group(ft);
  app.add_option("--campaign-targets", o.campaign_targets, "What the campaign's faults hit: distances, sums, or both "
                                                           "(alternating)")
      ->check(CLI::IsMember({"distances", "sums", "both"}))->capture_default_str()->group(ft);
  const std::string multi = "Several GPUs (exact: the same result for any number)";
  app.add_option("--gpus", o.gpus,
                 "GPUs of this process, --device onwards, a thread each; the rows are split among them and their "
                 "cluster sums added through NCCL (host memory without it). Under mpirun each process is one GPU.")
      ->check(CLI::Range(1, 1024))->capture_default_str()->group(multi);
  app.add_option("--ranks", o.ranks,
                 "Ranks as threads on the --gpus GPUs in turn (default: one per GPU); more ranks than GPUs need "
                 "--comm threads: the multi-GPU path on one GPU, for testing")
      ->check(CLI::Range(0, 4096))->group(multi);
  app.add_option("--comm", o.comm,
                 "How ranks add up their sums: nccl, threads (host memory, one process), mpi (host memory, under "
                 "mpirun), or auto (NCCL when each rank has its own GPU)")
      ->check(CLI::IsMember({"auto", "nccl", "threads", "mpi"}))->capture_default_str()->group(multi);
  add_common_options(app, o.common, {"float", "double", "half", "bf16"});
}

kmeans::Init init_of(const KmeansOptions& o) {
  if (!o.init_centroids.empty()) return kmeans::Init::given;
  if (o.init == "random") return kmeans::Init::random;
  if (o.init == "k-means||") return kmeans::Init::kmeans_parallel;
  if (o.init == "auto") return kmeans::Init::automatic;
  return kmeans::Init::kmeans_plus_plus;
}

/// The initialisation as printed: "auto -> k-means||" when auto chose.
std::string init_description(const KmeansOptions& o) {
  const kmeans::Init init = init_of(o);
  const std::string resolved = kmeans::to_string(kmeans::resolve_init(init, o.k));
  return init == kmeans::Init::automatic ? "auto -> " + resolved : resolved;
}

/// Reads and checks everything a file or the flags can get wrong, before any GPU work.
template <class T>
Input<T> read_input(KmeansOptions& o) {
  Input<T> in;
  if (!(o.tol >= 0) || !std::isfinite(o.tol))
    throw std::invalid_argument("--tol " + std::to_string(o.tol) + " must be a finite number >= 0");
  // Synthetic blobs are separated so widely that Lloyd converges in two or three iterations; a fixed
  // count gives a steady median time per iteration, which is what the synthetic run is for.
  if (o.input.empty() && !o.tol_given) o.tol = 0;
  if (!o.max_gpu_memory_text.empty()) {
    o.max_gpu_memory = parse_size(o.max_gpu_memory_text);
    if (!o.predict.empty() || o.compare)
      throw std::invalid_argument("--max-gpu-memory streams a fit from host memory; --predict and --compare need the "
                                  "points on the GPU (leave --max-gpu-memory out)");
  }
  if (!o.input.empty()) {
    ReadOptions ro;
    ro.raw_cols = o.d;
    ro.raw_type = sizeof(T) == 8 ? RawType::f64 : RawType::f32;
    if (o.mpi && o.mpi->active()) {  // each rank reads only its rows, later
      const MatrixShape shape = read_matrix_shape(o.input, ro);
      in.rows_from_file = true;
      o.n = shape.rows;
      o.d = shape.cols;
    } else if (format_from_path(o.input) == FileFormat::npy && !o.distributed()) {
      // Mapped, not read: a file larger than the GPU (or than memory) streams from the page cache.
      MappedNpy m(o.input);
      if (m.elem_bytes() == int(sizeof(T))) {
        in.finite_checked = m.data_bytes() <= kCheckWhileParsingBytes;
        if (in.finite_checked) require_finite(m.values<T>(), m.rows(), m.cols(), o.input);
        in.mapped = std::move(m);
      } else {
        in.data = read_matrix<T>(o.input, ro);  // the other precision: converted in memory
      }
    } else {
      in.data = read_matrix<T>(o.input, ro);
    }
    if (!in.rows_from_file) {
      o.n = in.mapped ? in.mapped->rows() : in.data->rows;
      o.d = in.mapped ? in.mapped->cols() : in.data->cols;
    }
  }
  if ((!o.inject.empty() || o.campaign > 0) && !o.protect)
    throw std::invalid_argument("--inject and --campaign need --protect (the faults would go unseen)");
  if (o.protect && (o.distributed() || !o.predict.empty() || o.compare || !o.max_gpu_memory_text.empty()))
    throw std::invalid_argument("--protect runs a fit on one GPU with X in its memory; it takes no --gpus, --ranks, "
                                "--comm, mpirun, --predict, --compare or --max-gpu-memory");
  if (o.distributed() && (!o.predict.empty() || o.compare))
    throw std::invalid_argument("--predict and --compare run on one GPU; give no --gpus, --ranks, --comm or mpirun");
  if (!o.predict.empty()) {
    if (!o.init_centroids.empty() || o.compare)
      throw std::invalid_argument("--predict labels points by given centroids; it takes no --init-centroids or --compare");
    const HostData<T> c = read_matrix<T>(o.predict);
    if (c.cols != o.d)
      throw std::invalid_argument(o.predict + ": centroids of " + std::to_string(c.cols) + " dimensions, the points have " +
                                  std::to_string(o.d));
    o.k = static_cast<int>(c.rows);
    in.initial = c.values;
  }
  if (o.k > o.n)
    throw std::invalid_argument("--k " + std::to_string(o.k) + " is larger than the number of points (" +
                                std::to_string(o.n) + ")");
  if (!o.init_centroids.empty()) {
    const HostData<T> c = read_matrix<T>(o.init_centroids);
    if (c.rows != o.k || c.cols != o.d)
      throw std::invalid_argument(o.init_centroids + ": holds " + std::to_string(c.rows) + " x " + std::to_string(c.cols) +
                                  " centroids, need k x d = " + std::to_string(o.k) + " x " + std::to_string(o.d));
    in.initial = c.values;
  }
  if (!o.sample_weight.empty()) {
    if (!o.predict.empty()) throw std::invalid_argument("--predict takes no --sample-weight");
    const HostData<double> w = read_matrix<double>(o.sample_weight);
    if (w.cols != 1 || w.rows != o.n)
      throw std::invalid_argument(o.sample_weight + ": holds " + std::to_string(w.rows) + " x " + std::to_string(w.cols) +
                                  " values, need one weight per point (" + std::to_string(o.n) + ")");
    for (std::size_t i = 0; i < w.values.size(); ++i)
      if (!(w.values[i] > 0))
        throw std::invalid_argument(o.sample_weight + ": weight " + std::to_string(w.values[i]) + " at row " +
                                    std::to_string(i) + " must be > 0");
    in.weights = w.values;
  }
  for (const std::string* path : {&o.output_labels, &o.output_centroids})
    if (!path->empty()) {
      check_output_format(*path);
      check_writable(*path);
    }
  return in;
}

/// The fit's parameters from the options (no progress callbacks).
kmeans::Params params_of(const KmeansOptions& o, bool synthetic) {
  kmeans::Params p;
  p.k = o.k;
  p.max_iter = o.iters;
  p.tol = o.tol;
  p.init = init_of(o);
  p.seed = o.common.seed;
  p.backend = gemm::algo_from_name(o.backend);
  p.column_copy = !o.no_column_copy;
  p.n_init = o.n_init;
  p.init_rounds = o.init_rounds;
  p.init_oversampling = o.init_oversampling;
  p.math = o.math == "fast" ? gemm::Math::fast : gemm::Math::exact;
  // Synthetic data runs all --iters (a steady median time per iteration) unless --tol is given.
  p.stop_when_stable = !synthetic || o.tol_given;
  p.protect = o.protect;
  if (!o.inject.empty()) p.inject = {fault_target_from_name(o.inject), o.inject_iteration, o.inject_seed};
  return p;
}

/// X in host memory for a streamed fit: the file's points in place, or synthetic blobs generated here
/// (pageable or page-locked, --host-memory).
template <class T>
struct HostPoints {
  const T* x = nullptr;
  std::unique_ptr<T[]> pageable;
  PinnedBuffer<T> pinned;
  std::vector<std::int32_t> truth;  ///< synthetic: the blob of each point
  double generate_ms = 0;
};

template <class T>
HostPoints<T> host_points(const KmeansOptions& o, const Input<T>& in) {
  HostPoints<T> h;
  if (!in.synthetic()) {
    h.x = in.points();  // a mapped file not checked yet is checked while it streams (StreamOptions::check_finite)
    return h;
  }
  const double bytes = double(o.n) * double(o.d) * sizeof(T);
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  if (bytes > 0.9 * memory) {
    char msg[200];
    std::snprintf(msg, sizeof msg, "synthetic X of %.2f GiB does not fit in host memory (%.2f GiB); use a smaller --n or --d",
                  bytes / (1 << 30), memory / (1 << 30));
    throw std::runtime_error(msg);
  }
  const auto count = static_cast<std::size_t>(o.n) * static_cast<std::size_t>(o.d);
  T* x = nullptr;
  if (o.host_memory == "pinned") {
    h.pinned = PinnedBuffer<T>(count);
    x = h.pinned.data();
  } else {
    h.pageable.reset(new T[count]);  // uninitialised: the generator writes every value
    x = h.pageable.get();
  }
  h.x = x;
  const auto start = std::chrono::steady_clock::now();
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  host_blobs<T>(x, 0, o.n, o.d, o.k, o.common.seed, threads);
  h.generate_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  h.truth.resize(static_cast<std::size_t>(o.n));
  for (std::int64_t i = 0; i < o.n; ++i) h.truth[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % o.k);
  return h;
}

struct Run {
  std::string backend;
  bool supported = true;
  std::string reason;
  double median_ms = 0, total_ms = 0;
  double distances_ms = 0, argmin_ms = 0, update_ms = 0;  ///< medians per iteration
  int n_iter = 0;
  bool converged = false;
  double inertia = 0;
  std::int64_t labels_differ = 0;  ///< from the first (cuBLAS) run, in --compare
};

template <class T>
Run summarise(const std::string& backend, const kmeans::Result<T>& r) {
  Run run;
  run.backend = backend;
  run.median_ms = median(r.timing.iteration_ms);
  for (double ms : r.timing.iteration_ms) run.total_ms += ms;
  run.distances_ms = median(r.timing.distances_iteration_ms);
  run.argmin_ms = median(r.timing.argmin_iteration_ms);
  run.update_ms = median(r.timing.update_iteration_ms);
  run.n_iter = r.n_iter;
  run.converged = r.converged;
  run.inertia = r.inertia;
  return run;
}

/// --predict: the label of each point for the given centroids, timed after a warm-up call (which plans
/// the GEMM), written with --output-labels and --json.
template <class T>
int run_predict(Context& ctx, const KmeansOptions& o, const T* x, const std::vector<kmeans::compute_t<T>>& centroids) {
  const gemm::Algo backend = gemm::algo_from_name(o.backend);
  const gemm::Math math = o.math == "fast" ? gemm::Math::fast : gemm::Math::exact;
  const std::string method = kmeans::distance_method<T>(ctx, x, o.n, o.d, o.k, backend, math);
  kmeans::predict<T>(ctx, x, o.n, o.d, centroids, o.k, backend, math);
  CudaEvent start, stop;
  start.record(ctx.stream());
  const std::vector<std::int32_t> labels = kmeans::predict<T>(ctx, x, o.n, o.d, centroids, o.k, backend, math);
  stop.record(ctx.stream());
  const double ms = stop.ms_since(start);
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(o.k));
  for (std::int32_t l : labels) ++sizes[static_cast<std::size_t>(l)];
  std::printf("kmeans --predict on %s: %lld points x %lld dimensions, %s, k = %d from %s, distances through %s\n",
              device_name().c_str(), static_cast<long long>(o.n), static_cast<long long>(o.d),
              o.common.precision.c_str(), o.k, o.predict.c_str(), (o.backend == "auto" ? "auto -> " + method : o.backend).c_str());
  std::printf("labels in %.3f ms (the centroids' copy to the GPU, the distances, the argmin, the labels' copy back); "
              "largest cluster %lld points, smallest %lld\n",
              ms, static_cast<long long>(*std::max_element(sizes.begin(), sizes.end())),
              static_cast<long long>(*std::min_element(sizes.begin(), sizes.end())));
  if (!o.output_labels.empty()) write_matrix(o.output_labels, labels.data(), o.n, 1);
  if (!o.common.json.empty()) {
    JsonWriter json;
    json.begin_object().field("benchmark", "kmeans-predict").field("precision", o.common.precision);
    write_environment(json);
    json.field("n", o.n).field("d", o.d).field("k", o.k).field("backend", o.backend).field("centroids", o.predict)
        .field("data", o.input.empty() ? "blobs" : o.input).field("predict_ms", ms);
    json.key("cluster_sizes").begin_array();
    for (std::int64_t c : sizes) json.value(c);
    json.end_array();
    if (o.n <= 100000) {
      json.key("labels_").begin_array();
      for (auto l : labels) json.value(int(l));
      json.end_array();
    }
    json.end_object();
    write_file_atomically(o.common.json, json.str());
  }
  return 0;
}

/// Several GPUs or ranks: the options as a DistributedRun.
template <class T>
int run_distributed(const KmeansOptions& o, const Input<T>& in) {
  DistributedRun<T> run;
  run.n = o.n;
  run.d = o.d;
  run.synthetic = !in.data && !in.rows_from_file;
  run.params = params_of(o, run.synthetic);  // no --protect here: refused with several GPUs or ranks
  run.data_seed = o.common.seed;
  run.input = o.input;
  run.read.raw_cols = o.d;
  run.read.raw_type = sizeof(T) == 8 ? RawType::f64 : RawType::f32;
  run.data = in.data ? &*in.data : nullptr;
  run.initial = in.initial;
  run.weights = in.weights;
  run.gpus = o.gpus;
  run.ranks = o.ranks;
  run.first_device = o.common.device;
  run.comm = o.comm;
  run.output_labels = o.output_labels;
  run.output_centroids = o.output_centroids;
  run.json = o.common.json;
  run.precision = o.common.precision;
  run.backend = o.backend;
  run.init_description = o.init_centroids.empty() ? init_description(o) : "given centroids";
  run.data_name = run.synthetic ? "synthetic blobs (seed " + std::to_string(o.common.seed) + ")" : o.input;
  run.mpi = o.mpi;
  if (o.progress) {
    run.params.progress = [](const kmeans::IterationInfo& i) {
      std::printf("  iter %4d  inertia %.6e  shift %.3e  %.3f ms\n", i.iteration, i.inertia, i.shift, i.ms);
      std::fflush(stdout);
    };
    run.params.init_progress = [](const kmeans::InitProgress& i) {
      std::printf("  init %s %lld/%lld  %.1f ms\n", i.stage, static_cast<long long>(i.step), static_cast<long long>(i.of), i.ms);
      std::fflush(stdout);
    };
  }
  return run_kmeans_distributed(run);
}

/// 16-bit X on the device: the file's values or synthetic blobs made in float (a float16 .npy is read
/// exactly) and rounded once on the device.
template <class T>
DeviceBuffer<T> sixteen_bit_points(Context& ctx, const KmeansOptions& o, const Input<float>& in,
                                   std::vector<std::int32_t>& truth) {
  const std::size_t count = static_cast<std::size_t>(o.n) * static_cast<std::size_t>(o.d);
  DeviceBuffer<float> made(count);
  DeviceBuffer<T> x(count);
  if (in.synthetic()) {
    truth = kmeans::make_blobs<float>(ctx, made.data(), o.n, o.d, o.k, o.common.seed).labels;
  } else {
    if (!in.finite_checked) require_finite(in.points(), o.n, o.d, o.input);  // a large mapped file
    SKINNY_CUDA_TRY(cudaMemcpy(made.data(), in.points(), made.bytes(), cudaMemcpyHostToDevice));
  }
  narrow(made.data(), x.data(), count, ctx.stream());
  ctx.synchronize();
  return x;
}

template <class T>
int run_kmeans_typed(KmeansOptions& o, const Input<kmeans::compute_t<T>>& in) {
  using C = kmeans::compute_t<T>;
  constexpr bool sixteen_bit = !std::is_same_v<T, C>;
  if constexpr (!sixteen_bit) {
    if (o.distributed()) return run_distributed(o, in);
  } else if (o.distributed()) {
    throw std::invalid_argument("--gpus, --ranks, --comm and mpirun take float or double data; --precision " +
                                o.common.precision + " runs on one GPU");
  }
  const bool synthetic = in.synthetic();
  kmeans::Params p = params_of(o, synthetic);
  if (sixteen_bit && o.max_gpu_memory > 0)
    throw std::invalid_argument("--max-gpu-memory streams float or double data; --precision " + o.common.precision +
                                " keeps X in GPU memory");
  // A fit streams X from host memory when asked to (--max-gpu-memory) or when it would not fit the GPU;
  // --predict, --compare and 16-bit data need X on the GPU (what cannot run at all is refused here).
  const bool streamed = !sixteen_bit && (o.max_gpu_memory > 0 ||
                                         (o.predict.empty() && !o.compare && !kmeans::fits_on_device<C>(o.n, o.d, p)));
  if (!streamed)
    require_gpu_memory(double(kmeans::fit_device_bytes<C>(o.n, o.d, p)) +
                           (sixteen_bit ? double(o.n) * double(o.d) * sizeof(T) : 0.0),  // X in 16 bits beside the float copy
                       "k-means on " + std::to_string(o.n) + " x " + std::to_string(o.d) + " " + o.common.precision,
                       memory_advice(o.common, !o.predict.empty() || o.compare || sixteen_bit
                                                   ? "fewer points (--predict, --compare and 16-bit data need the data "
                                                     "in GPU memory)"
                                                   : "a smaller --n or --d"));
  const CudaStream stream;
  Context ctx(stream);
  apply_environment_tuning(ctx);
  DeviceBuffer<T> x;
  HostPoints<C> host;
  std::vector<std::int32_t> truth;
  if constexpr (sixteen_bit) {
    x = sixteen_bit_points<T>(ctx, o, in, truth);
  } else if (streamed) {
    host = host_points<C>(o, in);
    truth = host.truth;
  } else {
    x = DeviceBuffer<T>(static_cast<std::size_t>(o.n) * static_cast<std::size_t>(o.d));
    if (synthetic) {
      truth = kmeans::make_blobs<T>(ctx, x.data(), o.n, o.d, o.k, o.common.seed).labels;
    } else {
      if (!in.finite_checked) require_finite(in.points(), o.n, o.d, o.input);  // a large mapped file
      SKINNY_CUDA_TRY(cudaMemcpy(x.data(), in.points(), x.bytes(), cudaMemcpyHostToDevice));
    }
  }
  const T* points = x.data();
  if constexpr (!sixteen_bit)
    if (streamed) points = host.x;

  if (!o.predict.empty()) return run_predict<T>(ctx, o, x.data(), in.initial);

  const std::string method = kmeans::distance_method<T>(ctx, points, o.n, o.d, o.k, p.backend, p.math);
  const std::string resolved = o.backend == "auto" ? "auto -> " + method : o.backend;
  std::printf("kmeans on %s: %lld points x %lld dimensions, %s, k = %d, distances through %s, %s\n",
              device_name().c_str(), static_cast<long long>(o.n), static_cast<long long>(o.d),
              o.common.precision.c_str(), o.k, resolved.c_str(),
              synthetic ? ("synthetic blobs (seed " + std::to_string(o.common.seed) + ")").c_str() : o.input.c_str());
  if (streamed && synthetic)
    std::printf("synthetic blobs generated in %s host memory in %.1f ms (make_blobs' generator on the host)\n",
                o.host_memory.c_str(), host.generate_ms);
  std::fflush(stdout);
  if (o.progress) {
    p.progress = [](const kmeans::IterationInfo& i) {
      std::printf("  iter %4d  inertia %.6e  shift %.3e  %.3f ms\n", i.iteration, i.inertia, i.shift, i.ms);
    };
    p.init_progress = [](const kmeans::InitProgress& i) {
      std::printf("  init %s %lld/%lld", i.stage, static_cast<long long>(i.step), static_cast<long long>(i.of));
      if (i.candidates > 0) std::printf("  candidates %lld", static_cast<long long>(i.candidates));
      std::printf("  %.1f ms\n", i.ms);
      std::fflush(stdout);
    };
  }
  kmeans::Result<C> r;
  std::optional<kmeans::StreamReport> report;
  H2dCeiling ceiling;
  if constexpr (sixteen_bit) {
    r = kmeans::fit<T>(ctx, x.data(), o.n, o.d, p, in.initial, in.weights);
  } else if (streamed) {
    // The link's ceiling first, in this run: what the streamed iterations are judged against.
    ceiling = measure_h2d_ceiling(stream);
    kmeans::StreamOptions so;
    so.max_gpu_memory = static_cast<std::size_t>(o.max_gpu_memory);
    so.chunk_rows = o.chunk_rows;
    so.host_threads = o.host_threads;
    try {
      kmeans::StreamResult<T> sr = kmeans::fit_host<T>(ctx, points, o.n, o.d, p, in.initial, in.weights, so);
      report = sr.stream;
      r = std::move(sr);
    } catch (const kmeans::NonFiniteInput& e) {
      const double v = e.value();
      throw std::runtime_error(o.input + ": non-finite value (" + (std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf") +
                               ") at row " + std::to_string(e.row()) + ", column " + std::to_string(e.column()) +
                               " (found while streaming rows " + std::to_string(e.chunk_row0()) + " to " +
                               std::to_string(e.chunk_row0() + e.chunk_rows() - 1) + " to the GPU); clean the data first");
    }
  } else {
    r = kmeans::fit<T>(ctx, x.data(), o.n, o.d, p, in.initial, in.weights);
  }
  const Run main_run = summarise(o.backend, r);
  std::optional<CampaignResult> campaign;
  if (o.campaign > 0) {
    if constexpr (!sixteen_bit)
      if (streamed) throw std::invalid_argument("--campaign needs X in GPU memory");
    campaign = run_campaign<T>(ctx, x.data(), o.n, o.d, p, in.initial, in.weights,
                               CampaignOptions{o.campaign, o.campaign_targets, o.inject_seed});
  }

  std::vector<Run> compared;
  if (o.compare) {
    kmeans::Params cp = p;
    cp.progress = nullptr;
    std::vector<std::int32_t> reference_labels;
    // Every registry backend, cuBLAS first, then what auto picks (the fused nearest kernel for many clusters).
    std::vector<std::pair<std::string, gemm::Algo>> backends;
    for (const auto& info : gemm::algorithms()) backends.emplace_back(std::string(info.name), info.algo);
    backends.emplace_back("auto", gemm::Algo::automatic);
    for (const auto& [name, algo] : backends) {
      cp.backend = algo;
      Run run;
      try {
        const kmeans::Result<C> rr = kmeans::fit<T>(ctx, x.data(), o.n, o.d, cp, in.initial, in.weights);
        run = summarise(name, rr);
        if (reference_labels.empty()) reference_labels = rr.labels;  // cuBLAS comes first in the registry
        for (std::size_t i = 0; i < rr.labels.size(); ++i) run.labels_differ += rr.labels[i] != reference_labels[i];
      } catch (const std::invalid_argument& e) {
        run.backend = name;
        run.supported = false;
        run.reason = e.what();
      }
      compared.push_back(run);
    }
  }

  // What ran and how fast first; the one-time costs and the result after.
  if (r.one_pass)  // the update's sums were formed in the assignment's read of X
    std::printf("%.3f ms per iteration (median of %d; one read of X: assignment and sums %.3f, means %.3f ms)",
                main_run.median_ms, r.n_iter, main_run.distances_ms + main_run.argmin_ms, main_run.update_ms);
  else
    std::printf("%.3f ms per iteration (median of %d; distances %.3f, argmin %.3f, update %.3f ms)",
                main_run.median_ms, r.n_iter, main_run.distances_ms, main_run.argmin_ms, main_run.update_ms);
  if (o.compare && compared[0].supported)
    std::printf("; cuBLAS %.3f ms: %.2fx", compared[0].median_ms, compared[0].median_ms / main_run.median_ms);
  std::printf("\n");
  std::printf("%d iterations, %s; inertia %.9e%s\n", r.n_iter,
              r.converged ? "converged (--tol, or an iteration changed no label)"
              : synthetic && !o.tol_given ? "all --iters (synthetic data: give --tol to stop at convergence)"
                                          : "stopped at --iters before converging",
              r.inertia, o.n_init > 1 && o.init_centroids.empty() ? (" (best of " + std::to_string(o.n_init) + " runs)").c_str() : "");
  std::printf("set-up, not in the iteration times: init %.1f ms (%s%s), first assignment %.1f ms (plans the GEMM, "
              "loads the kernels)\n",
              r.timing.init_ms, o.init_centroids.empty() ? init_description(o).c_str() : "given centroids",
              r.column_copy ? ", column-major copy of X" : "", r.timing.setup_ms);
  print_protection(r.protection);
  if (campaign) print_campaign(*campaign);
  double percent_of_ceiling = 0;
  if (report) {
    const kmeans::StreamPlan& plan = report->plan;
    percent_of_ceiling = ceiling.gbs > 0 ? 100 * median(report->stream_gbs) / ceiling.gbs : 0;
    std::printf("streamed from %s host memory%s: %lld rows per chunk, %lld chunks per pass, per-point arrays %s; GPU "
                "memory %.2f GiB planned of a %.2f GiB budget%s\n",
                report->pinned_input ? "page-locked" : "pageable",
                report->pinned_input ? "" : (" (" + std::to_string(report->host_threads) + " threads fill the pinned staging buffers)").c_str(),
                static_cast<long long>(plan.chunk_rows), static_cast<long long>(plan.chunks),
                plan.per_point_on_device ? "on the GPU" : "per chunk (labels back in host memory)",
                double(plan.planned_bytes) / (1 << 30), double(plan.budget) / (1 << 30),
                plan.init_sample_rows > 0 ? ("; " + init_description(o) + " on " +
                                             (plan.init_sample_rows == o.n ? std::string("all rows")
                                                                            : "a sample of " + std::to_string(plan.init_sample_rows) + " rows")).c_str()
                                          : "");
    std::printf("host-to-device %.2f GiB per iteration: copies at %.1f GB/s, iterations sustain %.1f GB/s = %.1f %% of "
                "the pinned-copy ceiling measured in this run (%.1f GB/s, %.2f GiB cudaMemcpyAsync); set-up pass %.1f ms\n",
                double(report->h2d_bytes_per_iteration) / (1 << 30), median(report->h2d_gbs), median(report->stream_gbs),
                percent_of_ceiling, ceiling.gbs, double(ceiling.bytes) / (1 << 30), report->setup_ms);
  }
  double ari = NAN;
  if (synthetic) {
    ari = kmeans::adjusted_rand_index(truth, r.labels);
    std::printf("adjusted Rand index against the true blobs: %.6f\n", ari);
  }
  if (o.compare) {
    std::printf("\nend to end, %d iterations at most from the same initial centroids (%s, seed %llu):\n", p.max_iter,
                o.init_centroids.empty() ? init_description(o).c_str() : "given", static_cast<unsigned long long>(p.seed));
    std::printf("%-12s %10s %10s %10s %10s %9s %8s %13s\n", "backend", "ms/iter", "distances", "argmin", "update",
                "speedup", "iters", "labels!=cuBLAS");
    for (const Run& run : compared) {
      if (!run.supported) {
        std::printf("%-12s   cannot run this shape: %s\n", run.backend.c_str(), run.reason.c_str());
        continue;
      }
      std::printf("%-12s %10.3f %10.3f %10.3f %10.3f %8.2fx %8d %13lld\n", run.backend.c_str(), run.median_ms,
                  run.distances_ms, run.argmin_ms, run.update_ms, compared[0].median_ms / run.median_ms, run.n_iter,
                  static_cast<long long>(run.labels_differ));
    }
  }

  if (!o.output_labels.empty()) write_matrix(o.output_labels, r.labels.data(), o.n, 1);
  if (!o.output_centroids.empty()) write_matrix(o.output_centroids, r.centroids.data(), o.k, o.d);
  if (!o.common.json.empty()) {
    JsonWriter json;
    json.begin_object().field("benchmark", "kmeans").field("precision", o.common.precision);
    write_environment(json);
    json.field("n", o.n).field("d", o.d).field("k", o.k).field("backend", o.backend).field("backend_resolved", resolved)
        .field("math", o.math).field("init", kmeans::to_string(kmeans::resolve_init(init_of(o), o.k)))
        .field("init_option", o.init_centroids.empty() ? o.init : "given").field("seed", o.common.seed).field("tol", o.tol)
        .field("max_iter", o.iters).field("n_init", o.n_init).field("seed_of_best_run", r.seed)
        .field("init_rounds", o.init_rounds).field("init_oversampling", o.init_oversampling)
        .field("sample_weight", o.sample_weight.empty() ? "none" : o.sample_weight)
        .field("data", synthetic ? "blobs" : o.input);
    json.field("inertia_", r.inertia).field("n_iter_", r.n_iter).field("converged", r.converged)
        .field("column_copy", r.column_copy).field("one_pass", r.one_pass);
    if (synthetic) json.field("adjusted_rand_index", ari);
    json.field("streamed", report.has_value());
    write_protection(json, r.protection);
    if (campaign) write_campaign(json, *campaign);
    if (report) {
      const kmeans::StreamPlan& plan = report->plan;
      json.key("stream").begin_object();
      json.field("max_gpu_memory", o.max_gpu_memory).field("budget_bytes", std::uint64_t(plan.budget))
          .field("planned_bytes", std::uint64_t(plan.planned_bytes)).field("chunk_rows", plan.chunk_rows)
          .field("chunks", plan.chunks).field("per_point_on_device", plan.per_point_on_device)
          .field("init_sample_rows", plan.init_sample_rows).field("pinned_input", report->pinned_input)
          .field("host_memory", synthetic ? o.host_memory : std::string("file"))
          .field("host_threads", report->host_threads).field("setup_ms", report->setup_ms)
          .field("h2d_bytes_per_iteration", report->h2d_bytes_per_iteration)
          .field("median_h2d_gbs", median(report->h2d_gbs)).field("median_stream_gbs", median(report->stream_gbs))
          .field("h2d_ceiling_gbs", ceiling.gbs).field("h2d_ceiling_bytes", std::uint64_t(ceiling.bytes))
          .field("percent_of_h2d_ceiling", percent_of_ceiling);
      json.key("copy_ms").begin_array();
      for (double ms : report->copy_ms) json.value(ms);
      json.end_array();
      json.end_object();
    }
    json.field("median_iteration_ms", main_run.median_ms).field("median_distances_ms", main_run.distances_ms)
        .field("median_argmin_ms", main_run.argmin_ms).field("median_update_ms", main_run.update_ms)
        .field("init_ms", r.timing.init_ms).field("setup_ms", r.timing.setup_ms);
    json.key("iteration_ms").begin_array();
    for (double ms : r.timing.iteration_ms) json.value(ms);
    json.end_array();
    json.key("cluster_centers_").begin_array();
    for (std::int64_t c = 0; c < o.k; ++c) {
      json.begin_array();
      for (std::int64_t j = 0; j < o.d; ++j) json.value(double(r.centroids[std::size_t(c * o.d + j)]));
      json.end_array();
    }
    json.end_array();
    if (o.n <= 100000) {
      json.key("labels_").begin_array();
      for (auto l : r.labels) json.value(int(l));
      json.end_array();
    } else {
      json.field("labels_", "omitted for n > 100000: use --output-labels");
    }
    if (o.compare) {
      json.key("compare").begin_array();
      for (const Run& run : compared) {
        json.begin_object().field("backend", run.backend).field("supported", run.supported).field("reason", run.reason);
        if (run.supported)
          json.field("median_iteration_ms", run.median_ms).field("median_distances_ms", run.distances_ms)
              .field("median_argmin_ms", run.argmin_ms).field("median_update_ms", run.update_ms)
              .field("total_ms", run.total_ms).field("n_iter", run.n_iter).field("inertia", run.inertia)
              .field("speedup_vs_cublas", compared[0].median_ms / run.median_ms)
              .field("labels_differing_from_cublas", run.labels_differ);
        json.end_object();
      }
      json.end_array();
    }
    json.end_object();
    write_file_atomically(o.common.json, json.str());
  }
  return 0;
}

}  // namespace
}  // namespace skinny::apps

int main(int argc, char** argv) {
  using namespace skinny::apps;
  CLI::App app{"Lloyd K-means on the GPU; the distances' cross term through cuBLAS or skinny's kernels", "kmeans"};
  const MpiSession mpi(argc, argv);  // MPI only when started by mpirun (or srun, mpiexec)
  KmeansOptions options;
  options.mpi = &mpi;
  setup_kmeans(app, options);
  Input<float> input_f;
  Input<double> input_d;
  // Everything that can be checked without a GPU is checked while parsing: bad input fails the same
  // way on a machine with no device.
  app.callback([&] {
    options.tol_given = app.count("--tol") > 0;
    try {
      if (options.common.precision == "double")
        input_d = read_input<double>(options);
      else
        input_f = read_input<float>(options);
    } catch (const std::exception& e) {
      throw CLI::ValidationError(e.what());
    }
  });
  return run_app(app, argc, argv, options.common, [&] {
    const std::string& precision = options.common.precision;
    if (precision == "double") return run_kmeans_typed<double>(options, input_d);
    if (precision == "half") return run_kmeans_typed<__half>(options, input_f);
    if (precision == "bf16") return run_kmeans_typed<__nv_bfloat16>(options, input_f);
    return run_kmeans_typed<float>(options, input_f);
  });
}
