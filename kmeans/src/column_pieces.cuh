// Column sums of a block of rows in fixed pieces of rows, then the pieces added in order: every sum has a
// fixed order (deterministic). The mean feature variance of fit (assign.cu) and a streamed chunk's column
// moments (column_moments.cu) both run these two passes. Included by those two files only.
#pragma once

#include "element.cuh"

#include <cstdint>

namespace skinny::kmeans::detail {
namespace {

/// part[piece][j] = sum over this piece's rows of f(x_ij); pieces are fixed row ranges, so the order of
/// every sum is fixed. f(x) = x (pass 1) or (x - mean_j)^2 (pass 2).
template <class T>
__global__ void column_sums_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d, std::int64_t rows_per_piece,
                                   const double* __restrict__ mean, double* __restrict__ part) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * rows_per_piece;
  const std::int64_t r1 = r0 + rows_per_piece < n ? r0 + rows_per_piece : n;
  double s = 0;
  const double m = mean ? mean[j] : 0.0;
  for (std::int64_t i = r0; i < r1; ++i) {
    const double v = to_double(x[i * d + j]) - m;
    s += mean ? v * v : v;
  }
  part[static_cast<std::int64_t>(blockIdx.y) * d + j] = s;
}

/// out[j] = scale x the sum of the pieces' values of column j, in piece order.
__global__ void add_pieces_kernel(const double* __restrict__ part, std::int64_t pieces, std::int64_t d, double scale,
                                  double* __restrict__ out) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  double s = 0;
  for (std::int64_t p = 0; p < pieces; ++p) s += part[p * d + j];
  out[j] = s * scale;
}

}  // namespace
}  // namespace skinny::kmeans::detail
