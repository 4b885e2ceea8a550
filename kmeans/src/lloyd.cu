// fit() and predict(): validation at the boundary, then the Lloyd loop on one stream.
#include "detail.hpp"
#include "init.hpp"

#include <skinny/gemm/cuda_event.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/nearest.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace skinny::kmeans {
namespace {

using detail::chunk_rows;

template <class T>
T* placeholder() {  // a non-null pointer for can_implement, which checks shapes and never dereferences
  return reinterpret_cast<T*>(std::uintptr_t(256));
}

/// Throws std::invalid_argument unless (x, n, d, k, backend) is a problem fit and predict can run.
template <class T>
void check_shape(const T* x, std::int64_t n, std::int64_t d, std::int64_t k, gemm::Algo backend) {
  if (x == nullptr) throw std::invalid_argument("kmeans: the data pointer is null");
  if (n < 1 || d < 1)
    throw std::invalid_argument("kmeans: need n >= 1 points of d >= 1 dimensions (got n = " + std::to_string(n) +
                                ", d = " + std::to_string(d) + ")");
  if (n > INT32_MAX)
    throw std::invalid_argument("kmeans: n = " + std::to_string(n) + " points exceeds 2^31 - 1 (labels are 32-bit)");
  if (k < 1 || k > n)
    throw std::invalid_argument("kmeans: need 1 <= k <= n (got k = " + std::to_string(k) + ", n = " +
                                std::to_string(n) + ")");
  const std::int64_t rows = chunk_rows(n, k, sizeof(T));
  const gemm::Arguments<T> probe{gemm::row_major<const T>(x, rows, d), gemm::col_major<const T>(placeholder<T>(), d, k),
                                 gemm::row_major(placeholder<T>(), rows, k)};
  const gemm::Support s = gemm::can_implement(backend, probe);
  if (!s) throw std::invalid_argument("kmeans: backend cannot compute the distances: " + s.reason);
}

void check_params(const Params& p) {
  if (p.max_iter < 1) throw std::invalid_argument("kmeans: max_iter = " + std::to_string(p.max_iter) + " must be >= 1");
  if (!(p.tol >= 0) || !std::isfinite(p.tol))
    throw std::invalid_argument("kmeans: tol = " + std::to_string(p.tol) + " must be finite and >= 0");
  if (!(p.init_oversampling > 0) || !std::isfinite(p.init_oversampling))
    throw std::invalid_argument("kmeans: init_oversampling = " + std::to_string(p.init_oversampling) +
                                " must be finite and > 0");
  if (p.init_rounds < 1)
    throw std::invalid_argument("kmeans: init_rounds = " + std::to_string(p.init_rounds) + " must be >= 1");
}

/// From this many clusters on, Algo::automatic computes distances and argmin in one fused tensor-core
/// kernel (gemm::nearest): the cross term is then compute bound, and the n x k distances need not be
/// written and read back.
constexpr std::int64_t kFusedMinClusters = 128;

/// Whether the assignment runs through gemm::nearest (float, automatic, enough clusters, a shape it
/// can do) rather than a GEMM through `backend` and the argmin.
template <class T>
bool fused_assignment(const Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                      gemm::Algo backend) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (backend != gemm::Algo::automatic || k < kFusedMinClusters) return false;
    gemm::NearestArguments a;
    a.x = x;
    a.n = n;
    a.d = d;
    a.c = a.x_sq_norms = a.c_sq_norms = placeholder<float>();
    a.k = k;
    a.labels = placeholder<std::int32_t>();
    return static_cast<bool>(gemm::nearest_can_implement(ctx, a));
  }
}

/// Fewest points for the column-major copy of X: below, the tall-skinny kernels' column-major path has
/// too few rows to fill the GPU without splitting the inner dimension, and rows were faster (H100,
/// float, d = 4096, k = 16, TSM2 distances with / without the copy: n = 1024 0.168 / 0.067 ms, 16384
/// 0.186 / 0.132 ms, 65536 0.405 / 0.445 ms, 262144 1.511 / 1.691 ms).
constexpr std::int64_t kColumnCopyMinPoints = 65536;

