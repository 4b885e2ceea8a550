// fit_host(): fit's Lloyd loop over X in host memory, streamed through the GPU chunk by chunk on every
// pass (chunk_stream.hpp). Each chunk runs the steps fit runs on all points (the same kernels per point:
// norms, the assignment, direct distances) and adds its points to the same exact integer sums (the
// Updater), so the centroids do not depend on the chunking; see stream.hpp for what is guaranteed.
#include <skinny/kmeans/finite.hpp>
#include <skinny/kmeans/stream.hpp>

#include "chunk_stream.hpp"
#include "detail.hpp"
#include "init.hpp"
#include "stream_plan.hpp"

#include <skinny/gemm/cuda_event.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/nearest.hpp>
#include <skinny/gemm/pinned_buffer.hpp>
#include <skinny/gemm/splitmix64.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace skinny::kmeans {
namespace {

std::string value_name(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

}  // namespace

NonFiniteInput::NonFiniteInput(std::int64_t row, std::int64_t column, double value, std::int64_t chunk_row0,
                               std::int64_t chunk_rows)
    : std::invalid_argument("kmeans: X holds a non-finite value (" + value_name(value) + ") at row " +
                            std::to_string(row) + ", column " + std::to_string(column) + " (found in rows " +
                            std::to_string(chunk_row0) + " to " + std::to_string(chunk_row0 + chunk_rows - 1) +
                            ", streamed to the GPU together); clean the data first"),
      row_(row), column_(column), value_(value), chunk_row0_(chunk_row0), chunk_rows_(chunk_rows) {}

namespace {

using detail::ChunkStream;

template <class T>
T* placeholder() {  // an aligned non-null pointer for the shape checks, which never dereference it
  return reinterpret_cast<T*>(std::uintptr_t(256));
}

int default_host_threads() {
  const unsigned cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::max(1u, std::min(8u, cores)));
}

/// Throws NonFiniteInput for the first NaN or infinity among rows [r0, r0 + rows) of the host matrix x
/// (a chunk whose count on the GPU was not 0).
template <class T>
[[noreturn]] void throw_first_non_finite(const T* x, std::int64_t d, std::int64_t r0, std::int64_t rows) {
  for (std::int64_t i = r0; i < r0 + rows; ++i)
    for (std::int64_t j = 0; j < d; ++j) {
      const double v = static_cast<double>(x[i * d + j]);
      if (!std::isfinite(v)) throw NonFiniteInput(i, j, v, r0, rows);
    }
  throw std::runtime_error("kmeans: the GPU counted a non-finite value in rows " + std::to_string(r0) + " to " +
                           std::to_string(r0 + rows - 1) + " that host memory does not hold (did X change?)");
}

/// Indices of the arrays a pass streams.
enum Streamed : std::size_t { kX = 0, kWeights = 1, kPrevLabels = 2 };

/// One fit's streamed data and what every run from a seed shares (norms on the device or per chunk,
/// the scales of the sums, the scaled tol), as fit's Lloyd class; run() is one Lloyd run.
template <class T>
class StreamLloyd {
 public:
  StreamLloyd(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const Params& params,
              const std::vector<double>& sample_weight, const StreamPlan& plan, bool fused, bool narrow,
              const StreamOptions& options)
      : ctx_(ctx), x_(x), n_(n), d_(d), k_(params.k), params_(params), w_(sample_weight), plan_(plan), fused_(fused),
        narrow_(narrow),
        resident_(plan.per_point_on_device), gemm_rows_(detail::chunk_rows(n, params.k, sizeof(T))),
        xnorm_(point_rows()), mindist_(point_rows()), c_(size(k_ * d)), c_next_(size(k_ * d)), cnorm_(size(k_)),
        labels_(point_rows()), prev_labels_(resident_ ? size(n) : 0), counts_(size(k_)), changed_(1), changed_host_(1),
        weights_(resident_ ? sample_weight : std::vector<double>{}),
        g_(fused || narrow ? 0 : size(std::min(plan.chunk_rows, gemm_rows_) * k_)), part_scratch_(detail::kSumScratch),
        parts_host_(resident_ ? 0 : size(plan.chunks)), labels_host_(resident_ ? 0 : size(n)),
        mindist_host_(resident_ ? 0 : size(n)),
        stream_(n, plan.chunk_rows,
                {size(d) * sizeof(T), !resident_ && weighted() ? sizeof(double) : 0,
                 !resident_ ? sizeof(std::int32_t) : 0},
                ctx.stream(), options.host_threads > 0 ? options.host_threads : default_host_threads()),
        updater_(plan.chunk_rows, d, params.k) {
    for (std::int64_t i = 0; i < stream_.chunks(); ++i)
      for (auto& e : chunk_events_.emplace_back()) e = std::make_unique<CudaEvent>();
    setup(options.check_finite);
  }

