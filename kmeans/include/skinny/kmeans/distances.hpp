// Distances of points to centroids on the GPU: what scikit-learn's KMeans.transform and score need,
// with the same distance trick as fit (||x||^2 + ||c||^2 - 2 x.c, the cross term through skinny::gemm).
//
//   skinny::kmeans::sq_distances<float>(ctx, dX, n, d, centroids, k, dOut);   // dOut: n x k on the device
#pragma once

#include <skinny/gemm/context.hpp>
#include <skinny/gemm/gemm.hpp>

#include <cstdint>
#include <vector>

namespace skinny::kmeans {

/// out(i, j) = ||x_i - c_j||^2 for the n x d row-major points X (device) and the k x d row-major
/// centroids (host), clamped at 0 (the trick can round below). `out` is n x k row-major on the device.
/// Queued on ctx.stream(); returns once the work is queued. Throws std::invalid_argument for null
/// pointers, n, d or k < 1, centroids that are not k x d or not finite, or a backend that cannot do it.
template <class T>
void sq_distances(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const std::vector<T>& centroids,
                  std::int64_t k, T* out, gemm::Algo backend = gemm::Algo::automatic);

}  // namespace skinny::kmeans
