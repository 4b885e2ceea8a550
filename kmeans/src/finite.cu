// count_non_finite(): one read of the data, counted on the GPU.
#include <skinny/kmeans/finite.hpp>

#include "element.cuh"

#include <thrust/count.h>
#include <thrust/execution_policy.h>

#include <stdexcept>
#include <string>

namespace skinny::kmeans {
namespace {

template <class T>
struct NonFinite {
  __device__ bool operator()(T v) const { return !isfinite(detail::to_double(v)); }
};

}  // namespace

template <class T>
std::int64_t count_non_finite(Context& ctx, const T* x, std::int64_t count) {
  if (count < 0) throw std::invalid_argument("count_non_finite: count = " + std::to_string(count) + " < 0");
  if (count == 0) return 0;
  if (x == nullptr) throw std::invalid_argument("count_non_finite: null data pointer");
  return static_cast<std::int64_t>(thrust::count_if(thrust::cuda::par.on(ctx.stream()), x, x + count, NonFinite<T>{}));
}

template std::int64_t count_non_finite(Context&, const float*, std::int64_t);
template std::int64_t count_non_finite(Context&, const double*, std::int64_t);
template std::int64_t count_non_finite(Context&, const __half*, std::int64_t);
template std::int64_t count_non_finite(Context&, const __nv_bfloat16*, std::int64_t);

}  // namespace skinny::kmeans