  bool pinned_input() const { return detail::page_locked(x_); }
  int host_threads() const { return stream_.host_threads(); }
  double setup_ms() const { return setup_ms_; }

  StreamResult<T> run(std::uint64_t seed, const std::vector<T>& initial_centroids) {
    const cudaStream_t stream = ctx_.stream();
    StreamResult<T> result;
    result.k = k_;
    result.d = d_;
    result.seed = seed;
    CudaEvent start, stop;
    start.record(stream);
    init(seed, initial_centroids);
    stop.record(stream);
    result.timing.init_ms = stop.ms_since(start) + setup_ms_pending_;
    setup_ms_pending_ = 0;  // counted once, in the first run

    // The first chunk's assignment carries the one-time costs (the GEMM's plan, which TSM2 times on a
    // shape's first call, the kernels' loading) out of the iterations, as fit's set-up assignment does.
    start.record(stream);
    begin_assignment();
    stream_.pass(hosts(false), [&](const ChunkStream::Chunk& ch) {
      const Points p = points(ch);
      assign(p.x, ch.rows, p.xnorm, p.labels, p.mindist);
    }, 1);
    stop.record(stream);
    result.timing.setup_ms = stop.ms_since(start);

    for (int it = 1; it <= params_.max_iter; ++it) {
      CudaEvent update_start;
      start.record(stream);
      if (resident_) std::swap(labels_, prev_labels_);
      begin_assignment();
      if (it > 1) SKINNY_CUDA_TRY(cudaMemsetAsync(changed_.data(), 0, sizeof(unsigned long long), stream));
      updater_.begin(stream);
      stream_.pass(hosts(it > 1), [&](const ChunkStream::Chunk& ch) {
        auto& ev = chunk_events_[static_cast<std::size_t>(ch.index)];
        ev[0]->record(stream);
        const Points p = points(ch);
        assign(p.x, ch.rows, p.xnorm, p.labels, p.mindist);
        ev[1]->record(stream);
        // iteration 1's labels have nothing before them (the set-up's were for the same centroids)
        if (it > 1) detail::count_changes(p.labels, p.prev, ch.rows, changed_.data(), stream);
        if (!resident_) keep_chunk(ch, p, true);
        ev[2]->record(stream);
        updater_.accumulate(p.x, p.w, p.labels, ch.rows, stream);
        ev[3]->record(stream);
      });
      if (it > 1) changed_host_.copy_from_device_async(changed_.data(), stream);
      if (resident_) inertia_sum_.queue(mindist_.data(), n_, stream, device_weights());
      update_start.record(stream);
      const double shift = updater_.finish(host_points(), counts_.data(), c_.data(), c_next_.data(), stream);
      stop.record(stream);
      const double inertia = resident_ ? inertia_sum_.value() : sum_of_parts();
      std::swap(c_, c_next_);

      double distances_ms = 0, bookkeeping_ms = 0, sums_ms = 0;
      for (std::int64_t i = 0; i < stream_.chunks(); ++i) {
        const auto& ev = chunk_events_[static_cast<std::size_t>(i)];
        distances_ms += ev[1]->ms_since(*ev[0]);
        bookkeeping_ms += ev[2]->ms_since(*ev[1]);
        sums_ms += ev[3]->ms_since(*ev[2]);
      }
      const double iteration_ms = stop.ms_since(start);
      const double copy_ms = stream_.last_copy_ms();
      const double bytes = static_cast<double>(stream_.last_bytes());
      result.stream.h2d_bytes_per_iteration = stream_.last_bytes();
      result.stream.copy_ms.push_back(copy_ms);
      result.stream.h2d_gbs.push_back(copy_ms > 0 ? bytes / (copy_ms * 1e6) : 0.0);
      result.stream.stream_gbs.push_back(iteration_ms > 0 ? bytes / (iteration_ms * 1e6) : 0.0);
      const detail::IterationTimes times{distances_ms, bookkeeping_ms, sums_ms + stop.ms_since(update_start),
                                         iteration_ms};
      if (detail::end_iteration(result, params_, it, times, inertia, shift, changed_host_[0], tol_scaled_)) break;
    }

    // Labels and inertia for the centroids returned, the inertia from direct differences (as fit).
    begin_assignment();
    stream_.pass(hosts(false), [&](const ChunkStream::Chunk& ch) {
      const Points p = points(ch);
      assign(p.x, ch.rows, p.xnorm, p.labels, p.mindist);
      detail::label_sq_distances(p.x, ch.rows, d_, c_.data(), p.labels, p.mindist, stream);
      if (!resident_) keep_chunk(ch, p, false);
    });
    if (resident_) {
      result.inertia = detail::sum(mindist_.data(), n_, stream, device_weights());
      result.labels = labels_.to_host();
    } else {
      SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
      result.inertia = sum_of_parts();
      result.labels.assign(labels_host_.data(), labels_host_.data() + n_);
    }
    result.centroids = c_.to_host();
    return result;
  }

