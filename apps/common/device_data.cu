#include "device_data.hpp"

#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/splitmix64.hpp>

#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <cmath>
#include <limits>

namespace skinny::apps {
namespace {


template <class T>
__device__ T from_double(double v) {
  return T(v);
}
template <>
__device__ __half from_double<__half>(double v) {
  return __double2half(v);
}
__device__ double as_double(float v) { return v; }
__device__ double as_double(double v) { return v; }

struct SquaredPair {
  double diff2 = 0, ref2 = 0, bad = 0;
};

}  // namespace

template <class T>
void fill_uniform(T* x, std::size_t count, std::uint64_t seed, double lo, double hi, cudaStream_t stream) {
  const std::uint64_t key = splitmix64(seed);
  thrust::transform(thrust::cuda::par_nosync.on(stream), thrust::counting_iterator<std::size_t>(0),
                    thrust::counting_iterator<std::size_t>(count), x, [=] __device__(std::size_t i) -> T {
                      const double u = double(splitmix64(key ^ splitmix64(i)) >> 11) * 0x1.0p-53;  // [0, 1)
                      return from_double<T>(lo + (hi - lo) * u);
                    });
  SKINNY_CHECK_LAUNCH();
}

template <class T>
void fill_value(T* x, std::size_t count, double value, cudaStream_t stream) {
  thrust::transform(thrust::cuda::par_nosync.on(stream), thrust::counting_iterator<std::size_t>(0),
                    thrust::counting_iterator<std::size_t>(count), x,
                    [=] __device__(std::size_t) -> T { return from_double<T>(value); });
  SKINNY_CHECK_LAUNCH();
}

template <class T>
double relative_error(const T* x, const T* ref, std::size_t count, cudaStream_t stream) {
  const SquaredPair sums = thrust::transform_reduce(
      thrust::cuda::par.on(stream), thrust::counting_iterator<std::size_t>(0),
      thrust::counting_iterator<std::size_t>(count),
      [=] __device__(std::size_t i) -> SquaredPair {
        const double got = as_double(x[i]), want = as_double(ref[i]);
        SquaredPair s;
        if (!isfinite(got)) {
          s.bad = 1;
        } else {
          s.diff2 = (got - want) * (got - want);
          s.ref2 = want * want;
        }
        return s;
      },
      SquaredPair{}, [] __device__(SquaredPair a, SquaredPair b) -> SquaredPair {
        return SquaredPair{a.diff2 + b.diff2, a.ref2 + b.ref2, a.bad + b.bad};
      });
  if (sums.bad > 0) return std::numeric_limits<double>::infinity();
  return sums.ref2 > 0 ? std::sqrt(sums.diff2 / sums.ref2) : std::sqrt(sums.diff2);
}

template <class T>
__global__ void narrow_kernel(const float* __restrict__ in, T* __restrict__ out, std::size_t count) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = static_cast<T>(in[i]);
}

template <class T>
void narrow(const float* in, T* out, std::size_t count, cudaStream_t stream) {
  narrow_kernel<<<static_cast<unsigned>(std::min<std::size_t>((count + 255) / 256, 4096)), 256, 0, stream>>>(in, out, count);
  SKINNY_CHECK_LAUNCH();
}
template void narrow(const float*, __half*, std::size_t, cudaStream_t);
template void narrow(const float*, __nv_bfloat16*, std::size_t, cudaStream_t);

template void fill_uniform(float*, std::size_t, std::uint64_t, double, double, cudaStream_t);
template void fill_uniform(double*, std::size_t, std::uint64_t, double, double, cudaStream_t);
template void fill_uniform(__half*, std::size_t, std::uint64_t, double, double, cudaStream_t);
template void fill_value(float*, std::size_t, double, cudaStream_t);
template void fill_value(double*, std::size_t, double, cudaStream_t);
template double relative_error(const float*, const float*, std::size_t, cudaStream_t);
template double relative_error(const double*, const double*, std::size_t, cudaStream_t);

}  // namespace skinny::apps
