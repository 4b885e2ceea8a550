// fit over a communicator (distributed.hpp): every rank assigns its shard with fit's assignment step,
// adds its points into the exact integer cluster sums, and one group of allreduces per iteration adds
// the ranks' sums, weight sums, counts, inertia and changed labels; then every rank computes the same
// means from the same integers. The inertia and the tol scale are exact fixed-point sums too
// (exact_sums.hpp), so that no result depends on how the rows are split. Empty clusters take the
// globally farthest points (relocation.hpp); the rows that move, and the rows of the initialisation,
// reach every rank through an integer allreduce of a zeroed buffer that only their owners filled.
#include "detail.hpp"
#include "exact_sums.hpp"
#include "fixed_point.hpp"
#include "init.hpp"
#include "lloyd_hooks.hpp"
#include "relocation.hpp"

#include <skinny/gemm/cuda_event.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/pinned_buffer.hpp>
#include <skinny/gemm/splitmix64.hpp>
#include <skinny/kmeans/distributed.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace skinny::kmeans {
namespace {

using u64 = unsigned long long;  // the sums' type (CUDA's 64-bit atomics)
static_assert(sizeof(u64) == sizeof(std::uint64_t), "64-bit words");

/// The communicator's 64-bit words are std::uint64_t; the same bits.
std::uint64_t* words(u64* p) { return reinterpret_cast<std::uint64_t*>(p); }

/// What every rank tells the others before any work (trivially copyable: it crosses ranks as bytes).
struct ShardInfo {
  std::int64_t row_offset, n_local, n_total, d, k, max_iter, init;
  std::uint64_t seed;
  std::int64_t refused;  ///< 1: this rank's arguments were refused (its own exception says why)
  std::int64_t fused;    ///< its distances go through gemm::nearest
};

/// dst row dst_rows[j] = src row src_rows[j] (d values) for j < count.
template <class T>
__global__ void gather_rows_kernel(const T* __restrict__ src, std::int64_t d, const std::int64_t* __restrict__ src_rows,
                                   const std::int64_t* __restrict__ dst_rows, std::int64_t count, T* __restrict__ dst) {
  const std::int64_t total = count * d;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t j = e / d, col = e - j * d;
    dst[dst_rows[j] * d + col] = src[src_rows[j] * d + col];
  }
}

template <class U>
void copy_to_host(U* dst, const U* src, std::size_t count, cudaStream_t stream) {
  if (count == 0) return;
  SKINNY_CUDA_TRY(cudaMemcpyAsync(dst, src, count * sizeof(U), cudaMemcpyDeviceToHost, stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
}

template <class U>
void copy_to_device(U* dst, const U* src, std::size_t count, cudaStream_t stream) {
  if (count == 0) return;
  SKINNY_CUDA_TRY(cudaMemcpyAsync(dst, src, count * sizeof(U), cudaMemcpyHostToDevice, stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));  // src is host memory the caller may free next
}

std::vector<u64> bits_of(const std::vector<double>& v) {
  std::vector<u64> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(double));
  return out;
}

std::vector<double> doubles_of(const std::vector<u64>& v) {
  std::vector<double> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(double));
  return out;
}

/// This rank's own checks (throws std::invalid_argument naming the values).
template <class T>
void check_local(const Communicator& comm, const T* x, std::int64_t n_local, std::int64_t n_total,
                 std::int64_t row_offset, std::int64_t d, const Params& p, const std::vector<T>& initial,
                 const std::vector<double>& weights) {
  const std::string who = "kmeans (rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) + "): ";
  if (x == nullptr) throw std::invalid_argument(who + "the data pointer is null");
  if (n_total < 1 || d < 1)
    throw std::invalid_argument(who + "need n_total >= 1 points of d >= 1 dimensions (got n_total = " +
                                std::to_string(n_total) + ", d = " + std::to_string(d) + ")");
  if (n_total > INT32_MAX)
    throw std::invalid_argument(who + "n_total = " + std::to_string(n_total) + " exceeds 2^31 - 1 (labels are 32-bit)");
  if (n_local < 1 || row_offset < 0 || row_offset + n_local > n_total)
    throw std::invalid_argument(who + "rows " + std::to_string(row_offset) + " .. " + std::to_string(row_offset + n_local) +
                                " (n_local = " + std::to_string(n_local) + ") are not a non-empty range of the n_total = " +
                                std::to_string(n_total) + " rows");
  if (p.k < 1 || p.k > n_total)
    throw std::invalid_argument(who + "need 1 <= k <= n_total (got k = " + std::to_string(p.k) + ", n_total = " +
                                std::to_string(n_total) + ")");
  detail::check_fit_params(p);
  if (p.protect) throw std::invalid_argument(who + "protect is not available across GPUs yet; fit on one GPU");
  detail::check_distance_backend(x, n_local, d, p.k, p.backend);
  if (p.init == Init::given && (comm.rank() == 0 || !initial.empty())) detail::check_centroids(initial, p.k, d);
  if (!weights.empty() && static_cast<std::int64_t>(weights.size()) != n_local)
    throw std::invalid_argument(who + "sample_weight holds " + std::to_string(weights.size()) + " values for this shard's " +
                                std::to_string(n_local) + " points");
  for (std::size_t i = 0; i < weights.size(); ++i)
    if (!(weights[i] > 0) || !std::isfinite(weights[i]))
      throw std::invalid_argument(who + "sample_weight of row " + std::to_string(row_offset + std::int64_t(i)) + " = " +
                                  std::to_string(weights[i]) + " must be finite and > 0");
}