 private:
  static std::size_t size(std::int64_t count) { return static_cast<std::size_t>(count); }
  std::size_t point_rows() const { return size(resident_ ? n_ : plan_.chunk_rows); }
  bool weighted() const { return !w_.empty(); }
  const double* device_weights() const { return weights_.size() > 0 ? weights_.data() : nullptr; }

  /// The host arrays a pass streams: X, and per chunk the weights and (for the changed labels) the
  /// previous labels.
  std::vector<const void*> hosts(bool previous_labels) const {
    return {x_, !resident_ && weighted() ? w_.data() : nullptr,
            !resident_ && previous_labels ? labels_host_.data() : nullptr};
  }

  /// A chunk's points on the device: X, weights (null: 1), norms, distances, labels and previous labels.
  struct Points {
    const T* x;
    const double* w;
    T* xnorm;
    T* mindist;
    std::int32_t* labels;
    const std::int32_t* prev;
  };
  /// Per chunk the norms are computed here (the same kernel, per row, as the set-up's on all points).
  Points points(const ChunkStream::Chunk& ch) {
    Points p{};
    p.x = static_cast<const T*>(ch.device[kX]);
    if (resident_) {
      const std::int64_t r0 = ch.row0;
      p.w = weights_.size() > 0 ? weights_.data() + r0 : nullptr;
      p.xnorm = xnorm_.data() + r0;
      p.mindist = mindist_.data() + r0;
      p.labels = labels_.data() + r0;
      p.prev = prev_labels_.data() + r0;
    } else {
      p.w = static_cast<const double*>(ch.device[kWeights]);
      p.xnorm = xnorm_.data();
      p.mindist = mindist_.data();
      p.labels = labels_.data();
      p.prev = static_cast<const std::int32_t*>(ch.device[kPrevLabels]);
      detail::row_sq_norms(p.x, ch.rows, d_, p.xnorm, ctx_.stream());
    }
    return p;
  }

  /// Per chunk: the labels (and in iterations the distances) back to page-locked host memory, and the
  /// chunk's inertia, added on the host in chunk order.
  void keep_chunk(const ChunkStream::Chunk& ch, const Points& p, bool distances) {
    const cudaStream_t stream = ctx_.stream();
    SKINNY_CUDA_TRY(cudaMemcpyAsync(labels_host_.data() + ch.row0, p.labels, size(ch.rows) * sizeof(std::int32_t),
                                    cudaMemcpyDeviceToHost, stream));
    if (distances)
      SKINNY_CUDA_TRY(cudaMemcpyAsync(mindist_host_.data() + ch.row0, p.mindist, size(ch.rows) * sizeof(T),
                                      cudaMemcpyDeviceToHost, stream));
    detail::sum_into(p.mindist, ch.rows, part_scratch_.data(), stream, p.w);
    SKINNY_CUDA_TRY(cudaMemcpyAsync(parts_host_.data() + ch.index, part_scratch_.data(), sizeof(double),
                                    cudaMemcpyDeviceToHost, stream));
  }
  double sum_of_parts() const {  // once the stream has been synchronised
    double s = 0;
    for (std::size_t i = 0; i < parts_host_.size(); ++i) s += parts_host_[i];
    return s;
  }

