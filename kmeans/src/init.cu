// Initial centroids: k-means++ (D^2 sampling), k distinct random points, or the caller's.
#include "init.hpp"

#include "detail.hpp"

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>

#include <thrust/binary_search.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/scan.h>

#include <unordered_map>

namespace skinny::kmeans::detail {
namespace {

/// Uniform double in [0, 1) from the generator state (advances it).
double uniform(std::uint64_t& state) { return double(mix(state++) >> 11) * 0x1.0p-53; }

template <class T>
void copy_row(T* dst, const T* x, std::int64_t row, std::int64_t d, cudaStream_t stream) {
  SKINNY_CUDA_TRY(cudaMemcpyAsync(dst, x + row * d, static_cast<std::size_t>(d) * sizeof(T), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

template <class T>
void init_random(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k, std::uint64_t seed, T* c) {
  // k draws of a Fisher-Yates shuffle, the swaps kept in a map: O(k) for any n.
  std::uint64_t state = mix(seed ^ 0x52414e444f4dull);
  std::unordered_map<std::int64_t, std::int64_t> swapped;
  auto at = [&](std::int64_t i) { auto it = swapped.find(i); return it == swapped.end() ? i : it->second; };
  for (std::int64_t i = 0; i < k; ++i) {
    const std::int64_t j = i + static_cast<std::int64_t>(mix(state++) % static_cast<std::uint64_t>(n - i));
    const std::int64_t pick = at(j);
    swapped[j] = at(i);
    copy_row(c + i * d, x, pick, d, ctx.stream());
  }
}

template <class T>
void init_kmeans_plus_plus(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                           std::uint64_t seed, const T* xnorm, T* c) {
  const cudaStream_t stream = ctx.stream();
  std::uint64_t state = mix(seed ^ 0x4b4d45414e53ull);
  DeviceBuffer<double> d2(static_cast<std::size_t>(n)), prefix(static_cast<std::size_t>(n));
  DeviceBuffer<T> g(static_cast<std::size_t>(n));
  DeviceBuffer<std::int64_t> found(1);
  std::int64_t pick = static_cast<std::int64_t>(mix(state++) % static_cast<std::uint64_t>(n));
  for (std::int64_t i = 0; i < k; ++i) {
    copy_row(c + i * d, x, pick, d, stream);
    if (i + 1 == k) break;
    // Distances to the new centre through the gemm library (X c, a GEMV), then D^2 = the minimum so far.
    gemm::gemm(ctx, {gemm::row_major<const T>(x, n, d), gemm::col_major<const T>(c + i * d, d, 1),
                     gemm::row_major(g.data(), n, 1)});
    T cnorm{};
    SKINNY_CUDA_TRY(cudaMemcpyAsync(&cnorm, xnorm + pick, sizeof(T), cudaMemcpyDeviceToHost, stream));
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
    min_distance_update(d2.data(), g.data(), xnorm, cnorm, n, i == 0, stream);
    // Draw the next centre with probability D^2 / sum D^2: a scan, then a binary search.
    thrust::inclusive_scan(thrust::cuda::par_nosync.on(stream), d2.data(), d2.data() + n, prefix.data());
    double total = 0;
    SKINNY_CUDA_TRY(cudaMemcpyAsync(&total, prefix.data() + n - 1, sizeof total, cudaMemcpyDeviceToHost, stream));
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
    const double u = uniform(state);
    if (!(total > 0)) {  // every point sits on a chosen centre: any point will do
      pick = static_cast<std::int64_t>(mix(state++) % static_cast<std::uint64_t>(n));
      continue;
    }
    const double target = u * total;
    const double* p = prefix.data();
    std::int64_t* out = found.data();
    thrust::for_each_n(thrust::cuda::par_nosync.on(stream), thrust::counting_iterator<int>(0), 1,
                       [=] __device__(int) {
                         const double* it = thrust::upper_bound(thrust::seq, p, p + n, target);
                         *out = it - p < n ? it - p : n - 1;
                       });
    SKINNY_CHECK_LAUNCH();
    SKINNY_CUDA_TRY(cudaMemcpyAsync(&pick, found.data(), sizeof pick, cudaMemcpyDeviceToHost, stream));
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  }
}

template void init_random(Context&, const float*, std::int64_t, std::int64_t, std::int64_t, std::uint64_t, float*);
template void init_random(Context&, const double*, std::int64_t, std::int64_t, std::int64_t, std::uint64_t, double*);
template void init_kmeans_plus_plus(Context&, const float*, std::int64_t, std::int64_t, std::int64_t, std::uint64_t,
                                    const float*, float*);
template void init_kmeans_plus_plus(Context&, const double*, std::int64_t, std::int64_t, std::int64_t, std::uint64_t,
                                    const double*, double*);

}  // namespace skinny::kmeans::detail