/// Whether `bytes` more fit in the device's free memory, leaving room for the library's scratch.
bool fits_in_free_memory(std::size_t bytes) {
  std::size_t free = 0, total = 0;
  SKINNY_CUDA_TRY(cudaMemGetInfo(&free, &total));
  const std::size_t headroom = std::max<std::size_t>(std::size_t(512) << 20, total / 20);
  return free > headroom && bytes <= free - headroom;
}

/// The assignment step: either the fused kernel over all points, or, over chunks of rows, cross terms
/// through the gemm backend (on X, or on its column-major copy xt when set) and then the argmin.
/// Records an event before each GEMM and each argmin (events[2i], events[2i + 1]) and one at the end;
/// the fused kernel counts as the GEMM (its argmin is inside) and the cluster counts after it as the
/// argmin.
template <class T>
struct Assigner {
  Context& ctx;
  const T* x;
  const T* xt = nullptr;  ///< X column-major (leading dimension n), or null
  std::int64_t n, d, k;
  gemm::Algo backend;
  bool fused;
  std::int64_t rows;  ///< per chunk
  DeviceBuffer<T> g;
  std::vector<std::unique_ptr<CudaEvent>> events;

  Assigner(Context& c, const T* x_, std::int64_t n_, std::int64_t d_, std::int64_t k_, gemm::Algo b)
      : ctx(c), x(x_), n(n_), d(d_), k(k_), backend(b), fused(fused_assignment(c, x_, n_, d_, k_, b)),
        rows(fused ? n_ : chunk_rows(n_, k_, sizeof(T))), g(fused ? 0 : static_cast<std::size_t>(rows * k_)) {
    const std::int64_t chunks = (n + rows - 1) / rows;
    for (std::int64_t i = 0; i < 2 * chunks + 1; ++i) events.push_back(std::make_unique<CudaEvent>());
  }

  void run(const T* c, const T* xnorm, const T* cnorm, std::int32_t* labels, T* mindist, int* counts) {
    const cudaStream_t stream = ctx.stream();
    SKINNY_CUDA_TRY(cudaMemsetAsync(counts, 0, static_cast<std::size_t>(k) * sizeof(int), stream));
    if constexpr (std::is_same_v<T, float>) {
      if (fused) {
        gemm::NearestArguments a;
        a.x = x;
        a.n = n;
        a.d = d;
        a.c = c;
        a.k = k;
        a.x_sq_norms = xnorm;
        a.c_sq_norms = cnorm;
        a.labels = labels;
        a.sq_distances = mindist;
        events[0]->record(stream);
        gemm::nearest(ctx, a);
        events[1]->record(stream);
        detail::count_labels(labels, n, k, counts, stream);
        events[2]->record(stream);
        return;
      }
    }
    std::size_t e = 0;
    for (std::int64_t r0 = 0; r0 < n; r0 += rows) {
      const std::int64_t m = std::min(rows, n - r0);
      events[e++]->record(stream);
      const gemm::MatrixView<const T> a =
          xt ? gemm::col_major<const T>(xt + r0, m, d, n) : gemm::row_major<const T>(x + r0 * d, m, d);
      gemm::gemm(ctx, {a, gemm::col_major<const T>(c, d, k), gemm::row_major(g.data(), m, k)}, backend);
      events[e++]->record(stream);
      detail::argmin(g.data(), m, k, xnorm + r0, cnorm, labels + r0, mindist + r0, counts, stream);
    }
    events[e]->record(stream);
  }
  /// GPU milliseconds of the last run in the GEMMs and in the argmins (waits for it).
  std::pair<double, double> phase_ms() const {
    double gemm_ms = 0, argmin_ms = 0;
    for (std::size_t i = 0; i + 2 < events.size(); i += 2) {
      gemm_ms += events[i + 1]->ms_since(*events[i]);
      argmin_ms += events[i + 2]->ms_since(*events[i + 1]);
    }
    return {gemm_ms, argmin_ms};
  }
};

}  // namespace