/// Every rank's ShardInfo; throws on every rank when any refused, disagrees about the problem, or the
/// shards do not tile 0 .. n_total - 1 in rank order.
std::vector<ShardInfo> agree(Communicator& comm, const ShardInfo& mine, const std::string& my_error, cudaStream_t stream) {
  const std::size_t ranks = static_cast<std::size_t>(comm.size());
  DeviceBuffer<unsigned char> send(sizeof(ShardInfo)), recv(sizeof(ShardInfo) * ranks);
  copy_to_device(send.data(), reinterpret_cast<const unsigned char*>(&mine), sizeof mine, stream);
  comm.allgather(send.data(), recv.data(), sizeof(ShardInfo), stream);
  std::vector<ShardInfo> all(ranks);
  copy_to_host(reinterpret_cast<unsigned char*>(all.data()), recv.data(), recv.size(), stream);
  if (mine.refused) throw std::invalid_argument(my_error);
  for (std::size_t r = 0; r < ranks; ++r)
    if (all[r].refused)
      throw std::invalid_argument("kmeans: rank " + std::to_string(r) + " refused its arguments (its error says why)");
  const ShardInfo& first = all[0];
  std::int64_t next = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    const ShardInfo& s = all[r];
    if (s.n_total != first.n_total || s.d != first.d || s.k != first.k || s.max_iter != first.max_iter ||
        s.init != first.init || s.seed != first.seed)
      throw std::invalid_argument(
          "kmeans: rank " + std::to_string(r) + " was given n_total = " + std::to_string(s.n_total) + ", d = " +
          std::to_string(s.d) + ", k = " + std::to_string(s.k) + ", max_iter = " + std::to_string(s.max_iter) +
          ", init " + std::to_string(s.init) + ", seed " + std::to_string(s.seed) + "; rank 0: " +
          std::to_string(first.n_total) + ", " + std::to_string(first.d) + ", " + std::to_string(first.k) + ", " +
          std::to_string(first.max_iter) + ", " + std::to_string(first.init) + ", " + std::to_string(first.seed));
    if (s.row_offset != next)
      throw std::invalid_argument("kmeans: rank " + std::to_string(r) + " holds rows from " + std::to_string(s.row_offset) +
                                  ", but the ranks before it end at row " + std::to_string(next) +
                                  " (shards must follow the ranks' order without gaps: see shard_rows)");
    next += s.n_local;
    if (s.fused != first.fused)
      throw std::invalid_argument("kmeans: rank " + std::to_string(r) + (s.fused ? " can" : " cannot") +
                                  " fuse the distances with the argmin (gemm::nearest) and rank 0 " +
                                  (first.fused ? "can" : "cannot") +
                                  ": give every rank a 16-byte aligned shard, or a backend other than automatic");
  }
  if (next != first.n_total)
    throw std::invalid_argument("kmeans: the shards hold " + std::to_string(next) + " rows, n_total is " +
                                std::to_string(first.n_total));
  return all;
}

