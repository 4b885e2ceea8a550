// Gaussian blobs on the GPU: each element a pure function of (seed, index), so any launch shape gives
// the same data.
#include "detail.hpp"

#include <skinny/gemm/errors.hpp>

#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

namespace skinny::kmeans::detail {
namespace {

__host__ __device__ inline std::uint64_t mix_d(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/// Uniform in (0, 1]: never 0, so the logarithm of Box-Muller is finite.
__device__ inline double unit(std::uint64_t h) { return (double(h >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

template <class T>
void blobs(T* x, T* centers, std::int64_t n, std::int64_t d, int k, std::uint64_t seed, double stddev,
           double center_box, cudaStream_t stream) {
  const std::uint64_t key_c = mix_d(seed ^ 0x43454e54455253ull), key_x = mix_d(seed ^ 0x504f494e5453ull);
  thrust::for_each_n(thrust::cuda::par_nosync.on(stream), thrust::counting_iterator<std::int64_t>(0),
                     std::int64_t(k) * d, [=] __device__(std::int64_t i) {
                       centers[i] = T(center_box * (2.0 * unit(mix_d(key_c ^ mix_d(i))) - 1.0));
                     });
  SKINNY_CHECK_LAUNCH();
  const T* c = centers;
  thrust::for_each_n(thrust::cuda::par_nosync.on(stream), thrust::counting_iterator<std::int64_t>(0), n * d,
                     [=] __device__(std::int64_t i) {
                       const std::int64_t row = i / d, col = i - row * d;
                       const std::uint64_t h = mix_d(key_x ^ mix_d(i));
                       const double z = sqrt(-2.0 * log(unit(h))) * cospi(2.0 * unit(mix_d(h)));
                       x[i] = T(double(c[(row % k) * d + col]) + stddev * z);
                     });
  SKINNY_CHECK_LAUNCH();
}

template void blobs(float*, float*, std::int64_t, std::int64_t, int, std::uint64_t, double, double, cudaStream_t);
template void blobs(double*, double*, std::int64_t, std::int64_t, int, std::uint64_t, double, double, cudaStream_t);

}  // namespace skinny::kmeans::detail
