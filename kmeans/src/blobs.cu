// Gaussian blobs on the GPU: each element a pure function of (seed, index), so any launch shape gives
// the same data.
#include "detail.hpp"

#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/splitmix64.hpp>

#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

namespace skinny::kmeans::detail {
namespace {

/// Uniform in (0, 1]: never 0, so the logarithm of Box-Muller is finite.
__device__ inline double unit(std::uint64_t h) { return (double(h >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

template <class T>
void blobs(T* x, T* centers, std::int64_t n, std::int64_t d, int k, std::uint64_t seed, double stddev,
           double center_box, cudaStream_t stream) {
  blob_rows(x, centers, 0, n, d, k, seed, stddev, center_box, stream);
}

template <class T>
void blob_rows(T* x, T* centers, std::int64_t row_begin, std::int64_t rows, std::int64_t d, int k, std::uint64_t seed,
               double stddev, double center_box, cudaStream_t stream) {
  const std::uint64_t key_c = splitmix64(seed ^ 0x43454e54455253ull), key_x = splitmix64(seed ^ 0x504f494e5453ull);
  thrust::for_each_n(thrust::cuda::par_nosync.on(stream), thrust::counting_iterator<std::int64_t>(0),
                     std::int64_t(k) * d, [=] __device__(std::int64_t i) {
                       centers[i] = T(center_box * (2.0 * unit(splitmix64(key_c ^ splitmix64(i))) - 1.0));
                     });
  SKINNY_CHECK_LAUNCH();
  const T* c = centers;
  thrust::for_each_n(thrust::cuda::par_nosync.on(stream), thrust::counting_iterator<std::int64_t>(0), rows * d,
                     [=] __device__(std::int64_t local) {
                       const std::int64_t i = row_begin * d + local;  // the element's index in all n rows
                       const std::int64_t row = i / d, col = i - row * d;
                       const std::uint64_t h = splitmix64(key_x ^ splitmix64(i));
                       const double z = sqrt(-2.0 * log(unit(h))) * cospi(2.0 * unit(splitmix64(h)));
                       x[local] = T(double(c[(row % k) * d + col]) + stddev * z);
                     });
  SKINNY_CHECK_LAUNCH();
}

template void blobs(float*, float*, std::int64_t, std::int64_t, int, std::uint64_t, double, double, cudaStream_t);
template void blobs(double*, double*, std::int64_t, std::int64_t, int, std::uint64_t, double, double, cudaStream_t);
template void blob_rows(float*, float*, std::int64_t, std::int64_t, std::int64_t, int, std::uint64_t, double, double,
                        cudaStream_t);
template void blob_rows(double*, double*, std::int64_t, std::int64_t, std::int64_t, int, std::uint64_t, double, double,
                        cudaStream_t);

}  // namespace skinny::kmeans::detail