/// One fit's shard over the ranks, and what every run from a seed shares (norms, weights, scales, tol).
template <class T>
class DistributedLloyd {
 public:
  DistributedLloyd(Context& ctx, Communicator& comm, const T* x, std::int64_t n_local, std::int64_t n_total,
                   std::int64_t row_offset, std::int64_t d, const Params& params, const std::vector<double>& weights,
                   std::unique_ptr<detail::ShardAssigner<T>> assign)
      : ctx_(ctx), comm_(comm), x_(x), n_(n_local), n_total_(n_total), offset_(row_offset), d_(d), k_(params.k),
        params_(params), xnorm_(static_cast<std::size_t>(n_local)), mindist_(static_cast<std::size_t>(n_local)),
        c_(static_cast<std::size_t>(k_ * d)), c_next_(static_cast<std::size_t>(k_ * d)),
        cnorm_(static_cast<std::size_t>(k_)), labels_(static_cast<std::size_t>(n_local)),
        prev_labels_(static_cast<std::size_t>(n_local)), counts_(static_cast<std::size_t>(k_)),
        counts_host_(static_cast<std::size_t>(k_)), small_(3), small_host_(3), max_(1), max_host_(1),
        weights_(weights), assign_(std::move(assign)), updater_(n_local, d, k_) {
    const cudaStream_t stream = ctx.stream();
    CudaEvent start, stop;
    start.record(stream);
    detail::row_sq_norms(x, n_local, d, xnorm_.data(), stream);
    // Column maxima over all ranks: of |w x| for the sums' scales, of |x| for the variance's.
    const bool weighted = !weights.empty();
    const std::vector<double> max_w = updater_.column_max_abs(x, n_local, this->weights(), stream);
    const std::vector<double> max_x = weighted ? updater_.column_max_abs(x, n_local, nullptr, stream) : max_w;
    updater_.set_scales(max_w, weighted);  // this shard's scales, for the warm-up; the global ones follow
    warm_up();
    std::vector<u64> bits = bits_of(max_w);
    const std::vector<u64> bits_x = bits_of(max_x);
    bits.insert(bits.end(), bits_x.begin(), bits_x.end());
    DeviceBuffer<u64> bits_dev(bits.size());
    copy_to_device(bits_dev.data(), bits.data(), bits.size(), stream);
    comm.allreduce_max(words(bits_dev.data()), bits.size(), stream);
    copy_to_host(bits.data(), bits_dev.data(), bits.size(), stream);
    const std::vector<double> maxima = doubles_of(bits);
    updater_.set_scales(std::vector<double>(maxima.begin(), maxima.begin() + (d + 1)), weighted);
    if (params.tol > 0)
      tol_scaled_ = params.tol * mean_feature_variance(std::vector<double>(maxima.begin() + (d + 1), maxima.end()));
    stop.record(stream);
    shared_init_ms_ = stop.ms_since(start);
  }

