// Internal pieces of the Lloyd loop; callers have validated their inputs (see lloyd.cu).
#pragma once

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/pinned_buffer.hpp>
#include <skinny/kmeans/kmeans.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace skinny::kmeans::detail {

/// Multiprocessors of the current device: the grid sizes of the grid-stride kernels scale with it.
inline int multiprocessors() {
  int device = 0, sms = 0;
  SKINNY_CUDA_TRY(cudaGetDevice(&device));
  SKINNY_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

/// out[i] = ||x_i||^2 for the n rows of the n x d row-major x, accumulated in double (one warp per row).
template <class T>
void row_sq_norms(const T* x, std::int64_t n, std::int64_t d, compute_t<T>* out, cudaStream_t stream);

/// out (m x ldo, row-major) = the m x d rows of 16-bit x widened to float (the distances of 16-bit data
/// run on float rows).
template <class T>
void widen_rows(const T* x, std::int64_t m, std::int64_t d, float* out, std::int64_t ldo, cudaStream_t stream);

/// out[i] = ||x_i - c_{labels[i]}||^2 computed directly (differences squared and added in double), not by the
/// distance trick, whose cancellation costs accuracy: the inertia fit reports.
template <class T>
void label_sq_distances(const T* x, std::int64_t n, std::int64_t d, const compute_t<T>* c, const std::int32_t* labels,
                        compute_t<T>* out, cudaStream_t stream);

/// Mean over features of the population variance of each column of x (two passes, double).
template <class T>
double mean_feature_variance(const T* x, std::int64_t n, std::int64_t d, cudaStream_t stream);

/// Throws std::invalid_argument unless the host centroids `c` hold k x d finite values (fit's given
/// centroids, predict's and sq_distances' centroids).
template <class T>
void check_centroids(const std::vector<T>& c, std::int64_t k, std::int64_t d) {
  if (static_cast<std::int64_t>(c.size()) != k * d)
    throw std::invalid_argument("kmeans: centroids hold " + std::to_string(c.size()) + " values, need k x d = " +
                                std::to_string(k) + " x " + std::to_string(d));
  for (std::size_t i = 0; i < c.size(); ++i)
    if (!std::isfinite(static_cast<double>(c[i])))
      throw std::invalid_argument("kmeans: centroid " + std::to_string(i / std::size_t(d)) +
                                  " has a non-finite value at dimension " + std::to_string(i % std::size_t(d)));
}

/// Throws std::invalid_argument unless fit can run these arguments (fit's checks, lloyd.cu): x non-null,
/// the shape, the parameters, the weights, the given centroids and the backend. Other drivers of the
/// Lloyd loop (fit_host) validate through it, so that they refuse exactly what fit refuses.
template <class T>
void check_fit(const T* x, std::int64_t n, std::int64_t d, const Params& params, const std::vector<T>& initial_centroids,
               const std::vector<double>& sample_weight);

/// The form narrow_nearest takes for `math` on rows of d values: fast mode's ||c||^2 - 2 x.c where
/// route_rules.hpp's narrow_expanded_pays(d), else the squared differences (exact labels);
/// SKINNY_KMEANS_NARROW_FAST=0 keeps the differences (for comparisons).
gemm::Math narrow_form(gemm::Math math, std::int64_t d);

/// Whether fit's assignment runs through narrow_nearest: Algo::automatic, no Params::protect (its checks
/// ride on a GEMM's or the fused kernel's terms) and rows narrow enough for k and math (route_rules.hpp:
/// narrow_rows_pay).
bool narrow_assignment(std::int64_t d, std::int64_t k, gemm::Math math, gemm::Algo backend, bool protect);

/// Whether fit's assignment runs through gemm::nearest for these arguments (lloyd.cu decides): x only
/// needs its alignment, it is not read.
template <class T>
bool uses_nearest(const Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k, gemm::Algo backend,
                  gemm::Math math);

/// For the `rows` rows of x: out[j] = the mean of column j, out[d + j] = the sum of squared deviations
/// from that mean (double, a fixed order: deterministic). Chunks of a stream are merged on the host
/// (Chan et al.'s pairwise update). `scratch` holds kMomentScratchRows x d doubles.
constexpr std::int64_t kMomentScratchRows = 256;
template <class T>
void column_moments(const T* x, std::int64_t rows, std::int64_t d, double* scratch, double* out, cudaStream_t stream);

/// Rows of X per distance chunk: the chunk's cross terms (rows x k) stay within `budget` bytes; with the
/// default, ~32 MiB, the argmin reads them from L2 and the full n x k matrix is never written when it would
/// not fit there.
std::int64_t chunk_rows(std::int64_t n, std::int64_t k, int elem_bytes, std::int64_t budget = std::int64_t(32) << 20);

/// Leading dimension of rows of T as gemm::nearest reads them: whole 16-byte copies.
template <class T>
std::int64_t nearest_row(std::int64_t d) {
  constexpr std::int64_t per_copy = 16 / static_cast<std::int64_t>(sizeof(T));
  return (d + per_copy - 1) / per_copy * per_copy;
}

/// A copy of the n x d row-major x (device) with rows of ld >= d values, zeros past d (queued on stream):
/// rows as gemm::nearest reads them (nearest_row), where x's own are not.
template <class T>
DeviceBuffer<T> padded_rows(const T* x, std::int64_t n, std::int64_t d, std::int64_t ld, cudaStream_t stream) {
  DeviceBuffer<T> out(static_cast<std::size_t>(n * ld));
  SKINNY_CUDA_TRY(cudaMemsetAsync(out.data(), 0, out.bytes(), stream));
  SKINNY_CUDA_TRY(cudaMemcpy2DAsync(out.data(), ld * sizeof(T), x, d * sizeof(T), d * sizeof(T),
                                    static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice, stream));
  return out;
}

/// Device memory the library may still take: the free memory less a headroom for the CUDA context's and the
/// libraries' own allocations (the larger of 512 MiB and 5 % of the device).
std::size_t available_device_memory();

/// For `rows` points: g (rows x k, row-major) holds x.c; label = argmin_j ||x||^2 + ||c_j||^2 - 2 g_j
/// (ties: the lowest j), mindist = that distance clamped at 0, counts[label] += 1 (integer atomics:
/// the same result in any order).
template <class T>
void argmin(const T* g, std::int64_t rows, std::int64_t k, const T* xnorm, const T* cnorm, std::int32_t* labels,
            T* mindist, int* counts, cudaStream_t stream);

/// argmin for Params::protect: g (rows x (k + 1), row-major) holds x.c for the k centroids and, in column k,
/// x.s for their sum s. Each row's k terms must add up to its x.s within the row's bound (protect.hpp:
/// distance_bound with *centroid_scale and bound_factor); a row that does not adds 1 to *failures, and
/// *max_ratio (float bits) keeps the largest |difference| / bound of those that do. Labels and mindist as
/// argmin; no counts (count_labels once the chunks are verified).
template <class T>
void checked_argmin(const T* g, std::int64_t rows, std::int64_t k, const T* xnorm, const T* cnorm,
                    const double* centroid_scale, double bound_factor, std::int32_t* labels, T* mindist, int* failures,
                    unsigned* max_ratio, cudaStream_t stream);

/// Rows of a block check (protect.hpp): the points of one block of block_checked_argmin.
constexpr std::int64_t kCheckBlockRows = 256;

/// For block checks: X in chunks of `chunk` rows, each chunk in blocks of `block_rows` rows (the last
/// ones shorter); block b = chunk index x blocks per chunk + block within the chunk. totals (blocks x d):
/// each block's column sums, of the values as the TF32 tensor cores read them with as_tf32 (float
/// elements truncated to TF32); norms (blocks): the sum of its points' squared norms; in double.
template <class T>
void block_column_totals(const T* x, std::int64_t n, std::int64_t d, std::int64_t chunk, std::int64_t block_rows,
                         bool as_tf32, double* totals, double* norms, cudaStream_t stream);

/// argmin for k <= 32 with block checks (protect.hpp): g (rows x k) holds a chunk's terms; for each block
/// of kCheckBlockRows of its rows (global block block0 + its index) and each centroid j, sum_i g_ij must
/// equal carried[b * k + j] (the block's column totals . c_j) within factor sqrt(norms[b]) |c_j| (|c_j|^2:
/// cnorm). Failures and the largest passing ratio as checked_argmin; labels and mindist as argmin.
template <class T>
void block_checked_argmin(const T* g, std::int64_t rows, std::int64_t k, const T* xnorm, const T* cnorm,
                          const double* carried, const double* norms, std::int64_t block0, double factor,
                          std::int32_t* labels, T* mindist, int* failures, unsigned* max_ratio, cudaStream_t stream);

/// out[i] = x_i . s in double for the n x d rows of x (s: d doubles): the carried checksum term where the
/// distances are fused with the argmin (gemm::nearest returns each point's sum of cross terms).
template <class T>
void row_dots(const T* x, std::int64_t n, std::int64_t d, const double* s, double* out, cudaStream_t stream);

/// The checksum test of `rows` points: sums[i] (of their cross terms) against carried[i] within the bound of
/// each (as checked_argmin tests them).
template <class C>
void check_points(const double* sums, const double* carried, const C* xnorm, std::int64_t rows,
                  const double* centroid_scale, double bound_factor, int* failures, unsigned* max_ratio,
                  cudaStream_t stream);

/// The one-product checks of `rows` points (protect.hpp, DistanceGuard::set_one_product_blocks): the sum
/// of each block of kOneProductBlockRows of their row sums against carried[b] (the block's totals . s^),
/// within one_product_block_bound(norms[b], carried[b], *centroid_scale, factor, bias).
void check_one_product_blocks(const double* sums, std::int64_t rows, const double* carried, const double* norms,
                              const double* centroid_scale, double factor, double bias, int* failures,
                              unsigned* max_ratio, cudaStream_t stream);

/// The checks of `count` listed points (rows[i] of the d-column rows x): sums[i], the sum of the point's
/// float-accurate cross terms, against x_row . s in double, within the point's bound (as check_points).
template <class T>
void check_listed_points(const T* x, std::int64_t d, const std::int32_t* rows, std::int64_t count, const double* sums,
                         const double* s, const compute_t<T>* xnorm, const double* centroid_scale, double factor,
                         int* failures, unsigned* max_ratio, cudaStream_t stream);

/// One Lloyd iteration's GPU times, ms.
struct IterationTimes {
  double distances = 0, argmin = 0, update = 0, total = 0;
};

/// The end of Lloyd iteration `it` (1-based), the same for every driver (fit, fit_host,
/// fit_distributed): records its times and the iteration count in r, reports progress, and returns
/// whether the run stops, setting r.converged: no label changed since the previous iteration (strict
/// convergence, when p.stop_when_stable; never at iteration 1, whose labels have nothing before them:
/// `changed` is then ignored), or the squared centroid shift <= tol_scaled (when p.tol > 0).
template <class C>
bool end_iteration(Result<C>& r, const Params& p, int it, const IterationTimes& t, double inertia, double shift,
                   unsigned long long changed, double tol_scaled) {
  r.timing.distances_iteration_ms.push_back(t.distances);
  r.timing.argmin_iteration_ms.push_back(t.argmin);
  r.timing.update_iteration_ms.push_back(t.update);
  r.timing.iteration_ms.push_back(t.total);
  r.n_iter = it;
  if (p.progress) p.progress(IterationInfo{it, inertia, shift, t.total});
  const bool stable = it > 1 && changed == 0;
  r.converged = (p.stop_when_stable && stable) || (p.tol > 0 && shift <= tol_scaled);
  return r.converged;
}

/// Most clusters few_nearest takes.
constexpr std::int64_t kFewClustersMax = 32;
/// For k <= kFewClustersMax: labels, mindist (clamped at 0) and counts += of the n points of X (float or
/// 16-bit, read once in its own type) for the k x d float centroids c, on the FMA units (few_clusters.cu).
template <class T>
void few_nearest(const T* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k, const float* xnorm,
                 const float* cnorm, std::int32_t* labels, float* mindist, int* counts, cudaStream_t stream);

/// Most dimensions narrow_nearest takes.
constexpr std::int64_t kNarrowMaxDims = 4;
/// For rows of d <= kNarrowMaxDims values (float, double or 16-bit X, read once in its own type): each
/// point's label and squared distance to the nearest of the k x d centroids c, for any k, on the FMA units
/// (ties: the lowest index; narrow_nearest.cu): Math::exact as sums of squared differences, Math::fast as
/// ||c||^2 - 2 x.c in the compute type. No counts.
template <class T>
void narrow_nearest(const T* x, std::int64_t n, std::int64_t d, const compute_t<T>* c, std::int64_t k,
                    gemm::Math math, std::int32_t* labels, compute_t<T>* mindist, cudaStream_t stream);

/// Where assign_and_sum adds the points: an Updater's (high, low) words and its columns' scales.
struct SumTarget {
  unsigned long long* hi;
  unsigned long long* lo;
  const double* scale;
};

/// Whether assign_and_sum takes this problem: float or 16-bit X, k <= kFewClustersMax, d a multiple of 4
/// (and x aligned to 4 elements), d <= 4096 (k <= 16) or 2048, and a GPU of compute capability >= 9.0.
template <class T>
bool assign_and_sum_applies(const T* x, std::int64_t d, std::int64_t k);

/// For few clusters, X read once: labels, mindist and counts as few_nearest gives them, and each point
/// added to its cluster's sums in `sums` (as Updater::accumulate adds it, unweighted: the same integers),
/// in one kernel (assign_and_sum.cu). Callers check assign_and_sum_applies.
template <class T>
void assign_and_sum(const T* x, std::int64_t n, std::int64_t d, const float* c, std::int64_t k, const float* xnorm,
                    const float* cnorm, std::int32_t* labels, float* mindist, int* counts, const SumTarget& sums,
                    cudaStream_t stream);

/// counts[labels[i]] += 1 for the n labels (integer atomics: the same result in any order).
void count_labels(const std::int32_t* labels, std::int64_t n, std::int64_t k, int* counts, cudaStream_t stream);

/// Blocks of sum_into's first pass, at most.
constexpr int kSumMaxBlocks = 256;
/// Doubles of device memory sum_into needs at `out`.
constexpr int kSumScratch = 2 * (1 + kSumMaxBlocks);
/// out[0] = the sum of `count` values (times weights[i] when weights is non-null) in double, queued on
/// the stream without waiting: blocks sum fixed shares in a fixed order, one block adds those
/// (deterministic). With labels `now` and `before` (else null), out[1] = the number of i < count with
/// now[i] != before[i] (exact), counted in the same pass. `out` holds kSumScratch.
template <class T>
void sum_into(const T* values, std::int64_t count, double* out, cudaStream_t stream, const double* weights = nullptr,
              const std::int32_t* now = nullptr, const std::int32_t* before = nullptr);

/// A sum_into whose results come back through pinned memory, so the host need not wait for them now:
/// queue() on a stream, value() (and changes(), when labels were given) once that stream has been
/// synchronised.
class AsyncSum {
 public:
  AsyncSum() : scratch_(kSumScratch), host_(2) {}
  template <class T>
  void queue(const T* values, std::int64_t count, cudaStream_t stream, const double* weights = nullptr,
             const std::int32_t* now = nullptr, const std::int32_t* before = nullptr) {
    sum_into(values, count, scratch_.data(), stream, weights, now, before);
    host_.copy_from_device_async(scratch_.data(), stream);
  }
  double value() const { return host_[0]; }
  unsigned long long changes() const { return static_cast<unsigned long long>(host_[1]); }

 private:
  DeviceBuffer<double> scratch_;
  PinnedBuffer<double> host_;
};

/// Sum of `count` values (times weights[i] when non-null) in double (deterministic). Waits for it.
template <class T>
double sum(const T* values, std::int64_t count, cudaStream_t stream, const double* weights = nullptr);

/// *out += the number of i < n with a[i] != b[i] (an integer atomic: the same in any order).
void count_changes(const std::int32_t* a, const std::int32_t* b, std::int64_t n, unsigned long long* out,
                   cudaStream_t stream);

/// d2[i] = min(d2[i], ||x_i||^2 + ||c||^2 - 2 g[i * ldg]) clamped at 0 (k-means++: squared distances to the
/// nearest centre chosen so far); `first` overwrites d2.
template <class T>
void min_distance_update(double* d2, const T* g, std::int64_t ldg, const T* xnorm, T cnorm, std::int64_t n, bool first,
                         cudaStream_t stream);

/// The k-means++ potential if the candidate with cross terms g[i * ldg] and norm cnorm were added:
/// sum_i min(d2[i], ||x_i - c||^2), in double.
template <class T>
double candidate_potential(const double* d2, const T* g, std::int64_t ldg, const T* xnorm, T cnorm, std::int64_t n,
                           cudaStream_t stream);

/// xt = X in column-major order (n x d, leading dimension n): element (i, j) at xt[j * n + i].
template <class T>
void to_columns(const T* x, std::int64_t n, std::int64_t d, T* xt, cudaStream_t stream);

/// Generates blobs on the device (see make_blobs).
template <class T>
void blobs(T* x, T* centers, std::int64_t n, std::int64_t d, int k, std::uint64_t seed, double stddev,
           double center_box, cudaStream_t stream);

/// Rows [row_begin, row_begin + rows) of those blobs into x (rows x d).
template <class T>
void blob_rows(T* x, T* centers, std::int64_t row_begin, std::int64_t rows, std::int64_t d, int k, std::uint64_t seed,
               double stddev, double center_box, cudaStream_t stream);

/// The centroid update of one iteration. Owns its device buffers; reused across iterations. The sums
/// are exact integer sums (fixed_point.hpp): the same bits however the points are split into the calls
/// of accumulate(), so chunks of a stream or shards of several GPUs give the one-call result.
template <class T>
class Updater {
 public:
  using C = compute_t<T>;  ///< the centroids' type
  /// How the cluster sums are formed (update.cu): automatic picks by k, d and the flushes' traffic.
  enum class Sums { automatic, binned, registers, sorted };
  /// For up to n points per accumulate() call.
  Updater(std::int64_t n, std::int64_t d, std::int64_t k, Sums sums = Sums::automatic);
  /// The way taken (never automatic).
  Sums way() const noexcept { return way_; }

  /// max |w_i x_ij| over `rows` points for each column j, then max w_i (1 without weights): d + 1 values,
  /// whose maximum over all points (over chunks or GPUs) set_scales takes.
  std::vector<double> column_max_abs(const T* x, std::int64_t rows, const double* weights, cudaStream_t stream) const;
  /// Fixes the integer scales of the sums for this fit (before the first update).
  void set_scales(const std::vector<double>& max_abs, bool weighted);

  /// One iteration's sums in three steps, for data that comes in parts: zero the sums, add each part's
  /// points (x, weights (null: 1) and labels of the same `rows` points), then finish: empty clusters
  /// moved to the points farthest from their centroids (scikit-learn's rule; x, labels, mindist and
  /// weights of all n points), means and the sum of squared centroid shifts, returned. `counts_dev` are
  /// the assignment's counts; finish waits for the stream. accumulate's `label_counts`, where the caller
  /// has them: how many of these rows carry each label (the sums grouped by label need them; null: counted
  /// here).
  void begin(cudaStream_t stream);
  void accumulate(const T* x, const double* weights, const std::int32_t* labels, std::int64_t rows, cudaStream_t stream,
                  const int* label_counts = nullptr);
  double finish(const T* x, const double* weights, std::int32_t* labels, const C* mindist, const int* counts_dev,
                const C* old_c, C* new_c, cudaStream_t stream);
  /// Where finish() finds the points an empty cluster may take: their rows (on the device, or in host
  /// memory for a stream from the host), and the distances and labels of all points, fetched only when
  /// a cluster is empty.
  struct Points {
    const T* x = nullptr;              ///< n x d row-major
    bool x_on_device = true;           ///< false: host memory (pageable or page-locked)
    const double* weights = nullptr;   ///< n weights in host memory, or null for 1 each
    /// Fills the squared distances to the nearest centroid and the labels of all n points.
    std::function<void(std::vector<C>& mindist, std::vector<std::int32_t>& labels)> fetch;
    /// Gives `point` the cluster `label` where the caller keeps the labels.
    std::function<void(std::int64_t point, std::int32_t label)> relabel;
  };
  /// finish with the points described by `points`: the same moves (scikit-learn's rule, the same ties),
  /// means and shift.
  double finish(const Points& points, const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream);
  /// finish in two halves, for a caller that queues work between them (the next assignment, on the new
  /// centroids, while the host waits): queue_means queues the means as if no cluster were empty, with the
  /// counts coming back; settle waits for `means_done` (an event the caller recorded after queue_means, so
  /// that it does not wait for the work queued since), moves points to empty clusters as finish does (then
  /// the means again: work queued in between saw the first ones) and returns the shift. moved(): whether
  /// the last finish or settle moved any point.
  void queue_means(const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream);
  double settle(const T* x, const double* weights, std::int32_t* labels, const C* mindist, const int* counts_dev,
                const C* old_c, C* new_c, cudaStream_t stream, cudaEvent_t means_done = nullptr);
  bool moved() const noexcept { return moved_; }
  /// The sums for all n points under `labels` (their counts counts_dev), then queue_means: update() up to
  /// its wait, for a caller that queues more work before settle. Where `few_changes` (the caller expects
  /// few labels to differ from the last call's) and the sums still hold the last call's labels, only the
  /// points whose label changed move from one cluster's sums to the other's: integer subtractions and
  /// additions, so the sums are those of begin and accumulate over all points, in a pass over the labels
  /// and the changed rows instead of all of X. Otherwise begin and accumulate.
  void queue_update(const T* x, const double* weights, const std::int32_t* labels, const int* counts_dev,
                    const C* old_c, C* new_c, cudaStream_t stream, bool few_changes = false);
  /// queue_update, then settle.
  double update(const T* x, const double* weights, std::int32_t* labels, const C* mindist, const int* counts_dev,
                const C* old_c, C* new_c, cudaStream_t stream, bool few_changes = false);
  /// Whether the last queue_update moved the changed points (rather than summing all of them).
  bool moved_changes() const noexcept { return moved_changes_; }
  /// Whether queue_update keeps a copy of the labels it sums (n labels), which moving points needs: without
  /// it, few_changes is ignored.
  void keep_summed_labels(bool keep) noexcept { keep_summed_labels_ = keep; }

  /// The sums as (high words [k][d], low words [k][d]) and the weight sums (high [k], low [k]): what
  /// several GPUs add up between accumulate() and finish().
  unsigned long long* sums() noexcept { return sums_.data(); }
  unsigned long long* weight_sums() noexcept { return weight_sums_.data(); }
  /// Where assign_and_sum adds points to these sums (between begin() and finish()).
  SumTarget sum_target() noexcept { return {sums_.data(), sums_.data() + k_ * d_, scale_.data()}; }
  std::int64_t sum_words() const noexcept { return 2 * k_ * d_; }
  /// Whether weight_sums() are in use (set_scales with weights).
  bool weighted() const noexcept { return weighted_; }

  /// For sums added up across GPUs in place of finish() (fit_distributed.cu): moves one point (its d values
  /// at `row`, on the device, and its weight w) from cluster `from` to the empty cluster `to` in the sums and
  /// weight sums, as finish() does for its moves.
  void move_point(const T* row, double w, std::int64_t from, std::int64_t to, cudaStream_t stream);
  /// Then the means for `counts_dev` (after the moves) and the shift, as finish() ends; waits, returns the shift.
  double means(const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream);

 private:
  /// settle's work; the weights from `fetched_weights` once points.fetch has filled it, else points.weights.
  double settle_with(const Points& points, const std::vector<double>* fetched_weights, const int* counts_dev,
                     const C* old_c, C* new_c, cudaStream_t stream, cudaEvent_t means_done = nullptr);
  /// Queues new_c = sums / counts (or weight sums; old_c where a count is 0) and the shift into shift_.
  void means_and_shift(const int* counts, const C* old_c, C* new_c, cudaStream_t stream);
  /// Blocks of the means' kernel: each leaves its part of the shift in block_shifts_.
  unsigned means_blocks() const;

  std::int64_t n_, d_, k_;
  int vec_ = 1;
  int sms_ = 1;
  Sums way_ = Sums::sorted;
  std::int64_t ranges_ = 0;  ///< row ranges of the binned sums
  bool scaled_ = false, weighted_ = false, moved_ = false;
  /// The labels the sums hold (queue_update's last), while summed_valid_; the calls since all points were
  /// summed (each moves at most n points: the low words stay far below 2^64).
  DeviceBuffer<std::int32_t> summed_labels_;
  bool summed_valid_ = false, moved_changes_ = false, keep_summed_labels_ = true;
  std::int64_t moves_since_sum_ = 0;
  double weight_scale_ = 1;
  DeviceBuffer<std::int32_t> keys_, keys_out_;  ///< labels (the radix sort's), then grouped labels
  DeviceBuffer<std::int32_t> perm_in_, perm_;   ///< point indices (the radix sort's), then grouped by label
  DeviceBuffer<int> bucket_counts_, bucket_cursor_;  ///< the counting sort's counts and next positions [k]
  DeviceBuffer<unsigned char> sort_temp_;       ///< the radix sort's or the counting sort's scan's
  std::size_t sort_temp_bytes_ = 0;
  DeviceBuffer<unsigned long long> sums_;         ///< [2][k][d]: high, then low words
  DeviceBuffer<unsigned long long> weight_sums_;  ///< [2][k]
  DeviceBuffer<double> scale_;                    ///< [2][d]: each column's scale, then its inverse
  DeviceBuffer<double> block_shifts_;             ///< [means_blocks()]: the squared shifts' sums per block
  AsyncSum shift_;                                ///< sum of block_shifts_
  DeviceBuffer<int> counts_;                      ///< the counts after empty-cluster moves
  PinnedBuffer<int> counts_host_;                 ///< the counts of the assignment, copied back asynchronously
};

}  // namespace skinny::kmeans::detail