  /// Centroid norms and zero counts before the chunks' assignments add to them.
  void begin_assignment() {
    detail::row_sq_norms(c_.data(), k_, d_, cnorm_.data(), ctx_.stream());
    SKINNY_CUDA_TRY(cudaMemsetAsync(counts_.data(), 0, size(k_) * sizeof(int), ctx_.stream()));
  }

  /// fit's assignment (Assigner) on one chunk: narrow_nearest, the fused kernel, or the GEMM in fit's row
  /// chunks and the argmin; the cluster counts add up over the chunks.
  void assign(const T* x, std::int64_t rows, const T* xnorm, std::int32_t* labels, T* mindist) {
    const cudaStream_t stream = ctx_.stream();
    if (narrow_) {
      detail::narrow_nearest(x, rows, d_, c_.data(), k_, detail::narrow_form(params_.math, d_), labels, mindist, stream);
      detail::count_labels(labels, rows, k_, counts_.data(), stream);
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      if (fused_) {
        gemm::NearestArguments a;
        a.x = x;
        a.n = rows;
        a.d = d_;
        a.c = c_.data();
        a.k = k_;
        a.x_sq_norms = xnorm;
        a.c_sq_norms = cnorm_.data();
        a.labels = labels;
        a.sq_distances = mindist;
        a.math = params_.math;
        gemm::nearest(ctx_, a);
        detail::count_labels(labels, rows, k_, counts_.data(), stream);
        return;
      }
    }
    for (std::int64_t r0 = 0; r0 < rows; r0 += gemm_rows_) {
      const std::int64_t m = std::min(gemm_rows_, rows - r0);
      gemm::gemm(ctx_,
                 {gemm::row_major<const T>(x + r0 * d_, m, d_), gemm::col_major<const T>(c_.data(), d_, k_),
                  gemm::row_major(g_.data(), m, k_)},
                 params_.backend);
      detail::argmin(g_.data(), m, k_, xnorm + r0, cnorm_.data(), labels + r0, mindist + r0, counts_.data(), stream);
    }
  }

  /// The set-up pass: non-finite values, the norms (kept on the device), the columns' maxima (the
  /// sums' scales) and moments (tol's variance, merged over the chunks by Chan et al.'s update).
  void setup(bool check_finite) {
    const cudaStream_t stream = ctx_.stream();
    CudaEvent start, stop;
    start.record(stream);
    std::vector<double> max_abs(size(d_ + 1), 0.0);
    DeviceBuffer<double> scratch(size(detail::kMomentScratchRows * d_)), moments(size(2 * d_));
    PinnedBuffer<double> moments_host(size(2 * d_));
    std::vector<double> mean(size(d_), 0.0), m2(size(d_), 0.0);
    double count = 0;
    stream_.pass(hosts(false), [&](const ChunkStream::Chunk& ch) {
      const T* x = static_cast<const T*>(ch.device[kX]);
      if (check_finite && count_non_finite(ctx_, x, ch.rows * d_) > 0) throw_first_non_finite(x_, d_, ch.row0, ch.rows);
      const double* w = resident_ ? (weights_.size() > 0 ? weights_.data() + ch.row0 : nullptr)
                                  : static_cast<const double*>(ch.device[kWeights]);
      if (resident_) detail::row_sq_norms(x, ch.rows, d_, xnorm_.data() + ch.row0, stream);
      const std::vector<double> m = updater_.column_max_abs(x, ch.rows, w, stream);  // waits
      for (std::size_t j = 0; j < max_abs.size(); ++j) max_abs[j] = std::max(max_abs[j], m[j]);
      if (params_.tol > 0) {
        detail::column_moments(x, ch.rows, d_, scratch.data(), moments.data(), stream);
        moments_host.copy_from_device_async(moments.data(), stream);
        SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
        const double nb = double(ch.rows), total = count + nb;
        for (std::size_t j = 0; j < size(d_); ++j) {
          const double delta = moments_host[j] - mean[j];
          mean[j] += delta * nb / total;
          m2[j] += moments_host[size(d_) + j] + delta * delta * count * nb / total;
        }
        count = total;
      }
    });
    updater_.set_scales(max_abs, weighted());
    if (params_.tol > 0) {
      double variance = 0;
      for (double v : m2) variance += v / double(n_);
      tol_scaled_ = params_.tol * variance / double(d_);
    }
    stop.record(stream);
    setup_ms_ = setup_ms_pending_ = stop.ms_since(start);
  }

