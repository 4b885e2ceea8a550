// K-means over several GPUs (of one process, several processes or several hosts), exact Lloyd: every
// rank holds a shard of the rows of X, assigns its points, adds them into exact integer cluster sums
// (fixed_point.hpp in the sources), and one group of allreduces per iteration adds the ranks' sums,
// weight sums, counts, inertia and changed labels. Integer addition does not depend on the order nor on
// how the points were split, so every rank computes the same centroids, and the same ones for any
// number of ranks (see docs/multi-gpu.md for the conditions: the fused distance kernel, or the GEMM path
// with its caveats).
//
//   auto [begin, count] = skinny::kmeans::shard_rows(n, comm.size(), comm.rank());
//   auto r = skinny::kmeans::fit_distributed<float>(ctx, comm, x_shard, count, n, begin, d, params);
//   r.centroids (k x d, the same on every rank), r.labels (this rank's count labels)
#pragma once

#include <skinny/gemm/context.hpp>
#include <skinny/kmeans/communicator.hpp>
#include <skinny/kmeans/kmeans.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace skinny::kmeans {

/// A contiguous range of rows.
struct RowRange {
  std::int64_t begin = 0;
  std::int64_t count = 0;
};

/// Rank `rank`'s rows when n rows are shared by `ranks` ranks in order: n / ranks each, the first
/// n % ranks ranks one more. Throws std::invalid_argument unless n >= ranks >= 1 and 0 <= rank < ranks.
RowRange shard_rows(std::int64_t n, int ranks, int rank);

/// k-means++ and k-means|| of fit_distributed run on rank 0 over a sample of the rows gathered there
/// (then broadcast): all n rows when they take at most this many bytes, otherwise init_sample_rows of
/// them drawn from the seed. The sample depends on n, d, k and the seed only, not on the ranks.
inline constexpr std::int64_t kInitSampleMaxBytes = std::int64_t(1) << 30;
/// Rows per cluster the sample keeps at least (for large k x d, past kInitSampleMaxBytes).
inline constexpr std::int64_t kInitSampleMinRowsPerCluster = 8;

/// Rows of that sample: n when n x d x elem_bytes <= kInitSampleMaxBytes, else the larger of the rows
/// that fit there and kInitSampleMinRowsPerCluster x k (at most n).
std::int64_t init_sample_rows(std::int64_t n, std::int64_t d, std::int64_t k, int elem_bytes);

/// The sorted global row indices of the sample init_sample_rows describes for `seed` (0 .. n - 1 when
/// it keeps every row).
std::vector<std::int64_t> init_sample(std::int64_t n, std::int64_t d, std::int64_t k, int elem_bytes, std::uint64_t seed);

template <class T>
struct DistributedResult : Result<T> {
  std::int64_t row_offset = 0;  ///< labels holds this rank's labels, of rows row_offset .. + labels.size()
  int ranks = 1;
  std::string communicator;     ///< Communicator::name()
  std::string distances;        ///< "few-clusters" (X read once), "nearest" (the fused kernel) or "gemm"
  /// GPU time per iteration of the collectives (the inertia's maximum, then the group of sums, counts,
  /// inertia and changed labels), waiting for the slowest rank included.
  std::vector<double> allreduce_iteration_ms;
};

/// fit over the ranks of `comm`: this rank holds rows [row_offset, row_offset + n_local) of the
/// n_total x d row-major X (x: n_local x d on the current device), and every rank calls this with the
/// same n_total, d and params. The shards must follow the ranks' order and cover 0 .. n_total - 1
/// (shard_rows gives such shards); each holds at least one row. `initial_centroids` (Init::given): on
/// rank 0, k x d (host); the other ranks may pass them too or leave them empty (rank 0's are used).
/// `sample_weight`: empty, or n_local weights (this shard's). Every rank gets the same centroids,
/// inertia, n_iter and converged; labels are this shard's. Arguments any rank refuses make every rank
/// throw std::invalid_argument (the refusing rank its own message), before any collective waits.
template <class T>
DistributedResult<T> fit_distributed(Context& ctx, Communicator& comm, const T* x, std::int64_t n_local,
                                     std::int64_t n_total, std::int64_t row_offset, std::int64_t d, const Params& params,
                                     const std::vector<T>& initial_centroids = {},
                                     const std::vector<double>& sample_weight = {});

/// Rows [row_begin, row_begin + rows) of make_blobs(ctx, ., n, d, k, seed, stddev, center_box) (each
/// element is a pure function of the seed and its index, so a shard needs no other rows), written to x
/// (rows x d); labels of those rows.
template <class T>
Blobs<T> make_blob_rows(Context& ctx, T* x, std::int64_t row_begin, std::int64_t rows, std::int64_t n, std::int64_t d,
                        int k, std::uint64_t seed, double stddev = 1.0, double center_box = 10.0);

}  // namespace skinny::kmeans