template <class T>
Result<T> fit(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const Params& params,
              const std::vector<T>& initial_centroids) {
  const std::int64_t k = params.k;
  check_shape(x, n, d, k, params.backend);
  check_params(params);
  if (params.init == Init::given) detail::check_centroids(initial_centroids, k, d);

  const cudaStream_t stream = ctx.stream();
  Result<T> result;
  result.k = k;
  result.d = d;
  DeviceBuffer<T> xnorm(static_cast<std::size_t>(n)), mindist(static_cast<std::size_t>(n));
  DeviceBuffer<T> c(static_cast<std::size_t>(k * d)), c_next(static_cast<std::size_t>(k * d)), cnorm(static_cast<std::size_t>(k));
  DeviceBuffer<std::int32_t> labels(static_cast<std::size_t>(n));
  DeviceBuffer<int> counts(static_cast<std::size_t>(k));
  Assigner<T> assign(ctx, x, n, d, k, params.backend);
  detail::Updater<T> updater(n, d, k);

  detail::AsyncSum inertia_sum;
  DeviceBuffer<T> xt;  // X column-major, when Params::column_copy applies
  const std::size_t xt_bytes = static_cast<std::size_t>(n) * static_cast<std::size_t>(d) * sizeof(T);
  if (params.column_copy && !assign.fused && n >= kColumnCopyMinPoints && fits_in_free_memory(xt_bytes))
    xt = DeviceBuffer<T>(static_cast<std::size_t>(n) * static_cast<std::size_t>(d));
  result.column_copy = xt.size() > 0;

  CudaEvent start, stop;
  start.record(stream);
  if (result.column_copy) {
    detail::to_columns(x, n, d, xt.data(), stream);
    assign.xt = xt.data();
  }
  detail::row_sq_norms(x, n, d, xnorm.data(), stream);
  const double tol_scaled = params.tol > 0 ? params.tol * detail::mean_feature_variance(x, n, d, stream) : 0.0;
  switch (resolve_init(params.init, k)) {
    case Init::given: c.copy_from(initial_centroids); break;
    case Init::random: detail::init_random(ctx, x, n, d, k, params.seed, c.data()); break;
    case Init::kmeans_plus_plus:
      detail::init_kmeans_plus_plus(ctx, x, n, d, k, params.seed, xnorm.data(), c.data(), params.init_progress);
      break;
    case Init::kmeans_parallel:
    case Init::automatic:  // resolved to one of the others
      detail::init_kmeans_parallel(ctx, x, n, d, k, params.seed, params.init_oversampling, params.init_rounds,
                                   xnorm.data(), c.data(), params.init_progress);
      break;
  }
  stop.record(stream);
  result.timing.init_ms = stop.ms_since(start);

  // One assignment before the iterations carries the one-time costs (the GEMM's plan, which TSM2 times
  // on a shape's first call, and the kernels' loading), so that every iteration's time is a steady one.
  start.record(stream);
  detail::row_sq_norms(c.data(), k, d, cnorm.data(), stream);
  assign.run(c.data(), xnorm.data(), cnorm.data(), labels.data(), mindist.data(), counts.data());
  stop.record(stream);
  result.timing.setup_ms = stop.ms_since(start);

  for (int it = 1; it <= params.max_iter; ++it) {
    CudaEvent update_start;
    start.record(stream);
    detail::row_sq_norms(c.data(), k, d, cnorm.data(), stream);
    assign.run(c.data(), xnorm.data(), cnorm.data(), labels.data(), mindist.data(), counts.data());
    // The inertia comes back with the update, which waits for the stream anyway.
    inertia_sum.queue(mindist.data(), n, stream);
    update_start.record(stream);
    const double shift =
        updater.update(x, labels.data(), mindist.data(), counts.data(), c.data(), c_next.data(), stream);
    stop.record(stream);
    const double inertia = inertia_sum.value();
    std::swap(c, c_next);
    const auto [gemm_ms, argmin_ms] = assign.phase_ms();
    const double iteration_ms = stop.ms_since(start);
    const double update_ms = stop.ms_since(update_start);
    result.timing.distances_iteration_ms.push_back(gemm_ms);
    result.timing.argmin_iteration_ms.push_back(argmin_ms);
    result.timing.update_iteration_ms.push_back(update_ms);
    result.timing.iteration_ms.push_back(iteration_ms);
    result.n_iter = it;
    if (params.progress) params.progress(IterationInfo{it, inertia, shift, iteration_ms});
    if (params.tol > 0 && shift <= tol_scaled) {
      result.converged = true;
      break;
    }
  }
  // Labels and inertia for the centroids returned (scikit-learn does the same final assignment).
  detail::row_sq_norms(c.data(), k, d, cnorm.data(), stream);
  assign.run(c.data(), xnorm.data(), cnorm.data(), labels.data(), mindist.data(), counts.data());
  result.inertia = detail::sum(mindist.data(), n, stream);
  result.labels = labels.to_host();
  result.centroids = c.to_host();
  return result;
}