  DistributedResult<T> run(std::uint64_t seed, const std::vector<T>& initial_centroids) {
    const cudaStream_t stream = ctx_.stream();
    DistributedResult<T> result;
    result.k = k_;
    result.d = d_;
    result.seed = seed;
    result.column_copy = assign_->column_copy();
    result.row_offset = offset_;
    result.ranks = comm_.size();
    result.communicator = comm_.name();
    result.distances = assign_->narrow() ? "narrow rows"
                       : assign_->few()  ? "few-clusters"
                       : assign_->fused() ? "nearest"
                                          : "gemm";
    CudaEvent start, stop;
    start.record(stream);
    initialise(seed, initial_centroids);
    stop.record(stream);
    result.timing.init_ms = stop.ms_since(start) + shared_init_ms_;
    shared_init_ms_ = 0;

    start.record(stream);  // as fit: one assignment carries the one-time costs (plans, kernel loading)
    assign();
    stop.record(stream);
    result.timing.setup_ms = stop.ms_since(start);

    CudaEvent update_start, comm_start, comm_mid, sums_start, comm_end;
    for (int it = 1; it <= params_.max_iter; ++it) {
      start.record(stream);
      std::swap(labels_, prev_labels_);
      assign();
      SKINNY_CUDA_TRY(cudaMemsetAsync(small_.data(), 0, small_.size() * sizeof(u64), stream));
      SKINNY_CUDA_TRY(cudaMemsetAsync(max_.data(), 0, sizeof(u64), stream));
      detail::max_weighted_bits(mindist_.data(), weights(), n_, max_.data(), stream);
      if (it > 1) detail::count_changes(labels_.data(), prev_labels_.data(), n_, small_.data() + 2, stream);
      update_start.record(stream);
      comm_start.record(stream);
      comm_.allreduce_max(words(max_.data()), 1, stream);  // the inertia's fixed-point scale needs the global maximum
      comm_mid.record(stream);
      detail::fixed_sum(mindist_.data(), weights(), n_, max_.data(), small_.data(), stream);
      updater_.begin(stream);
      updater_.accumulate(x_, weights(), labels_.data(), n_, stream);
      sums_start.record(stream);
      comm_.group_begin();
      comm_.allreduce_sum(words(updater_.sums()), static_cast<std::size_t>(updater_.sum_words()), stream);
      if (updater_.weighted()) comm_.allreduce_sum(words(updater_.weight_sums()), static_cast<std::size_t>(2 * k_), stream);
      comm_.allreduce_sum(counts_.data(), static_cast<std::size_t>(k_), stream);
      comm_.allreduce_sum(words(small_.data()), small_.size(), stream);
      comm_.group_end();
      comm_end.record(stream);
      small_host_.copy_from_device_async(small_.data(), stream);
      max_host_.copy_from_device_async(max_.data(), stream);
      const double shift = finish();  // waits for the stream
      stop.record(stream);
      double max_value = 0;
      std::memcpy(&max_value, max_host_.data(), sizeof max_value);
      const double inertia = detail::fixed_sum_value(small_host_[0], small_host_[1], max_value);
      const u64 changed = small_host_[2];
      std::swap(c_, c_next_);
      const auto [gemm_ms, argmin_ms] = assign_->phase_ms();
      const detail::IterationTimes times{gemm_ms, argmin_ms, stop.ms_since(update_start), stop.ms_since(start)};
      result.allreduce_iteration_ms.push_back(comm_mid.ms_since(comm_start) + comm_end.ms_since(sums_start));
      // `changed` is the same on every rank (the count is global), and so is the decision.
      if (detail::end_iteration(result, params_, it, times, inertia, shift, changed, tol_scaled_)) break;
    }
    // As fit: labels and inertia of the centroids returned, the inertia from direct differences.
    assign();
    detail::label_sq_distances(x_, n_, d_, c_.data(), labels_.data(), mindist_.data(), stream);
    result.inertia = exact_inertia();
    result.labels.resize(static_cast<std::size_t>(n_));
    copy_to_host(result.labels.data(), labels_.data(), result.labels.size(), stream);
    result.centroids.resize(c_.size());
    copy_to_host(result.centroids.data(), c_.data(), c_.size(), stream);
    return result;
  }

 private:
  const double* weights() const { return weights_.size() > 0 ? weights_.data() : nullptr; }

  void assign() {
    detail::row_sq_norms(c_.data(), k_, d_, cnorm_.data(), ctx_.stream());
    assign_->run(c_.data(), xnorm_.data(), cnorm_.data(), labels_.data(), mindist_.data(), counts_.data());
  }

  /// One pass of the iteration's kernels with zero centroids, before the first collective that could
  /// still be running on this device when they run again: CUDA loads kernels lazily (the default since
  /// 12.2), and loading one may wait for the device, where an NCCL kernel waits for the other ranks, whose
  /// threads (one process, several GPUs) may wait on this one. It also makes the GEMM's one-time planning
  /// (TSM2 times its candidates) happen here, not between the ranks' collectives.
  void warm_up() {
    const cudaStream_t stream = ctx_.stream();
    SKINNY_CUDA_TRY(cudaMemsetAsync(c_.data(), 0, c_.bytes(), stream));
    SKINNY_CUDA_TRY(cudaMemsetAsync(prev_labels_.data(), 0, prev_labels_.bytes(), stream));
    assign();
    SKINNY_CUDA_TRY(cudaMemsetAsync(small_.data(), 0, small_.size() * sizeof(u64), stream));
    SKINNY_CUDA_TRY(cudaMemsetAsync(max_.data(), 0, sizeof(u64), stream));
    detail::max_weighted_bits(mindist_.data(), weights(), n_, max_.data(), stream);
    detail::count_changes(labels_.data(), prev_labels_.data(), n_, small_.data() + 2, stream);
    detail::fixed_sum(mindist_.data(), weights(), n_, max_.data(), small_.data(), stream);
    updater_.begin(stream);
    updater_.accumulate(x_, weights(), labels_.data(), n_, stream);
    updater_.means(counts_.data(), c_.data(), c_next_.data(), stream);  // waits
    detail::label_sq_distances(x_, n_, d_, c_.data(), labels_.data(), mindist_.data(), stream);
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  }

