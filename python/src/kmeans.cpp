// K-means bindings: fit (with restarts; host data that does not fit the GPU, or with max_gpu_memory,
// streamed through it by fit_host), predict, squared distances and the finiteness check. The GIL is
// released while the GPU works; results come back as NumPy arrays.
#include "arrays.hpp"
#include "bindings.hpp"

#include <skinny/gemm/context.hpp>
#include <skinny/gemm/cuda_stream.hpp>
#include <skinny/kmeans/distances.hpp>
#include <skinny/kmeans/distributed.hpp>
#include <skinny/kmeans/thread_communicator.hpp>
#if defined(SKINNY_WITH_NCCL)
#include <skinny/kmeans/nccl_communicator.hpp>
#endif
#include <skinny/kmeans/finite.hpp>
#include <skinny/kmeans/kmeans.hpp>
#include <skinny/kmeans/stream.hpp>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace skinny::python {
namespace {

/// Sample weights: float64 on the host (the Python layer converts them).
using Weights = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

/// fit's arguments, as the Python layer passes them (already checked there; C++ checks them again).
struct FitArgs {
  int k = 8;
  std::string init;  ///< "auto", "k-means++", "k-means||", "random" or "given"
  std::optional<Matrix> init_centroids;
  int max_iter = 300;
  double tol = 1e-4;
  std::uint64_t seed = 0;
  int n_init = 1;  ///< runs from seed and seeds derived from it; the lowest inertia wins
  std::string backend;
  bool column_copy = true;
  bool stop_when_stable = true;
  gemm::Math math = gemm::Math::exact;
  std::vector<double> sample_weight;  ///< empty: 1 each
  nb::object progress;  ///< None, or called as progress(iteration, inertia, shift, ms)
  /// Host data streams through at most this many bytes of device memory; 0: only when it does not fit.
  std::uint64_t max_gpu_memory = 0;
  bool protect = false;  ///< Params::protect
  double init_oversampling = kmeans::Params{}.init_oversampling;  ///< k-means||
  int init_rounds = kmeans::Params{}.init_rounds;
};

gemm::Math math_from_name(const std::string& name) {
  if (name == "exact") return gemm::Math::exact;
  if (name == "fast") return gemm::Math::fast;
  throw std::invalid_argument("unknown math '" + name + "' (valid: exact, fast)");
}

kmeans::Init init_from_name(const std::string& name) {
  if (name == "auto") return kmeans::Init::automatic;
  if (name == "k-means++") return kmeans::Init::kmeans_plus_plus;
  if (name == "k-means||") return kmeans::Init::kmeans_parallel;
  if (name == "random") return kmeans::Init::random;
  if (name == "given") return kmeans::Init::given;
  throw std::invalid_argument("unknown init '" + name + "' (valid: auto, k-means++, k-means||, random, given)");
}

/// The stream report as a dict (the Python layer's stream_report_).
nb::dict report_dict(const kmeans::StreamReport& r) {
  nb::dict d;
  d["budget_bytes"] = r.plan.budget;
  d["planned_bytes"] = r.plan.planned_bytes;
  d["chunk_rows"] = r.plan.chunk_rows;
  d["chunks"] = r.plan.chunks;
  d["per_point_on_device"] = r.plan.per_point_on_device;
  d["init_sample_rows"] = r.plan.init_sample_rows;
  d["pinned_input"] = r.pinned_input;
  d["host_threads"] = r.host_threads;
  d["h2d_bytes_per_iteration"] = r.h2d_bytes_per_iteration;
  d["copy_ms"] = r.copy_ms;
  d["h2d_gbs"] = r.h2d_gbs;
  d["stream_gbs"] = r.stream_gbs;
  d["setup_ms"] = r.setup_ms;
  return d;
}

kmeans::Params params_of(const FitArgs& a) {
  kmeans::Params p;
  p.k = a.k;
  p.init = init_from_name(a.init);
  p.max_iter = a.max_iter;
  p.tol = a.tol;
  p.seed = a.seed;
  p.n_init = a.n_init;
  p.backend = gemm::algo_from_name(a.backend);
  p.column_copy = a.column_copy;
  p.stop_when_stable = a.stop_when_stable;
  p.math = a.math;
  p.protect = a.protect;
  p.init_oversampling = a.init_oversampling;
  p.init_rounds = a.init_rounds;
  if (!a.progress.is_none()) {
    nb::object progress = a.progress;
    p.progress = [progress](const kmeans::IterationInfo& i) {
      nb::gil_scoped_acquire gil;  // called from fit, which runs without the GIL
      progress(i.iteration, i.inertia, i.shift, i.ms);
    };
  }
  return p;
}

/// A fit's result as the dict the Python layer reads (labels: all n of them; the centroids move out of r).
template <class C>
nb::dict result_dict(kmeans::Result<C>& r, std::vector<std::int32_t> labels) {
  nb::dict out;
  const std::size_t n = labels.size();
  out["cluster_centers"] = to_numpy(std::move(r.centroids), {std::size_t(r.k), std::size_t(r.d)});
  out["labels"] = to_numpy(std::move(labels), {n});
  out["inertia"] = r.inertia;
  out["n_iter"] = r.n_iter;
  out["converged"] = r.converged;
  out["column_copy"] = r.column_copy;
  out["one_pass"] = r.one_pass;
  out["seed"] = r.seed;
  out["init_ms"] = r.timing.init_ms;
  out["iteration_ms"] = r.timing.iteration_ms;
  out["distances_ms"] = r.timing.distances_iteration_ms;
  out["argmin_ms"] = r.timing.argmin_iteration_ms;
  out["update_ms"] = r.timing.update_iteration_ms;
  if (r.protection.enabled) {
    nb::dict protection;
    protection["rows_verified"] = r.protection.rows_verified;
    protection["rows_rechecked"] = r.protection.rows_rechecked;
    protection["distance_detections"] = r.protection.distance_detections;
    protection["sum_detections"] = r.protection.sum_detections;
    protection["max_clean_ratio"] = r.protection.max_clean_ratio;
    out["protection"] = protection;
  } else {
    out["protection"] = nb::none();
  }
  return out;
}

template <class T>
nb::dict fit(const ConstMatrix& x, const FitArgs& a) {
  const kmeans::Params p = params_of(a);
  using C = kmeans::compute_t<T>;
  const std::vector<C> initial = a.init_centroids ? host_values<C>(*a.init_centroids) : std::vector<C>{};

  DeviceScope scope(x);
  kmeans::Result<C> best;
  std::optional<kmeans::StreamReport> report;
  std::size_t copied_bytes = 0;  // host data copied to the device whole, and the copy's time
  double copy_ms = 0;
  {
    nb::gil_scoped_release no_gil;
    Context ctx;  // the legacy default stream: ordered after the work of CuPy's and PyTorch's default streams
    const auto n = static_cast<std::int64_t>(x.shape(0)), d = static_cast<std::int64_t>(x.shape(1));
    bool streamed = false;
    if constexpr (std::is_same_v<T, C>) {  // float and double stream; 16-bit data stays on the device
      if (!on_cuda(x) && (a.max_gpu_memory > 0 || !kmeans::fits_on_device<T>(n, d, p))) {
        // Streamed from host memory in chunks (a NumPy memmap is read in place): never all on the device.
        kmeans::StreamOptions so;
        so.max_gpu_memory = static_cast<std::size_t>(a.max_gpu_memory);
        kmeans::StreamResult<T> r =
            kmeans::fit_host<T>(ctx, static_cast<const T*>(x.data()), n, d, p, initial, a.sample_weight, so);
        report = r.stream;
        best = std::move(r);
        streamed = true;
      }
    }
    if (!streamed) {
      const DeviceMatrix<T> dx(x);  // one copy of host data for all the restarts
      copied_bytes = dx.copied_bytes();
      copy_ms = dx.copy_ms();
      best = kmeans::fit<T>(ctx, dx.data(), dx.rows, dx.cols, p, initial, a.sample_weight);
    }
  }
  nb::dict out = result_dict(best, std::move(best.labels));
  out["stream"] = report ? nb::object(report_dict(*report)) : nb::none();
  if (copied_bytes > 0) {
    nb::dict transfer;
    transfer["bytes"] = copied_bytes;
    transfer["ms"] = copy_ms;
    transfer["gbs"] = copy_ms > 0 ? double(copied_bytes) / (copy_ms * 1e6) : 0.0;
    out["transfer"] = transfer;
  } else {
    out["transfer"] = nb::none();
  }
  return out;
}

/// Throws std::invalid_argument unless `devices` are distinct CUDA devices of this machine, no more than
/// the n points.
void check_devices(const std::vector<int>& devices, std::int64_t n) {
  const int count = cuda_device_count();
  if (devices.empty()) throw std::invalid_argument("devices: need at least one device");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] < 0 || devices[i] >= count)
      throw std::invalid_argument("devices: " + std::to_string(devices[i]) + " is not a CUDA device of this machine (it has " +
                                  std::to_string(count) + ": 0 .. " + std::to_string(count - 1) + ")");
    if (std::find(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(i), devices[i]) !=
        devices.begin() + static_cast<std::ptrdiff_t>(i))
      throw std::invalid_argument("devices: " + std::to_string(devices[i]) + " is listed twice");
  }
  if (static_cast<std::int64_t>(devices.size()) > n)
    throw std::invalid_argument("devices: " + std::to_string(devices.size()) + " devices for " + std::to_string(n) +
                                " samples; need at least one sample per device");
}

