// Column means and sums of squared deviations of a block of rows: a streamed fit's mean feature variance
// (the scale of tol), each chunk's moments merged on the host, so no pass needs all of X on the device.
#include "detail.hpp"

#include <skinny/gemm/errors.hpp>

#include <algorithm>

namespace skinny::kmeans::detail {
namespace {

constexpr int kThreads = 256;

/// part[piece][j] = the sum over the piece's rows of x_ij - shift_j (or of its square when `square`);
/// pieces are fixed row ranges, so every sum has a fixed order.
template <class T>
__global__ void piece_sums_kernel(const T* __restrict__ x, std::int64_t rows, std::int64_t d,
                                  std::int64_t rows_per_piece, const double* __restrict__ shift, bool square,
                                  double* __restrict__ part) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * rows_per_piece;
  const std::int64_t r1 = min(rows, r0 + rows_per_piece);
  const double m = shift ? shift[j] : 0.0;
  double s = 0;
  for (std::int64_t i = r0; i < r1; ++i) {
    const double v = static_cast<double>(x[i * d + j]) - m;
    s += square ? v * v : v;
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

template <class T>
void column_moments(const T* x, std::int64_t rows, std::int64_t d, double* scratch, double* out, cudaStream_t stream) {
  const std::int64_t pieces = std::min<std::int64_t>(rows, kMomentScratchRows);
  const std::int64_t rows_per_piece = (rows + pieces - 1) / pieces;
  const unsigned cols = static_cast<unsigned>((d + kThreads - 1) / kThreads);
  const dim3 grid(cols, static_cast<unsigned>((rows + rows_per_piece - 1) / rows_per_piece));
  // Two passes over the chunk (it is on the device): the mean first, then the squared deviations from
  // it, which keeps the cancellation of a one-pass sum of squares out.
  piece_sums_kernel<<<grid, kThreads, 0, stream>>>(x, rows, d, rows_per_piece, nullptr, false, scratch);
  SKINNY_CHECK_LAUNCH();
  add_pieces_kernel<<<cols, kThreads, 0, stream>>>(scratch, grid.y, d, 1.0 / double(rows), out);
  SKINNY_CHECK_LAUNCH();
  piece_sums_kernel<<<grid, kThreads, 0, stream>>>(x, rows, d, rows_per_piece, out, true, scratch);
  SKINNY_CHECK_LAUNCH();
  add_pieces_kernel<<<cols, kThreads, 0, stream>>>(scratch, grid.y, d, 1.0, out + d);
  SKINNY_CHECK_LAUNCH();
}

template void column_moments(const float*, std::int64_t, std::int64_t, double*, double*, cudaStream_t);
template void column_moments(const double*, std::int64_t, std::int64_t, double*, double*, cudaStream_t);

}  // namespace skinny::kmeans::detail
