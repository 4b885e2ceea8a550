// The nearest centre of every point whose rows have at most kNarrowMaxDims values, on the FMA units.
//
// With two to four dimensions there is no arithmetic for the tensor cores to do: the fused kernel's time
// is its epilogue (a compare per distance after a product padded to 8 or 16 dimensions), and its one-product
// distances ||c||^2 - 2 x.c lose to cancellation what the data's few dimensions hold (fast labels 3e-4 over
// the best inertia at d = 2, k = 8192). Here a thread keeps a few points in registers and walks the
// centres, staged in shared memory, in index order, with a compare per distance:
//  - exact mode: the distance is the float (or double) sum of (x_e - c_e)^2, d subtractions and
//    multiply-adds, with no cancellation: the labels of an exact argmin up to the rounding of the
//    distance itself;
//  - fast mode: ||c||^2 - 2 x.c in d multiply-adds on centres staged as (-2 c, ||c||^2), ||x||^2 added to
//    the least: float rounding of the squared norms, about 2^13 times finer than the fused kernel's
//    half products. Fits take it from three dimensions (narrow_form; route_rules.hpp), where it is 17-22 %
//    faster than the differences; below, the differences' exact labels cost 1-2 %.
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
/// Shared memory for the centres a block stages at a time.
constexpr int kTileBytes = 32 << 10;

/// A staged centre: c (exact mode) or (-2 c, ||c||^2) (fast mode), padded to W values (16-byte loads).
template <class C, int W>
struct alignas(W * sizeof(C) < 16 ? W * sizeof(C) : 16) Centre {
  C v[W];
};

/// Values a staged centre of D dimensions holds.
template <int D, bool kExpanded>
constexpr int kCentreWidth = !kExpanded || D < 4 ? 4 : 8;

