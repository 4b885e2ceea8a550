// What fit_distributed.cu takes from fit's Lloyd loop (lloyd.cu), so that both run one assignment step
// and one set of checks: the parameter checks, the backend check of a shape, and the assignment step
// (fused nearest kernel, or GEMM chunks and argmin, with fit's column-major copy rule).
#pragma once

#include <skinny/gemm/context.hpp>
#include <skinny/gemm/gemm.hpp>
#include <skinny/kmeans/kmeans.hpp>

#include <cstdint>
#include <memory>
#include <utility>

namespace skinny::kmeans::detail {

/// fit's checks of Params (max_iter, n_init, tol, init_oversampling, init_rounds).
void check_fit_params(const Params& p);

/// Throws std::invalid_argument unless `backend` can compute the distances of `rows` points (fit's check
/// without its k <= n rule, which a shard need not meet).
template <class T>
void check_distance_backend(const T* x, std::int64_t rows, std::int64_t d, std::int64_t k, gemm::Algo backend);

/// fit's assignment step over the n x d points x: labels, distances to the nearest centroid, counts.
template <class T>
class ShardAssigner {
 public:
  /// `column_copy`: Params::column_copy, applied by fit's rule (GEMM path, enough points, free memory).
  ShardAssigner(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k, gemm::Algo backend,
                gemm::Math math, bool column_copy);
  ~ShardAssigner();
  ShardAssigner(const ShardAssigner&) = delete;
  ShardAssigner& operator=(const ShardAssigner&) = delete;

  bool fused() const;        ///< through gemm::nearest
  bool few() const;          ///< through detail::few_nearest (few clusters, X read once)
  bool narrow() const;       ///< through detail::narrow_nearest (rows of a few values)
  bool column_copy() const;  ///< the GEMM reads a column-major copy of x
  /// counts are zeroed first; cnorm = ||c_j||^2 of the k x d centroids c.
  void run(const T* c, const T* xnorm, const T* cnorm, std::int32_t* labels, T* mindist, int* counts);
  /// GPU milliseconds of the last run in the GEMMs (or the fused kernel) and in the argmins (waits).
  std::pair<double, double> phase_ms() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace skinny::kmeans::detail