/// fit over several devices of this process: x (host, n x d) split by rows, a thread per device,
/// fit_distributed between them through NCCL (host memory when built without it); one device runs over
/// LocalCommunicator. The same result as fit on one device, for any number of devices.
template <class T>
nb::dict fit_devices(const Matrix& x, const FitArgs& a, const std::vector<int>& devices) {
  if (on_cuda(x)) throw std::invalid_argument("internal: fit over devices takes host data");
  const kmeans::Params p = params_of(a);
  const std::vector<T> initial = a.init_centroids ? host_values<T>(*a.init_centroids) : std::vector<T>{};
  const std::int64_t n = static_cast<std::int64_t>(x.shape(0)), d = static_cast<std::int64_t>(x.shape(1));
  const T* host = static_cast<const T*>(x.data());
  check_devices(devices, n);
  const int ranks = static_cast<int>(devices.size());
  std::vector<kmeans::DistributedResult<T>> results(devices.size());
  // The other ranks' parameters without the progress callback, made while the GIL is held: copying or
  // dropping the callback touches its Python object's reference count.
  kmeans::Params quiet = p;
  quiet.progress = nullptr;
  {
    nb::gil_scoped_release no_gil;
    kmeans::ThreadGroup group(ranks);
    kmeans::LocalCommunicator local;
    std::vector<std::unique_ptr<kmeans::Communicator>> comms;
    std::function<void()> abort_all = [&] { group.abort(); };
#if defined(SKINNY_WITH_NCCL)
    std::vector<std::unique_ptr<kmeans::NcclCommunicator>> nccl;
    if (ranks > 1) {
      nccl = kmeans::NcclCommunicator::for_devices(devices);
      abort_all = [&] {
        for (auto& c : nccl) c->abort();
      };
    }
#endif
    for (int r = 0; r < ranks && ranks > 1; ++r) comms.push_back(std::make_unique<kmeans::ThreadCommunicator>(group, r));
    kmeans::run_ranks(
        ranks,
        [&](int r) {
          const std::size_t u = static_cast<std::size_t>(r);
          kmeans::Communicator* comm = ranks == 1 ? static_cast<kmeans::Communicator*>(&local) : comms[u].get();
#if defined(SKINNY_WITH_NCCL)
          if (ranks > 1) comm = nccl[u].get();
#endif
          SKINNY_CUDA_TRY(cudaSetDevice(devices[u]));
          const kmeans::RowRange s = kmeans::shard_rows(n, ranks, r);
          DeviceBuffer<T> shard(static_cast<std::size_t>(s.count * d));
          SKINNY_CUDA_TRY(cudaMemcpy(shard.data(), host + s.begin * d, shard.bytes(), cudaMemcpyHostToDevice));
          std::vector<double> w;
          if (!a.sample_weight.empty())
            w.assign(a.sample_weight.begin() + s.begin, a.sample_weight.begin() + s.begin + s.count);
          const kmeans::Params& pr = r == 0 ? p : quiet;  // rank 0 reports for all
          const CudaStream stream;
          Context ctx(stream);
          results[u] = kmeans::fit_distributed<T>(ctx, *comm, shard.data(), s.count, n, s.begin, d, pr,
                                                  r == 0 ? initial : std::vector<T>{}, w);
        },
        abort_all);
  }
  kmeans::DistributedResult<T>& best = results[0];
  std::vector<std::int32_t> labels;
  labels.reserve(static_cast<std::size_t>(n));
  for (const auto& r : results) labels.insert(labels.end(), r.labels.begin(), r.labels.end());
  nb::dict out = result_dict(best, std::move(labels));
  out["allreduce_ms"] = best.allreduce_iteration_ms;
  out["communicator"] = best.communicator;
  return out;
}

