// A half copy of float points for one-product distances: 16-bit products on the tensor cores take about
// two thirds of TF32's time (H200, 1M x 128, k = 1024: 0.59 against 0.89 ms) and keep the same 11-bit
// significands, rounded to nearest where TF32 truncates. k-means||'s sampling rounds, fast mode's Lloyd
// iterations and exact mode's certified first pass (lloyd.cu) read it instead of X. bfloat16 points get
// one for exact mode's first pass: they convert exactly, and the centres the pass rounds to half keep 11
// bits where bfloat16 keeps 8, so the certificate leaves far fewer points to re-check.
#pragma once

#include <skinny/gemm/device_buffer.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace skinny::kmeans::detail {

/// The range of the largest |x| for which half serves: at most 32768 (half's largest finite value is 65504;
/// the margin keeps centres, means of the same points, finite too) and at least 2^-8 (smaller data would lie
/// among half's subnormals, with less than TF32's precision).
constexpr float kHalfRowsMax = 32768.0f, kHalfRowsMin = 1.0f / 256;

/// X rounded to half, rows padded with zeros to nearest_row<__half>(d) (the zeros add nothing to products
/// or norms), the squared norms of the copy's rows and, for exact labels, each row's distance to X's.
struct HalfRows {
  DeviceBuffer<__half> rows;
  DeviceBuffer<float> sq_norms;
  DeviceBuffer<float> errors;  ///< ||x^_i - x_i|| rounded up (half_rows' `with_errors`), else empty
  std::int64_t ld = 0;
  bool empty() const { return rows.size() == 0; }
};

/// Whether half_rows would give a copy of the n x d points x (S: float or __nv_bfloat16): their largest |x|
/// within [kHalfRowsMin, kHalfRowsMax] and the copy's bytes free on the device. One read of x; waits for
/// the stream.
template <class S>
bool half_rows_possible(const S* x, std::int64_t n, std::int64_t d, cudaStream_t stream);

/// The copy, or an empty one where half_rows_possible says no (the copy and the range check are one
/// read of x; `with_errors`, the rows' distances to x's another). Waits for the stream.
template <class S>
HalfRows half_rows(const S* x, std::int64_t n, std::int64_t d, cudaStream_t stream, bool with_errors = false);

}  // namespace skinny::kmeans::detail