  /// Every rank gets the rows `rows` (global indices) of X at out (rows.size() x d): the owners write
  /// theirs into a zeroed buffer and an integer allreduce adds them (each byte is non-zero on one rank
  /// at most, so the sum is the bits themselves, the sign of a zero included).
  DeviceBuffer<u64> gather_rows(const std::vector<std::int64_t>& rows) {
    const cudaStream_t stream = ctx_.stream();
    const std::size_t bytes = rows.size() * static_cast<std::size_t>(d_) * sizeof(T);
    DeviceBuffer<u64> out((bytes + sizeof(u64) - 1) / sizeof(u64));
    SKINNY_CUDA_TRY(cudaMemsetAsync(out.data(), 0, out.bytes(), stream));
    std::vector<std::int64_t> src, dst;
    for (std::size_t j = 0; j < rows.size(); ++j)
      if (rows[j] >= offset_ && rows[j] < offset_ + n_) {
        src.push_back(rows[j] - offset_);
        dst.push_back(static_cast<std::int64_t>(j));
      }
    if (!src.empty()) {
      DeviceBuffer<std::int64_t> src_dev(src.size()), dst_dev(dst.size());
      copy_to_device(src_dev.data(), src.data(), src.size(), stream);
      copy_to_device(dst_dev.data(), dst.data(), dst.size(), stream);
      const std::int64_t total = static_cast<std::int64_t>(src.size()) * d_;
      const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((total + 255) / 256, 4096));
      gather_rows_kernel<T><<<blocks, 256, 0, stream>>>(x_, d_, src_dev.data(), dst_dev.data(),
                                                        static_cast<std::int64_t>(src.size()), reinterpret_cast<T*>(out.data()));
      SKINNY_CHECK_LAUNCH();
      SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));  // src_dev and dst_dev go out of scope
    }
    comm_.allreduce_sum(words(out.data()), out.size(), stream);
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));  // no collective in flight while rank 0 seeds (warm_up says why)
    return out;
  }

  /// The initial centroids into c_, the same bits on every rank and for any number of ranks.
  void initialise(std::uint64_t seed, const std::vector<T>& initial) {
    const cudaStream_t stream = ctx_.stream();
    const std::size_t kd = static_cast<std::size_t>(k_ * d_);
    const Init init = resolve_init(params_.init, k_);
    if (init == Init::given) {
      if (comm_.rank() == 0) copy_to_device(c_.data(), initial.data(), kd, stream);
      comm_.broadcast(c_.data(), kd * sizeof(T), 0, stream);
      return;
    }
    if (init == Init::random) {  // fit's rows: random_rows of all n, whoever holds them
      const DeviceBuffer<u64> rows = gather_rows(detail::random_rows(n_total_, k_, seed));
      SKINNY_CUDA_TRY(cudaMemcpyAsync(c_.data(), rows.data(), kd * sizeof(T), cudaMemcpyDeviceToDevice, stream));
      return;
    }
    // k-means++ and k-means|| on rank 0 over a sample of rows gathered there (all rows when they fit
    // kInitSampleMaxBytes: then fit's result), then broadcast: the seeding's GEMMs run on one GPU only,
    // so no rank can disagree about them.
    const std::vector<std::int64_t> sample = init_sample(n_total_, d_, k_, sizeof(T), seed);
    const DeviceBuffer<u64> rows = gather_rows(sample);
    if (comm_.rank() == 0) {
      const std::int64_t s = static_cast<std::int64_t>(sample.size());
      const T* xs = reinterpret_cast<const T*>(rows.data());
      DeviceBuffer<T> xs_norm(static_cast<std::size_t>(s));
      detail::row_sq_norms(xs, s, d_, xs_norm.data(), stream);
      if (init == Init::kmeans_plus_plus)
        detail::init_kmeans_plus_plus(ctx_, xs, s, d_, k_, seed, xs_norm.data(), c_.data(), params_.init_progress);
      else
        detail::init_kmeans_parallel(ctx_, xs, s, d_, k_, seed, params_.init_oversampling, params_.init_rounds,
                                     xs_norm.data(), c_.data(), params_.init_progress);
      SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));  // before rows and xs_norm are freed
    }
    comm_.broadcast(c_.data(), kd * sizeof(T), 0, stream);
  }

  /// Means from the global sums and counts; empty clusters first take the globally farthest points.
  /// Waits for the stream; returns the shift.
  double finish() {
    const cudaStream_t stream = ctx_.stream();
    counts_host_.copy_from_device_async(counts_.data(), stream);
    const double shift = updater_.means(counts_.data(), c_.data(), c_next_.data(), stream);  // waits
    std::vector<std::int64_t> empty;
    for (std::int64_t c = 0; c < k_; ++c)
      if (counts_host_[static_cast<std::size_t>(c)] == 0) empty.push_back(c);
    if (empty.empty()) return shift;
    return relocate(empty);
  }

  double relocate(const std::vector<std::int64_t>& empty) {
    const cudaStream_t stream = ctx_.stream();
    const std::size_t m = empty.size();
    // This rank's farthest m points.
    std::vector<T> dist(static_cast<std::size_t>(n_));
    std::vector<std::int32_t> lab(static_cast<std::size_t>(n_));
    std::vector<double> w(weights() ? static_cast<std::size_t>(n_) : 0);
    copy_to_host(dist.data(), mindist_.data(), dist.size(), stream);
    copy_to_host(lab.data(), labels_.data(), lab.size(), stream);
    copy_to_host(w.data(), weights_.data(), w.size(), stream);
    std::vector<detail::RelocationCandidate> mine(static_cast<std::size_t>(n_));
    for (std::int64_t i = 0; i < n_; ++i) {
      const std::size_t u = static_cast<std::size_t>(i);
      mine[u] = {static_cast<double>(dist[u]), offset_ + i, lab[u], comm_.rank(), w.empty() ? 1.0 : w[u]};
    }
    mine = detail::padded(detail::farthest(std::move(mine), m), m);
    // Everyone's proposals; the same global choice on every rank.
    const std::size_t bytes = m * sizeof(detail::RelocationCandidate);
    DeviceBuffer<unsigned char> send(bytes), recv(bytes * static_cast<std::size_t>(comm_.size()));
    copy_to_device(send.data(), reinterpret_cast<const unsigned char*>(mine.data()), bytes, stream);
    comm_.allgather(send.data(), recv.data(), bytes, stream);
    std::vector<detail::RelocationCandidate> all(m * static_cast<std::size_t>(comm_.size()));
    copy_to_host(reinterpret_cast<unsigned char*>(all.data()), recv.data(), recv.size(), stream);
    const std::vector<detail::RelocationCandidate> chosen = detail::farthest(std::move(all), m);

    std::vector<std::int64_t> rows;
    for (const auto& c : chosen) rows.push_back(c.index);
    const DeviceBuffer<u64> moved = gather_rows(rows);
    const T* moved_rows = reinterpret_cast<const T*>(moved.data());
    std::vector<int> counts(counts_host_.data(), counts_host_.data() + k_);
    for (std::size_t e = 0; e < chosen.size(); ++e) {
      const auto& c = chosen[e];
      const std::int64_t to = empty[e];
      updater_.move_point(moved_rows + static_cast<std::int64_t>(e) * d_, c.weight, c.label, to, stream);
      --counts[static_cast<std::size_t>(c.label)];
      counts[static_cast<std::size_t>(to)] = 1;
      if (c.rank == comm_.rank()) {
        const std::int32_t label = static_cast<std::int32_t>(to);
        copy_to_device(labels_.data() + (c.index - offset_), &label, 1, stream);
      }
    }
    copy_to_device(counts_.data(), counts.data(), counts.size(), stream);
    return updater_.means(counts_.data(), c_.data(), c_next_.data(), stream);
  }

  /// Sum of w_i mindist_i over all ranks' points, exactly (waits).
  double exact_inertia() {
    const cudaStream_t stream = ctx_.stream();
    SKINNY_CUDA_TRY(cudaMemsetAsync(small_.data(), 0, small_.size() * sizeof(u64), stream));
    SKINNY_CUDA_TRY(cudaMemsetAsync(max_.data(), 0, sizeof(u64), stream));
    detail::max_weighted_bits(mindist_.data(), weights(), n_, max_.data(), stream);
    comm_.allreduce_max(words(max_.data()), 1, stream);
    detail::fixed_sum(mindist_.data(), weights(), n_, max_.data(), small_.data(), stream);
    comm_.allreduce_sum(words(small_.data()), 2, stream);
    small_host_.copy_from_device_async(small_.data(), stream);
    max_host_.copy_from_device_async(max_.data(), stream);
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
    double max_value = 0;
    std::memcpy(&max_value, max_host_.data(), sizeof max_value);
    return detail::fixed_sum_value(small_host_[0], small_host_[1], max_value);
  }

  /// Mean over features of each column's population variance over all ranks' rows, from exact sums:
  /// the column sums, then the sums of squared deviations from the means (max_x: each column's max |x|).
  double mean_feature_variance(const std::vector<double>& max_x) {
    const cudaStream_t stream = ctx_.stream();
    const std::size_t d = static_cast<std::size_t>(d_);
    const auto column_sums = [&](const std::vector<double>& scales, const double* center_dev) {
      DeviceBuffer<double> scale_dev(scales);
      DeviceBuffer<u64> hi_lo(2 * d);
      SKINNY_CUDA_TRY(cudaMemsetAsync(hi_lo.data(), 0, hi_lo.bytes(), stream));
      detail::column_fixed_sums(x_, n_, d_, center_dev, scale_dev.data(), hi_lo.data(), hi_lo.data() + d, stream);
      comm_.allreduce_sum(words(hi_lo.data()), hi_lo.size(), stream);
      std::vector<u64> host(2 * d);
      copy_to_host(host.data(), hi_lo.data(), host.size(), stream);
      std::vector<double> sums(d);
      for (std::size_t j = 0; j < d; ++j) sums[j] = detail::from_fixed(host[j], host[d + j], 1.0 / scales[j]);
      return sums;
    };
    std::vector<double> scales(d);
    for (std::size_t j = 0; j < d; ++j) scales[j] = detail::fixed_scale(max_x[j]);
    std::vector<double> mean = column_sums(scales, nullptr);
    for (std::size_t j = 0; j < d; ++j) {
      mean[j] /= static_cast<double>(n_total_);
      const double bound = max_x[j] + std::fabs(mean[j]);  // |x - mean| <= max |x| + |mean|
      scales[j] = detail::fixed_scale(bound * bound);
    }
    const DeviceBuffer<double> mean_dev(mean);
    const std::vector<double> sq = column_sums(scales, mean_dev.data());
    double total = 0;
    for (std::size_t j = 0; j < d; ++j) total += sq[j] / static_cast<double>(n_total_);
    return total / static_cast<double>(d);
  }

  Context& ctx_;
  Communicator& comm_;
  const T* x_;
  std::int64_t n_, n_total_, offset_, d_, k_;
  const Params& params_;
  DeviceBuffer<T> xnorm_, mindist_, c_, c_next_, cnorm_;
  DeviceBuffer<std::int32_t> labels_, prev_labels_;
  DeviceBuffer<int> counts_;
  PinnedBuffer<int> counts_host_;
  DeviceBuffer<u64> small_;  ///< inertia (high, low), changed labels
  PinnedBuffer<u64> small_host_;
  DeviceBuffer<u64> max_;    ///< the bits of the largest weighted distance
  PinnedBuffer<u64> max_host_;
  DeviceBuffer<double> weights_;
  std::unique_ptr<detail::ShardAssigner<T>> assign_;
  detail::Updater<T> updater_;
  double tol_scaled_ = 0, shared_init_ms_ = 0;
};

}  // namespace