template <class T>
nb::object predict(const Matrix& x, const Matrix& centroids, const std::string& backend, const std::string& math_name) {
  const std::vector<kmeans::compute_t<T>> c = host_values<kmeans::compute_t<T>>(centroids);
  const gemm::Algo algo = gemm::algo_from_name(backend);
  const gemm::Math math = math_from_name(math_name);
  DeviceScope scope(x);
  std::vector<std::int32_t> labels;
  {
    nb::gil_scoped_release no_gil;
    const DeviceMatrix<T> dx(x);
    Context ctx;
    labels = kmeans::predict<T>(ctx, dx.data(), dx.rows, dx.cols, c, static_cast<std::int64_t>(centroids.shape(0)), algo,
                                math);
  }
  const std::size_t n = labels.size();
  return to_numpy(std::move(labels), {n});
}

template <class T>
nb::object sq_distances(const Matrix& x, const Matrix& centroids, const std::string& backend) {
  const std::vector<T> c = host_values<T>(centroids);
  const gemm::Algo algo = gemm::algo_from_name(backend);
  const auto n = static_cast<std::size_t>(x.shape(0)), k = static_cast<std::size_t>(centroids.shape(0));
  DeviceScope scope(x);
  std::vector<T> host;
  {
    nb::gil_scoped_release no_gil;
    DeviceBuffer<T> out(n * k);  // first: a result too large for the device fails before the host copy
    host.resize(n * k);
    const DeviceMatrix<T> dx(x);
    Context ctx;
    kmeans::sq_distances<T>(ctx, dx.data(), dx.rows, dx.cols, c, static_cast<std::int64_t>(k), out.data(), algo);
    SKINNY_CUDA_TRY(cudaMemcpyAsync(host.data(), out.data(), out.bytes(), cudaMemcpyDeviceToHost, ctx.stream()));
    ctx.synchronize();
  }
  return to_numpy(std::move(host), {n, k});
}

