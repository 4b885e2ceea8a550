// Checksum encoding: through the gemm library (cuBLAS or TSM2: A W and W^T A with the weight matrices
// W), or fused: one kernel reads each tile of A once into shared memory and sums it along both
// directions, writing per-tile partial sums that a second pass adds in a fixed order (deterministic).
#include "detail.hpp"

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace skinny::abft {
namespace detail {
namespace {

constexpr int kTileRows = 256;   ///< rows of a tile: one per thread for the row sums
constexpr int kThreads = 256;
constexpr int kPad = 8;          ///< column stride = 264 words: the columns a warp sums hit distinct banks
/// Columns of a tile (32 KB of shared memory either way); the threads of a column share its rows.
template <class T>
constexpr int kTileCols = sizeof(T) == 8 ? 16 : 32;

/// Block (row tile, column band): sums its tiles; row partials per (band, row), column partials per
/// (row tile, column), both weights.
template <class T>
__global__ void __launch_bounds__(kThreads) fused_kernel(const T* __restrict__ a, std::int64_t m, std::int64_t n,
                                                         std::int64_t lda, std::int64_t b_rows, std::int64_t b_cols,
                                                         T* __restrict__ row_part, T* __restrict__ col_part) {
  constexpr int kCols = kTileCols<T>, kPerCol = kThreads / kCols, kTilesPerBand = int(kFusedBand) / kCols;
  __shared__ T tile[kCols][kTileRows + kPad];
  const int tid = threadIdx.x;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.x) * kTileRows;
  const std::int64_t band = blockIdx.y;
  const std::int64_t i = r0 + tid;  // the row this thread sums
  const int col = tid / kPerCol, q = tid % kPerCol;  // the column this thread helps sum, and its share of rows
  T row_e = 0, row_w = 0;
  // Weights restart in every density block; a tile never straddles two (density: a multiple of the band),
  // so one division per tile gives them all.
  const T row_weight0 = T(r0 % b_rows + 1);
  // The next tile's loads are issued before this tile is summed, so a block keeps its reads in flight.
  const auto load = [&](std::int64_t c0, T (&v)[kCols]) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) v[c] = (i < m && c0 + c < n) ? a[(c0 + c) * lda + i] : T(0);
  };
  T next[kCols];
  load(band * kFusedBand, next);
  for (int t = 0; t < kTilesPerBand; ++t) {
    const std::int64_t c0 = band * kFusedBand + std::int64_t(t) * kCols;
    if (c0 >= n) break;
    T v[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) v[c] = next[c];
    if (t + 1 < kTilesPerBand && c0 + kCols < n) load(c0 + kCols, next);
    __syncthreads();  // the previous tile has been read
#pragma unroll
    for (int c = 0; c < kCols; ++c) tile[c][tid] = v[c];
    __syncthreads();
    const T col_weight0 = T(c0 % b_cols + 1);
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      row_e += v[c];
      row_w += (col_weight0 + T(c)) * v[c];
    }
    T ce = 0, cw = 0;
#pragma unroll
    for (int k = 0; k < kTileRows / kPerCol; ++k) {
      const int r = q + kPerCol * k;
      const T x = tile[col][r];
      ce += x;
      cw += (row_weight0 + T(r)) * x;
    }
#pragma unroll
    for (int off = 1; off < kPerCol; off <<= 1) {
      ce += __shfl_xor_sync(0xffffffffu, ce, off);
      cw += __shfl_xor_sync(0xffffffffu, cw, off);
    }
    const std::int64_t j = c0 + col;
    if (q == 0 && j < n) {
      T* out = col_part + (static_cast<std::int64_t>(blockIdx.x) * n + j) * 2;
      out[0] = ce;
      out[1] = cw;
    }
  }
  if (i < m) {
    T* out = row_part + (band * m + i) * 2;
    out[0] = row_e;
    out[1] = row_w;
  }
}

/// R(i, 2t + s) = sum of the bands of column block t (in order), s = 0 (e) or 1 (w).
template <class T>
__global__ void add_row_parts(const T* __restrict__ row_part, std::int64_t m, std::int64_t bands,
                              std::int64_t bands_per_block, T* __restrict__ r) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t t = blockIdx.y;
  if (i >= m) return;
  double e = 0, w = 0;
  const std::int64_t end = (t + 1) * bands_per_block < bands ? (t + 1) * bands_per_block : bands;
  for (std::int64_t b = t * bands_per_block; b < end; ++b) {
    e += row_part[(b * m + i) * 2];
    w += row_part[(b * m + i) * 2 + 1];
  }
  r[(2 * t) * m + i] = T(e);
  r[(2 * t + 1) * m + i] = T(w);
}

/// K(2s + t, j) = sum of the row tiles of row block s (in order).
template <class T>
__global__ void add_col_parts(const T* __restrict__ col_part, std::int64_t n, std::int64_t tiles,
                              std::int64_t tiles_per_block, std::int64_t ldk, T* __restrict__ k) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t s = blockIdx.y;
  if (j >= n) return;
  double e = 0, w = 0;
  const std::int64_t end = (s + 1) * tiles_per_block < tiles ? (s + 1) * tiles_per_block : tiles;
  for (std::int64_t t = s * tiles_per_block; t < end; ++t) {
    e += col_part[(t * n + j) * 2];
    w += col_part[(t * n + j) * 2 + 1];
  }
  k[j * ldk + 2 * s] = T(e);
  k[j * ldk + 2 * s + 1] = T(w);
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::size_t fused_workspace_bytes(std::int64_t m, std::int64_t n, int elem_bytes) {
  return static_cast<std::size_t>(ceil_div(n, kFusedBand) * m * 2 + ceil_div(m, kTileRows) * n * 2) * elem_bytes;
}

