// Random inputs generated on the GPU (reproducible from a seed) and a norm-wise comparison on the GPU,
// so benchmarks at 8192^2 neither wait for the host nor copy results back.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace skinny::apps {

/// x[i] = uniform in [lo, hi), a pure function of (seed, i): the same seed gives the same data anywhere.
template <class T>
void fill_uniform(T* x, std::size_t count, std::uint64_t seed, double lo, double hi, cudaStream_t stream);

/// Fills with a value (for poisoning outputs with NaN before a run).
template <class T>
void fill_value(T* x, std::size_t count, double value, cudaStream_t stream);

/// out[i] = in[i] rounded to the 16-bit T (__half or __nv_bfloat16), for 16-bit runs of float data.
template <class T>
void narrow(const float* in, T* out, std::size_t count, cudaStream_t stream);

/// ||x - ref||_2 / ||ref||_2 over `count` elements, accumulated in double; +inf if x holds NaN/Inf.
template <class T>
double relative_error(const T* x, const T* ref, std::size_t count, cudaStream_t stream);

}  // namespace skinny::apps