/// Points a thread keeps, P at a time (row i = its first + j * stride for j < P: neighbouring threads read
/// neighbouring rows). Each centre's shared-memory load serves P points.
template <class T, int D, int P, bool kExpanded>
__global__ void __launch_bounds__(kThreads) narrow_nearest_kernel(const T* __restrict__ x, std::int64_t n,
                                                                  const compute_t<T>* __restrict__ c, std::int64_t k,
                                                                  std::int32_t* __restrict__ labels,
                                                                  compute_t<T>* __restrict__ mindist) {
  using C = compute_t<T>;
  using Row = Centre<C, kCentreWidth<D, kExpanded>>;
  constexpr int kTileCentres = kTileBytes / static_cast<int>(sizeof(Row));
  __shared__ Row tile[kTileCentres];
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  C xv[P][D], best[P], x_sq[P];
  int best_j[P];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const std::int64_t i = first + p * stride;
#pragma unroll
    for (int e = 0; e < D; ++e) xv[p][e] = i < n ? static_cast<C>(to_double(x[i * D + e])) : C(0);
    x_sq[p] = C(0);
#pragma unroll
    for (int e = 0; e < D; ++e) x_sq[p] = fma(xv[p][e], xv[p][e], x_sq[p]);
    best[p] = C(INFINITY);
    best_j[p] = 0;
  }
  for (std::int64_t t0 = 0; t0 < k; t0 += kTileCentres) {
    const int count = static_cast<int>(min(std::int64_t(kTileCentres), k - t0));
    __syncthreads();  // the previous tile has been read
    for (int j = threadIdx.x; j < count; j += kThreads) {
      Row row{};
#pragma unroll
      for (int e = 0; e < D; ++e) row.v[e] = c[(t0 + j) * D + e];
      if constexpr (kExpanded) {
        C c_sq = C(0);
#pragma unroll
        for (int e = 0; e < D; ++e) {
          c_sq = fma(row.v[e], row.v[e], c_sq);
          row.v[e] *= C(-2);
        }
        row.v[D] = c_sq;
      }
      tile[j] = row;
    }
    __syncthreads();
    // Centres in increasing index order and a strict <: ties keep the lowest index.
#pragma unroll 4
    for (int j = 0; j < count; ++j) {
      const Row cj = tile[j];
#pragma unroll
      for (int p = 0; p < P; ++p) {
        C s = kExpanded ? cj.v[D] : C(0);
#pragma unroll
        for (int e = 0; e < D; ++e) {
          if constexpr (kExpanded) {
            s = fma(xv[p][e], cj.v[e], s);
          } else {
            const C diff = xv[p][e] - cj.v[e];
            s = fma(diff, diff, s);
          }
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
      const C dist = kExpanded ? best[p] + x_sq[p] : best[p];
      mindist[i] = dist > C(0) ? dist : C(0);
    }
  }
}

template <class T, int D, bool kExpanded>
void launch(const T* x, std::int64_t n, const compute_t<T>* c, std::int64_t k, std::int32_t* labels,
            compute_t<T>* mindist, cudaStream_t stream) {
  // Four points a thread where that still leaves two blocks an SM (all but small n); else one.
  const std::int64_t threads_wanted = std::int64_t(2) * kThreads * multiprocessors();
  const int points = n >= 4 * threads_wanted ? 4 : 1;
  const auto blocks = static_cast<unsigned>((n + points * kThreads - 1) / (points * kThreads));
  if (points == 4)
    narrow_nearest_kernel<T, D, 4, kExpanded><<<blocks, kThreads, 0, stream>>>(x, n, c, k, labels, mindist);
  else
    narrow_nearest_kernel<T, D, 1, kExpanded><<<blocks, kThreads, 0, stream>>>(x, n, c, k, labels, mindist);
  SKINNY_CHECK_LAUNCH();
}

template <class T, bool kExpanded>
void launch_for(const T* x, std::int64_t n, std::int64_t d, const compute_t<T>* c, std::int64_t k,
                std::int32_t* labels, compute_t<T>* mindist, cudaStream_t stream) {
  switch (d) {
    case 1: return launch<T, 1, kExpanded>(x, n, c, k, labels, mindist, stream);
    case 2: return launch<T, 2, kExpanded>(x, n, c, k, labels, mindist, stream);
    case 3: return launch<T, 3, kExpanded>(x, n, c, k, labels, mindist, stream);
    default: return launch<T, 4, kExpanded>(x, n, c, k, labels, mindist, stream);
  }
}

}  // namespace

template <class T>
void narrow_nearest(const T* x, std::int64_t n, std::int64_t d, const compute_t<T>* c, std::int64_t k,
                    gemm::Math math, std::int32_t* labels, compute_t<T>* mindist, cudaStream_t stream) {
  if (n < 1 || k < 1 || d < 1 || d > kNarrowMaxDims || k > std::int64_t(INT32_MAX))
    throw std::invalid_argument("narrow_nearest: need n, k >= 1 and 1 <= d <= " + std::to_string(kNarrowMaxDims) +
                                " (got n = " + std::to_string(n) + ", d = " + std::to_string(d) +
                                ", k = " + std::to_string(k) + ")");
  if (math == gemm::Math::fast)
    launch_for<T, true>(x, n, d, c, k, labels, mindist, stream);
  else
    launch_for<T, false>(x, n, d, c, k, labels, mindist, stream);
}

template void narrow_nearest(const float*, std::int64_t, std::int64_t, const float*, std::int64_t, gemm::Math,
                             std::int32_t*, float*, cudaStream_t);
template void narrow_nearest(const double*, std::int64_t, std::int64_t, const double*, std::int64_t, gemm::Math,
                             std::int32_t*, double*, cudaStream_t);
template void narrow_nearest(const __half*, std::int64_t, std::int64_t, const float*, std::int64_t, gemm::Math,
                             std::int32_t*, float*, cudaStream_t);
template void narrow_nearest(const __nv_bfloat16*, std::int64_t, std::int64_t, const float*, std::int64_t, gemm::Math,
                             std::int32_t*, float*, cudaStream_t);

}  // namespace skinny::kmeans::detail