  /// The initial centroids: given, random rows (fit's rows), or k-means++ / k-means|| on the plan's
  /// sample of rows (all of X when it fits: fit's then).
  void init(std::uint64_t seed, const std::vector<T>& initial_centroids) {
    const cudaStream_t stream = ctx_.stream();
    const Init init = resolve_init(params_.init, k_);
    if (init == Init::given) {
      c_.copy_from(initial_centroids);
      return;
    }
    if (init == Init::random) {
      const std::vector<std::int64_t> rows = detail::random_rows(n_, k_, seed);
      std::vector<T> c(size(k_ * d_));
      for (std::size_t i = 0; i < rows.size(); ++i)
        std::memcpy(c.data() + i * size(d_), x_ + rows[i] * d_, size(d_) * sizeof(T));
      c_.copy_from(c);
      return;
    }
    const std::int64_t m = plan_.init_sample_rows;
    DeviceBuffer<T> sample(size(m * d_)), norms(size(m));
    if (m == n_) {
      SKINNY_CUDA_TRY(cudaMemcpy(sample.data(), x_, sample.bytes(), cudaMemcpyHostToDevice));
    } else {
      const std::vector<std::int64_t> rows = detail::stratified_rows(n_, m, seed);
      std::vector<T> gathered(size(m * d_));
      for (std::size_t i = 0; i < rows.size(); ++i)
        std::memcpy(gathered.data() + i * size(d_), x_ + rows[i] * d_, size(d_) * sizeof(T));
      sample.copy_from(gathered);
    }
    detail::row_sq_norms(sample.data(), m, d_, norms.data(), stream);
    if (init == Init::kmeans_plus_plus)
      detail::init_kmeans_plus_plus(ctx_, sample.data(), m, d_, k_, seed, norms.data(), c_.data(), params_.init_progress);
    else
      detail::init_kmeans_parallel(ctx_, sample.data(), m, d_, k_, seed, params_.init_oversampling,
                                   params_.init_rounds, norms.data(), c_.data(), params_.init_progress);
    // sample and norms are freed on return: cudaFree waits for the work that uses them.
  }

  /// Where the update's empty-cluster moves find the points: distances and labels on the device (all
  /// points) or in page-locked host memory (per chunk), rows and weights in host memory.
  typename detail::Updater<T>::Points host_points() {
    typename detail::Updater<T>::Points hp;
    hp.x = x_;
    hp.x_on_device = false;
    hp.weights = weighted() ? w_.data() : nullptr;
    if (resident_) {
      hp.fetch = [this](std::vector<T>& dist, std::vector<std::int32_t>& lab) {
        dist = mindist_.to_host();
        lab = labels_.to_host();
      };
      hp.relabel = [this](std::int64_t point, std::int32_t label) {
        SKINNY_CUDA_TRY(cudaMemcpy(labels_.data() + point, &label, sizeof label, cudaMemcpyHostToDevice));
      };
    } else {
      hp.fetch = [this](std::vector<T>& dist, std::vector<std::int32_t>& lab) {
        dist.assign(mindist_host_.data(), mindist_host_.data() + n_);
        lab.assign(labels_host_.data(), labels_host_.data() + n_);
      };
      hp.relabel = [this](std::int64_t point, std::int32_t label) { labels_host_[size(point)] = label; };
    }
    return hp;
  }

  Context& ctx_;
  const T* x_;
  std::int64_t n_, d_, k_;
  const Params& params_;
  const std::vector<double>& w_;
  StreamPlan plan_;
  bool fused_, narrow_, resident_;
  std::int64_t gemm_rows_;
  DeviceBuffer<T> xnorm_, mindist_, c_, c_next_, cnorm_;  // xnorm_, mindist_: all points, or one chunk's
  DeviceBuffer<std::int32_t> labels_, prev_labels_;       // the same; prev_labels_ only for all points
  DeviceBuffer<int> counts_;
  DeviceBuffer<unsigned long long> changed_;
  PinnedBuffer<unsigned long long> changed_host_;
  DeviceBuffer<double> weights_;  // all points' weights, when the per-point arrays stay on the device
  DeviceBuffer<T> g_;             // the GEMM path's cross terms
  DeviceBuffer<double> part_scratch_;
  PinnedBuffer<double> parts_host_;         // per chunk: its inertia
  PinnedBuffer<std::int32_t> labels_host_;  // per chunk: all points' labels
  PinnedBuffer<T> mindist_host_;            // per chunk: all points' distances (for empty clusters)
  ChunkStream stream_;
  detail::Updater<T> updater_;
  detail::AsyncSum inertia_sum_;
  std::vector<std::array<std::unique_ptr<CudaEvent>, 4>> chunk_events_;  // per chunk: assignment, bookkeeping, sums
  double tol_scaled_ = 0, setup_ms_ = 0, setup_ms_pending_ = 0;
};

}  // namespace

