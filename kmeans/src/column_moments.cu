// Column means and sums of squared deviations of a block of rows: a streamed fit's mean feature variance
// (the scale of tol), each chunk's moments merged on the host, so no pass needs all of X on the device.
#include "column_pieces.cuh"
#include "detail.hpp"

#include <skinny/gemm/errors.hpp>

#include <algorithm>

namespace skinny::kmeans::detail {

template <class T>
void column_moments(const T* x, std::int64_t rows, std::int64_t d, double* scratch, double* out, cudaStream_t stream) {
  const std::int64_t pieces = std::min<std::int64_t>(rows, kMomentScratchRows);
  const std::int64_t rows_per_piece = (rows + pieces - 1) / pieces;
  constexpr int kThreads = 256;
  const unsigned cols = static_cast<unsigned>((d + kThreads - 1) / kThreads);
  const dim3 grid(cols, static_cast<unsigned>((rows + rows_per_piece - 1) / rows_per_piece));
  // Two passes over the chunk (it is on the device): the mean first, then the squared deviations from
  // it, which keeps the cancellation of a one-pass sum of squares out.
  column_sums_kernel<<<grid, kThreads, 0, stream>>>(x, rows, d, rows_per_piece, nullptr, scratch);
  SKINNY_CHECK_LAUNCH();
  add_pieces_kernel<<<cols, kThreads, 0, stream>>>(scratch, grid.y, d, 1.0 / double(rows), out);
  SKINNY_CHECK_LAUNCH();
  column_sums_kernel<<<grid, kThreads, 0, stream>>>(x, rows, d, rows_per_piece, out, scratch);
  SKINNY_CHECK_LAUNCH();
  add_pieces_kernel<<<cols, kThreads, 0, stream>>>(scratch, grid.y, d, 1.0, out + d);
  SKINNY_CHECK_LAUNCH();
}

template void column_moments(const float*, std::int64_t, std::int64_t, double*, double*, cudaStream_t);
template void column_moments(const double*, std::int64_t, std::int64_t, double*, double*, cudaStream_t);

}  // namespace skinny::kmeans::detail
