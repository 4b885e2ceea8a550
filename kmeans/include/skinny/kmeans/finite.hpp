// Input checking on the GPU: scikit-learn refuses NaN and infinity in X, and so do skinny's Python
// bindings, for device arrays too (without copying them to the host).
#pragma once

#include <skinny/gemm/context.hpp>

#include <cstdint>

namespace skinny::kmeans {

/// Number of NaN or infinite values among the `count` values at x (device). Waits for the result.
/// Throws std::invalid_argument when x is null and count > 0, or count < 0.
template <class T>
std::int64_t count_non_finite(Context& ctx, const T* x, std::int64_t count);

}  // namespace skinny::kmeans