template <class T>
std::int64_t count_non_finite(const Matrix& x) {
  DeviceScope scope(x);
  nb::gil_scoped_release no_gil;
  Context ctx;
  return kmeans::count_non_finite<T>(ctx, static_cast<const T*>(x.data()), static_cast<std::int64_t>(x.size()));
}

template <class T>
struct Type {
  using type = T;
};

/// Calls f(Type<T>{}) for the element type T of x: float or double.
template <class Array, class F>
auto by_dtype(const Array& x, F f) {
  if (holds<float>(x)) return f(Type<float>{});
  if (holds<double>(x)) return f(Type<double>{});
  throw nb::type_error("skinny: expected a float32 or float64 array");
}

/// The same, with the 16-bit data fit and predict take too: __half (float16) and __nv_bfloat16.
template <class Array, class F>
auto by_any_dtype(const Array& x, F f) {
  if (holds<__half>(x)) return f(Type<__half>{});
  if (holds<__nv_bfloat16>(x)) return f(Type<__nv_bfloat16>{});
  if (holds<float>(x) || holds<double>(x)) return by_dtype(x, f);
  throw nb::type_error("skinny: expected a float32, float64, float16 or bfloat16 array");
}

}  // namespace

void bind_kmeans(nb::module_& m) {
  m.def(
      "kmeans_fit",
      [](const ConstMatrix& x, int k, const std::string& init, std::optional<Matrix> init_centroids, int max_iter,
         double tol, std::uint64_t seed, int n_init, const std::string& backend, bool column_copy,
         bool stop_when_stable, const std::string& math, std::optional<Weights> sample_weight, nb::object progress,
         double init_oversampling, int init_rounds, std::uint64_t max_gpu_memory, bool protect) {
        std::vector<double> weights;
        if (sample_weight) weights.assign(sample_weight->data(), sample_weight->data() + sample_weight->size());
        const FitArgs a{k, init, std::move(init_centroids), max_iter, tol, seed, n_init, backend, column_copy,
                        stop_when_stable, math_from_name(math), std::move(weights), std::move(progress),
                        max_gpu_memory, protect, init_oversampling, init_rounds};
        return by_any_dtype(x, [&](auto t) { return fit<typename decltype(t)::type>(x, a); });
      },
      nb::arg("x").noconvert(), nb::arg("k"), nb::arg("init"), nb::arg("init_centroids").none(), nb::arg("max_iter"),
      nb::arg("tol"), nb::arg("seed"), nb::arg("n_init"), nb::arg("backend"), nb::arg("column_copy"),
      nb::arg("stop_when_stable"), nb::arg("math"), nb::arg("sample_weight").none(), nb::arg("progress").none(),
      nb::arg("init_oversampling") = kmeans::Params{}.init_oversampling,
      nb::arg("init_rounds") = kmeans::Params{}.init_rounds, nb::arg("max_gpu_memory") = 0, nb::arg("protect") = false,
      "Lloyd K-means, n_init runs from seed, the lowest inertia kept; sample_weight empty or n weights. Host data "
      "streams through the GPU (fit_host) when max_gpu_memory > 0 or when it does not fit. protect: checksums on "
      "the distances and the centroid sums (Params::protect). Returns a dict of the result ('stream': the stream "
      "report, or None; 'protection': what the checks saw, or None).");
  m.def(
      "kmeans_fit_devices",
      [](const Matrix& x, const std::vector<int>& devices, int k, const std::string& init,
         std::optional<Matrix> init_centroids, int max_iter, double tol, std::uint64_t seed, int n_init,
         const std::string& backend, bool column_copy, bool stop_when_stable, const std::string& math,
         std::optional<Weights> sample_weight, nb::object progress, double init_oversampling, int init_rounds) {
        std::vector<double> weights;
        if (sample_weight) weights.assign(sample_weight->data(), sample_weight->data() + sample_weight->size());
        const FitArgs a{k, init, std::move(init_centroids), max_iter, tol, seed, n_init, backend, column_copy,
                        stop_when_stable, math_from_name(math), std::move(weights), std::move(progress), 0, false,
                        init_oversampling, init_rounds};
        return by_dtype(x, [&](auto t) { return fit_devices<typename decltype(t)::type>(x, a, devices); });
      },
      nb::arg("x").noconvert(), nb::arg("devices"), nb::arg("k"), nb::arg("init"), nb::arg("init_centroids").none(),
      nb::arg("max_iter"), nb::arg("tol"), nb::arg("seed"), nb::arg("n_init"), nb::arg("backend"),
      nb::arg("column_copy"), nb::arg("stop_when_stable"), nb::arg("math"), nb::arg("sample_weight").none(),
      nb::arg("progress").none(), nb::arg("init_oversampling") = kmeans::Params{}.init_oversampling,
      nb::arg("init_rounds") = kmeans::Params{}.init_rounds,
      "kmeans_fit over several CUDA devices of this process (x on the host, split by rows; NCCL between the "
      "devices when built with it): the result of one device, for any number. Returns a dict of the result.");
  m.def(
      "kmeans_predict",
      [](const Matrix& x, const Matrix& centroids, const std::string& backend, const std::string& math) {
        return by_any_dtype(x, [&](auto t) { return predict<typename decltype(t)::type>(x, centroids, backend, math); });
      },
      nb::arg("x").noconvert(), nb::arg("centroids").noconvert(), nb::arg("backend"), nb::arg("math") = "exact",
      "Index of the nearest centroid of each row of x (int32).");
  m.def(
      "kmeans_sq_distances",
      [](const Matrix& x, const Matrix& centroids, const std::string& backend) {
        return by_dtype(x, [&](auto t) { return sq_distances<typename decltype(t)::type>(x, centroids, backend); });
      },
      nb::arg("x").noconvert(), nb::arg("centroids").noconvert(), nb::arg("backend"),
      "Squared Euclidean distances (n x k) of the rows of x to the centroids.");
  m.def(
      "count_non_finite",
      [](const Matrix& x) {
        if (!on_cuda(x)) throw std::invalid_argument("count_non_finite: expected a CUDA array");
        return by_any_dtype(x, [&](auto t) { return count_non_finite<typename decltype(t)::type>(x); });
      },
      nb::arg("x").noconvert(), "Number of NaN or infinite values in a CUDA array.");
}

}  // namespace skinny::python