RowRange shard_rows(std::int64_t n, int ranks, int rank) {
  if (ranks < 1 || rank < 0 || rank >= ranks || n < ranks)
    throw std::invalid_argument("shard_rows: need n >= ranks >= 1 and 0 <= rank < ranks (got n = " + std::to_string(n) +
                                ", ranks = " + std::to_string(ranks) + ", rank = " + std::to_string(rank) + ")");
  const std::int64_t base = n / ranks, extra = n % ranks;
  return {rank * base + std::min<std::int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

std::int64_t init_sample_rows(std::int64_t n, std::int64_t d, std::int64_t k, int elem_bytes) {
  const std::int64_t row_bytes = d * elem_bytes;
  if (n <= kInitSampleMaxBytes / row_bytes) return n;
  return std::min(n, std::max(kInitSampleMaxBytes / row_bytes, kInitSampleMinRowsPerCluster * k));
}

std::vector<std::int64_t> init_sample(std::int64_t n, std::int64_t d, std::int64_t k, int elem_bytes, std::uint64_t seed) {
  const std::int64_t s = init_sample_rows(n, d, k, elem_bytes);
  std::vector<std::int64_t> rows;
  if (s == n) {
    rows.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) rows[static_cast<std::size_t>(i)] = i;
    return rows;
  }
  rows = detail::random_rows(n, s, splitmix64(seed ^ 0x53414d504c45ull));
  std::sort(rows.begin(), rows.end());  // in row order, as the full set would be
  return rows;
}

template <class T>
DistributedResult<T> fit_distributed(Context& ctx, Communicator& comm, const T* x, std::int64_t n_local,
                                     std::int64_t n_total, std::int64_t row_offset, std::int64_t d, const Params& params,
                                     const std::vector<T>& initial_centroids, const std::vector<double>& sample_weight) {
  // Every rank checks its own arguments, then all learn whether any refused: a rank that threw alone
  // would leave the others waiting in a collective.
  ShardInfo mine{row_offset, n_local, n_total, d, params.k, params.max_iter, static_cast<std::int64_t>(params.init),
                 params.seed, 0, 0};
  std::string error;
  std::unique_ptr<detail::ShardAssigner<T>> assign;
  try {
    check_local(comm, x, n_local, n_total, row_offset, d, params, initial_centroids, sample_weight);
    assign = std::make_unique<detail::ShardAssigner<T>>(ctx, x, n_local, d, params.k, params.backend, params.math,
                                                        params.column_copy);
    mine.fused = assign->fused();
  } catch (const std::exception& e) {
    mine.refused = 1;
    error = e.what();
  }
  agree(comm, mine, error, ctx.stream());

  DistributedLloyd<T> lloyd(ctx, comm, x, n_local, n_total, row_offset, d, params, sample_weight, std::move(assign));
  const int runs = params.init == Init::given ? 1 : params.n_init;
  DistributedResult<T> best;
  for (int run = 0; run < runs; ++run) {
    const std::uint64_t seed = run == 0 ? params.seed : splitmix64(params.seed + static_cast<std::uint64_t>(run));
    DistributedResult<T> r = lloyd.run(seed, initial_centroids);
    if (run == 0 || r.inertia < best.inertia) best = std::move(r);  // the same choice on every rank: exact inertia
  }
  return best;
}

template <class T>
Blobs<T> make_blob_rows(Context& ctx, T* x, std::int64_t row_begin, std::int64_t rows, std::int64_t n, std::int64_t d,
                        int k, std::uint64_t seed, double stddev, double center_box) {
  if (x == nullptr || n < 1 || d < 1 || k < 1 || k > n || row_begin < 0 || rows < 1 || row_begin + rows > n)
    throw std::invalid_argument("make_blob_rows: need x != null, n, d >= 1, 1 <= k <= n and rows [" +
                                std::to_string(row_begin) + ", " + std::to_string(row_begin + rows) + ") within n = " +
                                std::to_string(n) + " (d = " + std::to_string(d) + ", k = " + std::to_string(k) + ")");
  if (!(stddev >= 0) || !(center_box > 0))
    throw std::invalid_argument("make_blob_rows: need stddev >= 0 and center_box > 0");
  DeviceBuffer<T> centers(static_cast<std::size_t>(k) * static_cast<std::size_t>(d));
  detail::blob_rows(x, centers.data(), row_begin, rows, d, k, seed, stddev, center_box, ctx.stream());
  Blobs<T> b;
  b.centers.resize(centers.size());
  copy_to_host(b.centers.data(), centers.data(), centers.size(), ctx.stream());
  b.labels.resize(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i)
    b.labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((row_begin + i) % k);
  return b;
}

#define SKINNY_KMEANS_FIT_DISTRIBUTED(T)                                                                           \
  template DistributedResult<T> fit_distributed(Context&, Communicator&, const T*, std::int64_t, std::int64_t,      \
                                                std::int64_t, std::int64_t, const Params&, const std::vector<T>&,   \
                                                const std::vector<double>&);                                       \
  template Blobs<T> make_blob_rows(Context&, T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int,      \
                                   std::uint64_t, double, double);
SKINNY_KMEANS_FIT_DISTRIBUTED(float)
SKINNY_KMEANS_FIT_DISTRIBUTED(double)

}  // namespace skinny::kmeans
