// half_rows(): the copy and its range check in one read of X.
#include "half_rows.hpp"

#include "detail.hpp"

#include <skinny/gemm/errors.hpp>

#include <algorithm>
#include <cstring>

namespace skinny::kmeans::detail {
namespace {

constexpr int kThreads = 256;

/// dst (when not null) = the n x d values x rounded to half in rows of ld >= d, zeros past d; the largest
/// |x| into *max_bits (the bits of a non-negative float order like the float: an integer atomicMax, the
/// same whatever the order).
__global__ void half_copy_kernel(const float* __restrict__ x, std::int64_t n, std::int64_t d, std::int64_t ld,
                                 __half* __restrict__ dst, unsigned* max_bits) {
  float largest = 0;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n * ld;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = ld == d ? 0 : e / ld, col = e - row * ld;  // no division where rows are whole
    const float v = ld == d ? x[e] : col < d ? x[row * d + col] : 0.0f;
    if (dst != nullptr) dst[e] = __float2half_rn(v);
    largest = fmaxf(largest, fabsf(v));
  }
  for (int off = 16; off > 0; off >>= 1) largest = fmaxf(largest, __shfl_xor_sync(0xffffffffu, largest, off));
  if (threadIdx.x % 32 == 0) atomicMax(max_bits, __float_as_uint(largest));
}

/// Queues the kernel (dst may be null) and returns the largest |x| (waits for the stream).
float copy_and_measure(const float* x, std::int64_t n, std::int64_t d, std::int64_t ld, __half* dst,
                       cudaStream_t stream) {
  DeviceBuffer<unsigned> max_bits(1);
  SKINNY_CUDA_TRY(cudaMemsetAsync(max_bits.data(), 0, max_bits.bytes(), stream));
  const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>((n * ld + kThreads - 1) / kThreads, 1, 4096));
  half_copy_kernel<<<blocks, kThreads, 0, stream>>>(x, n, d, ld, dst, max_bits.data());
  SKINNY_CHECK_LAUNCH();
  unsigned bits = 0;
  SKINNY_CUDA_TRY(cudaMemcpyAsync(&bits, max_bits.data(), sizeof bits, cudaMemcpyDeviceToHost, stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  float largest;
  std::memcpy(&largest, &bits, sizeof largest);
  return largest;
}

bool half_holds(float largest) { return largest >= kHalfRowsMin && largest <= kHalfRowsMax; }

bool copy_fits(std::int64_t n, std::int64_t ld) {
  return static_cast<std::size_t>(n) * static_cast<std::size_t>(ld * 2 + 4) <= available_device_memory();
}

}  // namespace

bool half_rows_possible(const float* x, std::int64_t n, std::int64_t d, cudaStream_t stream) {
  const std::int64_t ld = nearest_row<__half>(d);
  return copy_fits(n, ld) && half_holds(copy_and_measure(x, n, d, ld, nullptr, stream));
}

HalfRows half_rows(const float* x, std::int64_t n, std::int64_t d, cudaStream_t stream) {
  HalfRows h;
  const std::int64_t ld = nearest_row<__half>(d);
  if (!copy_fits(n, ld)) return h;
  h.rows = DeviceBuffer<__half>(static_cast<std::size_t>(n * ld));
  if (!half_holds(copy_and_measure(x, n, d, ld, h.rows.data(), stream))) return HalfRows{};
  h.sq_norms = DeviceBuffer<float>(static_cast<std::size_t>(n));
  row_sq_norms(h.rows.data(), n, ld, h.sq_norms.data(), stream);
  h.ld = ld;
  return h;
}

}  // namespace skinny::kmeans::detail
