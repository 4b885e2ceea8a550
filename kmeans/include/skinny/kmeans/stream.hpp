// K-means on data in host memory, larger than the GPU's: fit_host streams X through the GPU in chunks
// on every pass, with the copies of one chunk overlapping the work on the previous one. X may be
// pageable, page-locked (copied as it is, no staging) or a memory-mapped file.
//
//   skinny::Context ctx(stream);
//   skinny::kmeans::Params p;  p.k = 16;
//   skinny::kmeans::StreamOptions s;  s.max_gpu_memory = std::size_t(2) << 30;
//   auto r = skinny::kmeans::fit_host<float>(ctx, host_x, n, d, p, {}, {}, s);
//   r.labels, r.centroids as fit's; r.stream.h2d_gbs: the host-to-device throughput per iteration
//
// What it guarantees against fit on the same data (on the device): the cluster sums are exact integer
// sums, so the same labels give bit-identical centroids however X is chunked; each point's distances are
// computed on its own, so the same centroids give the same labels as long as the same kernel runs. That
// holds for the fused gemm::nearest assignment (float, Algo::automatic, k >= 128; any chunking). For the
// GEMM path it holds when every chunk is a multiple of fit's own row chunk (detail::chunk_rows, which the
// planner rounds to) and fit reads rows rather than a column-major copy (n < 65536 or
// Params::column_copy = false); otherwise a GEMM plan chosen for another row count may round a cross
// term differently and a point within rounding of a tie may take the other centroid. The random and
// given initialisations pick the same centroids as fit; k-means++ and k-means|| run on a sample of
// the rows (all of them when they fit, then they are fit's too), and tol is scaled by a variance merged
// from the chunks' moments (fit's two-pass sum, up to rounding).
#pragma once

#include <skinny/kmeans/kmeans.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace skinny::kmeans {

struct StreamOptions {
  /// Device memory the fit may use, in bytes; 0: the free memory less a headroom (512 MiB or 5 % of the
  /// device, the larger), which also bounds a larger value.
  std::size_t max_gpu_memory = 0;
  /// Rows per chunk; 0: from the budget (up to 256 MiB of X per chunk, for the GEMM path rounded down
  /// to a multiple of fit's row chunk). A given count is taken as it is (at most n), or refused when it
  /// does not fit the budget.
  std::int64_t chunk_rows = 0;
  /// Host threads copying pageable X into the page-locked staging buffers; 0: min(8, cores). Page-
  /// locked X is copied as it is.
  int host_threads = 0;
  /// Refuse NaN and infinity in X: counted on the GPU per chunk during the first pass (NonFiniteInput
  /// names the first one), so a memory-mapped file needs no pass of its own.
  bool check_finite = true;
};

/// How fit_host shares its device-memory budget out.
struct StreamPlan {
  std::size_t budget = 0;         ///< device bytes planned for
  std::size_t fixed_bytes = 0;    ///< what does not grow with the rows: centroids, cluster sums, library scratch
  std::size_t planned_bytes = 0;  ///< all the plan uses (<= budget)
  std::int64_t chunk_rows = 0;    ///< rows per chunk
  std::int64_t chunks = 0;        ///< chunks per pass over X
  /// Labels, distances and norms of all n points stay on the device; otherwise they exist per chunk,
  /// and the labels and distances go back to page-locked host memory (and the labels come back for the
  /// next iteration's count of changes).
  bool per_point_on_device = false;
  /// Rows k-means++ or k-means|| run on: a deterministic sample (one row drawn from the seed in each of
  /// init_sample_rows equal ranges of rows), all n when they fit; 0 for random and given centroids.
  std::int64_t init_sample_rows = 0;
};

/// What fit_host did, moved and how fast. Timing of a streamed fit: PhaseTiming's distances_ms covers
/// the whole assignment (cross terms and argmin), argmin_ms the labels' bookkeeping (changed labels;
/// per chunk: the copies back), update_ms the sums and the means; every figure is GPU time of the
/// compute stream, so a copy it waited for counts.
struct StreamReport {
  StreamPlan plan;
  bool pinned_input = false;  ///< X was page-locked: copied as it is (else through the staging buffers)
  int host_threads = 0;       ///< threads filling the staging buffers
  std::uint64_t h2d_bytes_per_iteration = 0;  ///< X, and per chunk the weights and labels, per iteration
  std::vector<double> copy_ms;    ///< per iteration: time the copy stream spent copying (events around each chunk)
  std::vector<double> h2d_gbs;    ///< per iteration: bytes / copy_ms, the link's throughput while copying
  std::vector<double> stream_gbs; ///< per iteration: bytes / iteration time, the throughput the iteration sustained
  double setup_ms = 0;            ///< the first pass: non-finite check, norms, column maxima, moments
};

template <class T>
struct StreamResult : Result<T> {
  StreamReport stream;
};

/// Thrown by fit_host for a NaN or an infinity in X (a std::invalid_argument, as the other refusals).
class NonFiniteInput : public std::invalid_argument {
 public:
  NonFiniteInput(std::int64_t row, std::int64_t column, double value, std::int64_t chunk_row0, std::int64_t chunk_rows);
  std::int64_t row() const noexcept { return row_; }
  std::int64_t column() const noexcept { return column_; }
  double value() const noexcept { return value_; }
  std::int64_t chunk_row0() const noexcept { return chunk_row0_; }   ///< first row of the chunk it was found in
  std::int64_t chunk_rows() const noexcept { return chunk_rows_; }

 private:
  std::int64_t row_, column_;
  double value_;
  std::int64_t chunk_row0_, chunk_rows_;
};

/// fit for X (n x d row-major) in host memory: the same parameters, checks and results as fit, with X
/// streamed through at most options.max_gpu_memory bytes of device memory. Each Lloyd iteration is one
/// pass over X; the set-up one more (non-finite values, norms, column maxima, variance), each run's
/// final labels one more, and k-means++/k-means|| a gather of their sample. Throws what fit throws,
/// std::invalid_argument when X is in device memory (use fit) or the budget cannot hold one chunk
/// (naming both), and NonFiniteInput.
template <class T>
StreamResult<T> fit_host(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const Params& params,
                         const std::vector<T>& initial_centroids = {}, const std::vector<double>& sample_weight = {},
                         const StreamOptions& options = {});

/// Device memory fit (on the device) needs for this problem, estimated: X, the per-point arrays, the
/// update's buffers, a chunk of cross terms, library scratch and the initialisation's buffers.
template <class T>
std::size_t fit_device_bytes(std::int64_t n, std::int64_t d, const Params& params);

/// Whether fit_device_bytes fits in the current device's free memory less fit_host's headroom: when
/// not, fit_host is the way to fit this problem.
template <class T>
bool fits_on_device(std::int64_t n, std::int64_t d, const Params& params);

}  // namespace skinny::kmeans