template <class T>
std::vector<std::int32_t> predict(Context& ctx, const T* x, std::int64_t n, std::int64_t d,
                                  const std::vector<T>& centroids, std::int64_t k, gemm::Algo backend) {
  check_shape(x, n, d, k, backend);
  detail::check_centroids(centroids, k, d);
  const cudaStream_t stream = ctx.stream();
  DeviceBuffer<T> xnorm(static_cast<std::size_t>(n)), mindist(static_cast<std::size_t>(n)), c(centroids),
      cnorm(static_cast<std::size_t>(k));
  DeviceBuffer<std::int32_t> labels(static_cast<std::size_t>(n));
  DeviceBuffer<int> counts(static_cast<std::size_t>(k));
  detail::row_sq_norms(x, n, d, xnorm.data(), stream);
  detail::row_sq_norms(c.data(), k, d, cnorm.data(), stream);
  Assigner<T> assign(ctx, x, n, d, k, backend);
  assign.run(c.data(), xnorm.data(), cnorm.data(), labels.data(), mindist.data(), counts.data());
  return labels.to_host();
}

template <class T>
std::string distance_method(const Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                            gemm::Algo backend) {
  check_shape(x, n, d, k, backend);
  if (fused_assignment(ctx, x, n, d, k, backend)) return "nearest";
  const std::int64_t rows = chunk_rows(n, k, sizeof(T));
  return std::string(gemm::to_string(gemm::choose(
      ctx, gemm::Arguments<T>{gemm::row_major<const T>(x, rows, d), gemm::col_major<const T>(placeholder<T>(), d, k),
                              gemm::row_major(placeholder<T>(), rows, k)})));
}

template <class T>
Blobs<T> make_blobs(Context& ctx, T* x, std::int64_t n, std::int64_t d, int k, std::uint64_t seed, double stddev,
                    double center_box) {
  if (x == nullptr || n < 1 || d < 1 || k < 1 || k > n)
    throw std::invalid_argument("make_blobs: need x != null, n, d >= 1 and 1 <= k <= n (got n = " + std::to_string(n) +
                                ", d = " + std::to_string(d) + ", k = " + std::to_string(k) + ")");
  if (!(stddev >= 0) || !(center_box > 0))
    throw std::invalid_argument("make_blobs: need stddev >= 0 and center_box > 0");
  DeviceBuffer<T> centers(static_cast<std::size_t>(k) * static_cast<std::size_t>(d));
  detail::blobs(x, centers.data(), n, d, k, seed, stddev, center_box, ctx.stream());
  Blobs<T> b;
  b.centers = centers.to_host();
  b.labels.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) b.labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % k);
  return b;
}

#define SKINNY_KMEANS_FIT(T)                                                                                      \
  template Result<T> fit(Context&, const T*, std::int64_t, std::int64_t, const Params&, const std::vector<T>&);  \
  template std::vector<std::int32_t> predict(Context&, const T*, std::int64_t, std::int64_t, const std::vector<T>&, \
                                             std::int64_t, gemm::Algo);                                           \
  template std::string distance_method(const Context&, const T*, std::int64_t, std::int64_t, std::int64_t,        \
                                       gemm::Algo);                                                               \
  template Blobs<T> make_blobs(Context&, T*, std::int64_t, std::int64_t, int, std::uint64_t, double, double);
SKINNY_KMEANS_FIT(float)
SKINNY_KMEANS_FIT(double)

}  // namespace skinny::kmeans
