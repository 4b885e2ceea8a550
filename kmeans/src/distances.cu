// sq_distances(): the norms and the cross-term GEMM fit uses, written out as an n x k matrix.
#include "detail.hpp"

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/kmeans/distances.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace skinny::kmeans {
namespace {

constexpr int kThreads = 256;

/// out(i, j) = max(||x_i||^2 + ||c_j||^2 - 2 out(i, j), 0), where out holds the cross terms x_i . c_j.
template <class T>
__global__ void combine_kernel(T* __restrict__ out, std::int64_t n, std::int64_t k, const T* __restrict__ xnorm,
                               const T* __restrict__ cnorm) {
  const std::int64_t total = n * k;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const T v = xnorm[e / k] + cnorm[e % k] - T(2) * out[e];
    out[e] = v > T(0) ? v : T(0);
  }
}

}  // namespace

template <class T>
void sq_distances(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const std::vector<T>& centroids,
                  std::int64_t k, T* out, gemm::Algo backend) {
  if (x == nullptr || out == nullptr) throw std::invalid_argument("sq_distances: null data or output pointer");
  if (n < 1 || d < 1 || k < 1)
    throw std::invalid_argument("sq_distances: need n, d, k >= 1 (got n = " + std::to_string(n) + ", d = " +
                                std::to_string(d) + ", k = " + std::to_string(k) + ")");
  detail::check_centroids(centroids, k, d);

  const cudaStream_t stream = ctx.stream();
  DeviceBuffer<T> c(centroids), xnorm(static_cast<std::size_t>(n)), cnorm(static_cast<std::size_t>(k));
  // out = X C^T: C (k x d row-major) read as the d x k column-major B. gemm() checks the backend.
  gemm::gemm(ctx, {gemm::row_major<const T>(x, n, d), gemm::col_major<const T>(c.data(), d, k), gemm::row_major(out, n, k)},
             backend);
  detail::row_sq_norms(x, n, d, xnorm.data(), stream);
  detail::row_sq_norms(c.data(), k, d, cnorm.data(), stream);
  const std::int64_t blocks = std::min<std::int64_t>((n * k + kThreads - 1) / kThreads, 32LL * detail::multiprocessors());
  combine_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(out, n, k, xnorm.data(), cnorm.data());
  SKINNY_CHECK_LAUNCH();
  // The buffers above are freed on return; cudaFree waits for the work that uses them.
}

template void sq_distances(Context&, const float*, std::int64_t, std::int64_t, const std::vector<float>&, std::int64_t,
                           float*, gemm::Algo);
template void sq_distances(Context&, const double*, std::int64_t, std::int64_t, const std::vector<double>&,
                           std::int64_t, double*, gemm::Algo);

}  // namespace skinny::kmeans
