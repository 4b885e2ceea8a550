// The nearest centre of every point whose rows have at most kNarrowMaxDims values, on the FMA units, with
// the distances formed directly as sums of squared differences.
//
// With two to four dimensions there is no arithmetic for the tensor cores to do: the fused kernel's time
// is its epilogue (a compare per distance after a product padded to 8 or 16 dimensions), and its one-product
// distances ||c||^2 - 2 x.c lose to cancellation what the data's few dimensions hold (fast labels 3e-4 over
// the best inertia at d = 2, k = 8192). Here a thread keeps a few points in registers and walks the
// centres, staged in shared memory, in index order: per distance, d subtractions and multiply-adds and a
// compare; the distance is the float (or double) sum of (x_e - c_e)^2, with no cancellation, so both
// precision modes get the labels of an exact argmin up to float rounding of the distance itself.
#include "detail.hpp"
#include "element.cuh"

#include <skinny/gemm/errors.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace skinny::kmeans::detail {
namespace {

constexpr int kThreads = 256;
/// Centres a block stages at a time (four values each: 16 KB of float, 32 KB of double).
constexpr int kTileCentres = 1024;

template <class C>
struct alignas(4 * sizeof(C)) Centre {
  C v[4];
};

/// Points a thread keeps, P at a time (row i = its first + j * stride for j < P: neighbouring threads read
/// neighbouring rows). Each centre's shared-memory load serves P points.
template <class T, int D, int P>
__global__ void __launch_bounds__(kThreads) narrow_nearest_kernel(const T* __restrict__ x, std::int64_t n,
                                                                  const compute_t<T>* __restrict__ c, std::int64_t k,
                                                                  std::int32_t* __restrict__ labels,
                                                                  compute_t<T>* __restrict__ mindist) {
  using C = compute_t<T>;
  __shared__ Centre<C> tile[kTileCentres];
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  C xv[P][D], best[P];
  int best_j[P];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const std::int64_t i = first + p * stride;
#pragma unroll
    for (int e = 0; e < D; ++e) xv[p][e] = i < n ? static_cast<C>(to_double(x[i * D + e])) : C(0);
    best[p] = C(INFINITY);
    best_j[p] = 0;
  }
  for (std::int64_t t0 = 0; t0 < k; t0 += kTileCentres) {
    const int count = static_cast<int>(min(std::int64_t(kTileCentres), k - t0));
    __syncthreads();  // the previous tile has been read
    for (int j = threadIdx.x; j < count; j += kThreads) {
      Centre<C> row{};
#pragma unroll
      for (int e = 0; e < D; ++e) row.v[e] = c[(t0 + j) * D + e];
      tile[j] = row;
    }
    __syncthreads();
    // Centres in increasing index order and a strict <: ties keep the lowest index.
#pragma unroll 4
    for (int j = 0; j < count; ++j) {
      const Centre<C> cj = tile[j];
#pragma unroll
      for (int p = 0; p < P; ++p) {
        C s = C(0);
#pragma unroll
        for (int e = 0; e < D; ++e) {
          const C diff = xv[p][e] - cj.v[e];
          s = fma(diff, diff, s);
        }
        if (s < best[p]) {
          best[p] = s;
          best_j[p] = static_cast<int>(t0) + j;
        }
      }
    }
  }
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const std::int64_t i = first + p * stride;
    if (i < n) {
      labels[i] = best_j[p];
      mindist[i] = best[p];
    }
  }
}

template <class T, int D>
void launch(const T* x, std::int64_t n, const compute_t<T>* c, std::int64_t k, std::int32_t* labels,
            compute_t<T>* mindist, cudaStream_t stream) {
  // Four points a thread where that still leaves two blocks an SM (all but small n); else one.
  const std::int64_t threads_wanted = std::int64_t(2) * kThreads * multiprocessors();
  if (n >= 4 * threads_wanted) {
    const std::int64_t blocks = (n + 4 * kThreads - 1) / (4 * kThreads);
    narrow_nearest_kernel<T, D, 4><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, n, c, k, labels, mindist);
  } else {
    const std::int64_t blocks = (n + kThreads - 1) / kThreads;
    narrow_nearest_kernel<T, D, 1><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, n, c, k, labels, mindist);
  }
  SKINNY_CHECK_LAUNCH();
}

}  // namespace

template <class T>
void narrow_nearest(const T* x, std::int64_t n, std::int64_t d, const compute_t<T>* c, std::int64_t k,
                    std::int32_t* labels, compute_t<T>* mindist, cudaStream_t stream) {
  if (n < 1 || k < 1 || d < 1 || d > kNarrowMaxDims || k > std::int64_t(INT32_MAX))
    throw std::invalid_argument("narrow_nearest: need n, k >= 1 and 1 <= d <= " + std::to_string(kNarrowMaxDims) +
                                " (got n = " + std::to_string(n) + ", d = " + std::to_string(d) +
                                ", k = " + std::to_string(k) + ")");
  switch (d) {
    case 1: launch<T, 1>(x, n, c, k, labels, mindist, stream); break;
    case 2: launch<T, 2>(x, n, c, k, labels, mindist, stream); break;
    case 3: launch<T, 3>(x, n, c, k, labels, mindist, stream); break;
    default: launch<T, 4>(x, n, c, k, labels, mindist, stream); break;
  }
}

template void narrow_nearest(const float*, std::int64_t, std::int64_t, const float*, std::int64_t, std::int32_t*,
                             float*, cudaStream_t);
template void narrow_nearest(const double*, std::int64_t, std::int64_t, const double*, std::int64_t, std::int32_t*,
                             double*, cudaStream_t);
template void narrow_nearest(const __half*, std::int64_t, std::int64_t, const float*, std::int64_t, std::int32_t*,
                             float*, cudaStream_t);
template void narrow_nearest(const __nv_bfloat16*, std::int64_t, std::int64_t, const float*, std::int64_t,
                             std::int32_t*, float*, cudaStream_t);

}  // namespace skinny::kmeans::detail
