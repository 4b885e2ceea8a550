// Initial centroids on the device (c: k x d row-major); deterministic from the seed.
#pragma once

#include <skinny/gemm/context.hpp>

#include <cstdint>

namespace skinny::kmeans::detail {

/// k distinct points of x drawn uniformly.
template <class T>
void init_random(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k, std::uint64_t seed, T* c);

/// k-means++: the first centre uniform, each next one with probability proportional to its squared
/// distance to the nearest centre chosen so far. `xnorm` holds ||x_i||^2.
template <class T>
void init_kmeans_plus_plus(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                           std::uint64_t seed, const T* xnorm, T* c);

}  // namespace skinny::kmeans::detail
