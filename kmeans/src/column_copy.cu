// The column-major copy of X (Params::column_copy): a tiled transpose through shared memory, so both
// the reads of X's rows and the writes of the copy's columns are coalesced.
#include "detail.hpp"

#include <skinny/gemm/errors.hpp>

#include <algorithm>

namespace skinny::kmeans::detail {
namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  ///< a block of 32 x 8 threads moves a 32 x 32 tile in 4 passes

/// Grid-stride over 32 x 32 tiles: tile (ti, tj) covers rows 32 ti .. and columns 32 tj .. of x.
template <class T>
__global__ void __launch_bounds__(kTile * kRowsPerPass) to_columns_kernel(const T* __restrict__ x, std::int64_t n,
                                                                          std::int64_t d, T* __restrict__ xt) {
  __shared__ T tile[kTile][kTile + 1];  // +1: the column reads hit 32 distinct banks
  const std::int64_t tiles_d = (d + kTile - 1) / kTile;
  const std::int64_t tiles = (n + kTile - 1) / kTile * tiles_d;
  for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const std::int64_t i0 = t / tiles_d * kTile, j0 = t % tiles_d * kTile;
    __syncthreads();  // the previous tile has been written out
    for (int r = threadIdx.y; r < kTile; r += kRowsPerPass) {
      const std::int64_t i = i0 + r, j = j0 + threadIdx.x;
      if (i < n && j < d) tile[r][threadIdx.x] = x[i * d + j];
    }
    __syncthreads();
    for (int c = threadIdx.y; c < kTile; c += kRowsPerPass) {
      const std::int64_t j = j0 + c, i = i0 + threadIdx.x;
      if (i < n && j < d) xt[j * n + i] = tile[threadIdx.x][c];
    }
  }
}

}  // namespace

template <class T>
void to_columns(const T* x, std::int64_t n, std::int64_t d, T* xt, cudaStream_t stream) {
  const int sms = multiprocessors();
  const std::int64_t tiles = (n + kTile - 1) / kTile * ((d + kTile - 1) / kTile);
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(tiles, 16LL * sms));
  to_columns_kernel<<<blocks, dim3(kTile, kRowsPerPass), 0, stream>>>(x, n, d, xt);
  SKINNY_CHECK_LAUNCH();
}

template void to_columns(const float*, std::int64_t, std::int64_t, float*, cudaStream_t);
template void to_columns(const double*, std::int64_t, std::int64_t, double*, cudaStream_t);

}  // namespace skinny::kmeans::detail
