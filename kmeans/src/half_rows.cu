// half_rows(): the copy and its range check in one read of X.
#include "half_rows.hpp"

#include "detail.hpp"
#include "element.cuh"

#include <skinny/gemm/errors.hpp>

#include <algorithm>
#include <cstring>

namespace skinny::kmeans::detail {
namespace {

constexpr int kThreads = 256;

/// dst (when not null) = the n x d values x (float or bfloat16) rounded to half in rows of ld >= d, zeros
/// past d; the largest |x| into *max_bits (the bits of a non-negative float order like the float: an
/// integer atomicMax, the same whatever the order).
template <class S>
__global__ void half_copy_kernel(const S* __restrict__ x, std::int64_t n, std::int64_t d, std::int64_t ld,
                                 __half* __restrict__ dst, unsigned* max_bits) {
  float largest = 0;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n * ld;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = ld == d ? 0 : e / ld, col = e - row * ld;  // no division where rows are whole
    const float v = ld == d ? to_float(x[e]) : col < d ? to_float(x[row * d + col]) : 0.0f;
    if (dst != nullptr) dst[e] = __float2half_rn(v);
    largest = fmaxf(largest, fabsf(v));
  }
  for (int off = 16; off > 0; off >>= 1) largest = fmaxf(largest, __shfl_xor_sync(0xffffffffu, largest, off));
  if (threadIdx.x % 32 == 0) atomicMax(max_bits, __float_as_uint(largest));
}

/// errors[i] = ||half(x_i) - x_i||, a warp a row: each difference and its square exact in double, their sum
/// within d 2^-53 relative, the root rounded up with 2^-20 to spare (bfloat16 rows within half's normal
/// range: 0).
template <class S>
__global__ void half_errors_kernel(const S* __restrict__ x, std::int64_t n, std::int64_t d,
                                   float* __restrict__ errors) {
  const int lane = threadIdx.x % 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; i < n; i += warps) {
    double sq = 0;
    for (std::int64_t c = lane; c < d; c += 32) {
      const float v = to_float(x[i * d + c]);
      const double diff = double(v) - double(__half2float(__float2half_rn(v)));
      sq += diff * diff;
    }
    for (int off = 16; off > 0; off >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, off);
    if (lane == 0) errors[i] = __double2float_ru(__dsqrt_ru(sq) * (1 + 0x1p-20));
  }
}

/// Queues the kernel (dst may be null) and returns the largest |x| (waits for the stream).
template <class S>
float copy_and_measure(const S* x, std::int64_t n, std::int64_t d, std::int64_t ld, __half* dst,
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

bool copy_fits(std::int64_t n, std::int64_t ld, bool with_errors) {
  return static_cast<std::size_t>(n) * static_cast<std::size_t>(ld * 2 + (with_errors ? 8 : 4)) <=
         available_device_memory();
}

}  // namespace

template <class S>
bool half_rows_possible(const S* x, std::int64_t n, std::int64_t d, cudaStream_t stream) {
  const std::int64_t ld = nearest_row<__half>(d);
  return copy_fits(n, ld, false) && half_holds(copy_and_measure(x, n, d, ld, nullptr, stream));
}

template <class S>
HalfRows half_rows(const S* x, std::int64_t n, std::int64_t d, cudaStream_t stream, bool with_errors) {
  HalfRows h;
  const std::int64_t ld = nearest_row<__half>(d);
  if (!copy_fits(n, ld, with_errors)) return h;
  h.rows = DeviceBuffer<__half>(static_cast<std::size_t>(n * ld));
  if (!half_holds(copy_and_measure(x, n, d, ld, h.rows.data(), stream))) return HalfRows{};
  h.sq_norms = DeviceBuffer<float>(static_cast<std::size_t>(n));
  row_sq_norms(h.rows.data(), n, ld, h.sq_norms.data(), stream);
  if (with_errors) {
    h.errors = DeviceBuffer<float>(static_cast<std::size_t>(n));
    const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>((n * 32 + kThreads - 1) / kThreads, 1, 4096));
    half_errors_kernel<<<blocks, kThreads, 0, stream>>>(x, n, d, h.errors.data());
    SKINNY_CHECK_LAUNCH();
  }
  h.ld = ld;
  return h;
}

template bool half_rows_possible(const float*, std::int64_t, std::int64_t, cudaStream_t);
template bool half_rows_possible(const __nv_bfloat16*, std::int64_t, std::int64_t, cudaStream_t);
template HalfRows half_rows(const float*, std::int64_t, std::int64_t, cudaStream_t, bool);
template HalfRows half_rows(const __nv_bfloat16*, std::int64_t, std::int64_t, cudaStream_t, bool);

}  // namespace skinny::kmeans::detail
