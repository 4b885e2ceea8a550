// The element types of X on the device: float, double, and the 16-bit __half and __nv_bfloat16 (whose
// centroids and distances are float: compute_t in kmeans.hpp). Kernels read any of them through these.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace skinny::kmeans::detail {

template <class T>
constexpr bool is_16bit = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

__device__ __forceinline__ double to_double(float v) { return v; }
__device__ __forceinline__ double to_double(double v) { return v; }
__device__ __forceinline__ double to_double(__half v) { return __half2float(v); }
__device__ __forceinline__ double to_double(__nv_bfloat16 v) { return __bfloat162float(v); }

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

/// N consecutive elements of a row, loaded together (one vector load).
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T e[N];
};

}  // namespace skinny::kmeans::detail