template <class T>
void fused_encode(const T* a, std::int64_t m, std::int64_t n, std::int64_t lda, std::int64_t density, T* row_checksums,
                  T* col_checksums, void* workspace, cudaStream_t stream) {
  const std::int64_t b_rows = density > 0 && density < m ? density : m;
  const std::int64_t b_cols = density > 0 && density < n ? density : n;
  const std::int64_t bands = ceil_div(n, kFusedBand), tiles = ceil_div(m, kTileRows);
  T* row_part = static_cast<T*>(workspace);
  T* col_part = row_part + bands * m * 2;
  fused_kernel<T><<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(bands)), kThreads, 0, stream>>>(
      a, m, n, lda, b_rows, b_cols, row_part, col_part);
  SKINNY_CHECK_LAUNCH();
  if (row_checksums) {
    const std::int64_t nb = blocks(n, density);
    const std::int64_t per_block = b_cols == n ? bands : b_cols / kFusedBand;
    add_row_parts<T><<<dim3(static_cast<unsigned>(ceil_div(m, 256)), static_cast<unsigned>(nb)), 256, 0, stream>>>(
        row_part, m, bands, per_block, row_checksums);
    SKINNY_CHECK_LAUNCH();
  }
  if (col_checksums) {
    const std::int64_t nb = blocks(m, density);
    const std::int64_t per_block = b_rows == m ? tiles : b_rows / kTileRows;
    add_col_parts<T><<<dim3(static_cast<unsigned>(ceil_div(n, 256)), static_cast<unsigned>(nb)), 256, 0, stream>>>(
        col_part, n, tiles, per_block, 2 * nb, col_checksums);
    SKINNY_CHECK_LAUNCH();
  }
}

/// The weight matrix of one dimension: extent x 2 nb, column-major, block-diagonal pairs (1, position).
template <class T>
DeviceBuffer<T> weight_matrix(std::int64_t extent, std::int64_t density) {
  const std::int64_t nb = blocks(extent, density);
  const std::int64_t b = density > 0 && density < extent ? density : extent;
  std::vector<T> w(static_cast<std::size_t>(extent * 2 * nb), T(0));
  for (std::int64_t i = 0; i < extent; ++i) {
    const std::int64_t t = i / b;
    w[static_cast<std::size_t>((2 * t) * extent + i)] = T(1);
    w[static_cast<std::size_t>((2 * t + 1) * extent + i)] = T(i - t * b + 1);
  }
  return DeviceBuffer<T>(w);
}

}  // namespace detail

template <class T>
Encoder<T>::Encoder(Context& ctx, std::int64_t m, std::int64_t n, std::int64_t lda, const EncodeParams& params)
    : ctx_(ctx), m_(m), n_(n), lda_(lda), params_(params) {
  const std::string why = cannot_encode(params.backend, m, n, params.density);
  if (!why.empty()) throw std::invalid_argument("abft::encode: " + why);
  if (lda < m) throw std::invalid_argument("abft::encode: lda = " + std::to_string(lda) + " < m = " + std::to_string(m));
  if (params.backend == Backend::fused) return;
  if (params.side != Side::cols) w_cols_ = detail::weight_matrix<T>(n, params.density);
  if (params.side != Side::rows) w_rows_ = detail::weight_matrix<T>(m, params.density);
}

template <class T>
void Encoder<T>::run(const T* a, T* row_checksums, T* col_checksums) {
  const bool rows = params_.side != Side::cols, cols = params_.side != Side::rows;
  if (a == nullptr) throw std::invalid_argument("abft::encode: A is null");
  if ((rows && !row_checksums) || (cols && !col_checksums))
    throw std::invalid_argument("abft::encode: the output for the requested checksums is null");
  if (params_.backend == Backend::fused) {
    void* ws = ctx_.workspace(detail::fused_workspace_bytes(m_, n_, sizeof(T)));
    detail::fused_encode(a, m_, n_, lda_, params_.density, rows ? row_checksums : nullptr,
                         cols ? col_checksums : nullptr, ws, ctx_.stream());
    return;
  }
  const gemm::Algo algo = params_.backend == Backend::tsm2 ? gemm::Algo::tsm2 : gemm::Algo::cublas;
  const gemm::MatrixView<const T> av = gemm::col_major<const T>(a, m_, n_, lda_);
  if (rows) {
    const std::int64_t nb = blocks(n_, params_.density);
    gemm::gemm(ctx_, {av, gemm::col_major<const T>(w_cols_.data(), n_, 2 * nb), gemm::col_major(row_checksums, m_, 2 * nb)},
               algo);
  }
  if (cols) {
    const std::int64_t nb = blocks(m_, params_.density);
    gemm::gemm(ctx_, {gemm::col_major<const T>(w_rows_.data(), m_, 2 * nb).transposed(), av,
                      gemm::col_major(col_checksums, 2 * nb, n_)},
               algo);
  }
}

template <class T>
void encode(Context& ctx, const T* a, std::int64_t m, std::int64_t n, std::int64_t lda, const EncodeParams& params,
            T* row_checksums, T* col_checksums) {
  Encoder<T> encoder(ctx, m, n, lda, params);
  encoder.run(a, row_checksums, col_checksums);
  ctx.synchronize();  // the encoder's weights are freed on return
}

template class Encoder<float>;
template class Encoder<double>;
template void encode(Context&, const float*, std::int64_t, std::int64_t, std::int64_t, const EncodeParams&, float*, float*);
template void encode(Context&, const double*, std::int64_t, std::int64_t, std::int64_t, const EncodeParams&, double*,
                     double*);
template void detail::fused_encode(const float*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, float*, float*,
                                   void*, cudaStream_t);
template void detail::fused_encode(const double*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, double*,
                                   double*, void*, cudaStream_t);

}  // namespace skinny::abft