template <class T>
StreamResult<T> fit_host(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const Params& params,
                         const std::vector<T>& initial_centroids, const std::vector<double>& sample_weight,
                         const StreamOptions& options) {
  if (x == nullptr) throw std::invalid_argument("kmeans: the data pointer is null");
  // fit's checks; the shapes are checked for the device buffers the chunks go to (X's own alignment
  // does not matter here).
  detail::check_fit(placeholder<T>(), n, d, params, initial_centroids, sample_weight);
  if (params.protect)
    throw std::invalid_argument("kmeans: protect is not available for a fit streamed from host memory yet; fit data "
                                "that is on the GPU");
  if (options.host_threads < 0)
    throw std::invalid_argument("kmeans: host_threads = " + std::to_string(options.host_threads) +
                                " must be >= 0 (0: min(8, cores))");
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, x) != cudaSuccess) cudaGetLastError();  // pageable memory on old runtimes
  if (attr.type == cudaMemoryTypeDevice)
    throw std::invalid_argument("kmeans: fit_host streams X from host memory, and this X is in device memory: use fit");

  const bool narrow = detail::narrow_assignment(d, params.k, params.math, params.backend, false);
  const bool fused =
      !narrow && detail::uses_nearest(ctx, placeholder<T>(), n, d, params.k, params.backend, params.math);
  detail::StreamProblem problem;
  problem.n = n;
  problem.d = d;
  problem.k = params.k;
  problem.elem_bytes = sizeof(T);
  problem.weighted = !sample_weight.empty();
  problem.fused = fused || narrow;  // no GEMM's cross terms (narrow: the plan's nearest scratch to spare)
  problem.init = resolve_init(params.init, params.k);
  problem.init_oversampling = params.init_oversampling;
  problem.init_rounds = params.init_rounds;
  const std::size_t available = detail::available_device_memory();
  const std::size_t budget = options.max_gpu_memory > 0 ? std::min(options.max_gpu_memory, available) : available;
  const StreamPlan plan = detail::plan_stream(problem, budget, options.chunk_rows);

  StreamLloyd<T> lloyd(ctx, x, n, d, params, sample_weight, plan, fused, narrow, options);
  const int runs = params.init == Init::given ? 1 : params.n_init;
  StreamResult<T> best;
  for (int run = 0; run < runs; ++run) {
    const std::uint64_t seed = run == 0 ? params.seed : splitmix64(params.seed + static_cast<std::uint64_t>(run));
    StreamResult<T> r = lloyd.run(seed, initial_centroids);
    if (run == 0 || r.inertia < best.inertia) best = std::move(r);
  }
  best.stream.plan = plan;
  best.stream.pinned_input = lloyd.pinned_input();
  best.stream.host_threads = lloyd.host_threads();
  best.stream.setup_ms = lloyd.setup_ms();
  return best;
}

template <class T>
std::size_t fit_device_bytes(std::int64_t n, std::int64_t d, const Params& params) {
  return detail::fit_device_bytes(n, d, params.k, sizeof(T), resolve_init(params.init, params.k));
}

template <class T>
bool fits_on_device(std::int64_t n, std::int64_t d, const Params& params) {
  return fit_device_bytes<T>(n, d, params) <= detail::available_device_memory();
}

#define SKINNY_KMEANS_FIT_HOST(T)                                                                               \
  template StreamResult<T> fit_host(Context&, const T*, std::int64_t, std::int64_t, const Params&,               \
                                    const std::vector<T>&, const std::vector<double>&, const StreamOptions&);   \
  template std::size_t fit_device_bytes<T>(std::int64_t, std::int64_t, const Params&);                           \
  template bool fits_on_device<T>(std::int64_t, std::int64_t, const Params&);
SKINNY_KMEANS_FIT_HOST(float)
SKINNY_KMEANS_FIT_HOST(double)

}  // namespace skinny::kmeans
