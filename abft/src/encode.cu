// Checksum encoding: through the gemm library (cuBLAS or TSM2: A W and W^T A with the weight matrices
// W), or fused: one kernel reads each tile of A once into shared memory and sums it along both
// directions, writing per-tile partial sums that a second kernel (rows and columns in one launch,
// started before the first ends) adds in a fixed order (deterministic).
#include "detail.hpp"

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/programmatic_launch.hpp>

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
    for (int c = 0; c < kCols; ++c) {
      v[c] = (i < m && c0 + c < n) ? a[(c0 + c) * lda + i] : T(0);
    }
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

/// Where the second pass finds the partial sums of one kind of checksum and where it puts the sums.
/// Output o (0 <= o < extent * blocks) is the checksum pair of position o % extent in density block
/// o / extent: the sum, in order, of parts [first, last) of that block, part p of the pair being
/// part[(p * extent + o % extent) * 2 + {0: e, 1: w}]; it goes to out[(o % extent) * out_pos +
/// (o / extent) * 2 * out_block + {0, 1} * out_weight].
template <class T>
struct PartSums {
  const T* part = nullptr;
  std::int64_t extent = 0, blocks = 0;  ///< blocks == 0: these checksums are not wanted
  std::int64_t parts = 0, parts_per_block = 0;
  T* out = nullptr;
  std::int64_t out_pos = 0, out_block = 0, out_weight = 0;
  __host__ __device__ std::int64_t outputs() const { return extent * blocks; }
};

/// Lanes sharing one output: each adds a contiguous quarter of its parts in order, then the quarters are
/// combined in a fixed order (deterministic); four times the loads in flight of one lane per output,
/// which left the pass latency-bound (12 us for the 13 MB of row parts of a double 20480 x 20480 matrix).
constexpr int kLanesPerSum = 4;

/// The second pass: row checksums (outputs 0 .. rows.outputs() - 1), then column checksums, summed in
/// double. Launched after the fused kernel by launch_after_previous.
template <class T>
__global__ void __launch_bounds__(256) add_parts(const PartSums<T> rows, const PartSums<T> cols) {
  wait_for_previous_grid();
  const std::int64_t gid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int q = static_cast<int>(gid % kLanesPerSum);
  std::int64_t o = gid / kLanesPerSum;
  const bool is_row = o < rows.outputs();
  const PartSums<T> ps = is_row ? rows : cols;
  if (!is_row) o -= rows.outputs();
  const bool valid = o < ps.outputs();
  const std::int64_t pos = valid ? o % ps.extent : 0, blk = valid ? o / ps.extent : 0;
  const std::int64_t first = blk * ps.parts_per_block;
  const std::int64_t last = valid ? min(first + ps.parts_per_block, ps.parts) : first;
  const std::int64_t share = (last - first + kLanesPerSum - 1) / kLanesPerSum;
  const std::int64_t begin = min(last, first + q * share), end = min(last, begin + share);
  double e = 0, w = 0;
#pragma unroll 8
  for (std::int64_t p = begin; p < end; ++p) {
    const T* x = ps.part + (p * ps.extent + pos) * 2;
    e += x[0];
    w += x[1];
  }
  // Every lane takes part (a group of kLanesPerSum lanes is all valid or all not).
#pragma unroll
  for (int off = 1; off < kLanesPerSum; off <<= 1) {
    e += __shfl_xor_sync(0xffffffffu, e, off);
    w += __shfl_xor_sync(0xffffffffu, w, off);
  }
  if (valid && q == 0) {
    T* out = ps.out + pos * ps.out_pos + blk * 2 * ps.out_block;
    out[0] = T(e);
    out[ps.out_weight] = T(w);
  }
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
  const dim3 tile_grid(static_cast<unsigned>(tiles), static_cast<unsigned>(bands));
  fused_kernel<T><<<tile_grid, kThreads, 0, stream>>>(a, m, n, lda, b_rows, b_cols, row_part, col_part);
  SKINNY_CHECK_LAUNCH();
  // R (m x 2 nb, column-major): R(i, 2t + s); K (2 nb x n, column-major): K(2s + t, j).
  PartSums<T> rows, cols;
  if (row_checksums)
    rows = PartSums<T>{row_part, m, blocks(n, density), bands, b_cols == n ? bands : b_cols / kFusedBand,
                       row_checksums, 1, m, m};
  if (col_checksums) {
    const std::int64_t nb = blocks(m, density);
    cols = PartSums<T>{col_part, n, nb, tiles, b_rows == m ? tiles : b_rows / kTileRows, col_checksums, 2 * nb, 1, 1};
  }
  const std::int64_t threads = (rows.outputs() + cols.outputs()) * kLanesPerSum;
  if (threads == 0) return;
  void* args[] = {&rows, &cols};
  const dim3 grid(static_cast<unsigned>(ceil_div(threads, 256)));
  launch_after_previous(reinterpret_cast<const void*>(&add_parts<T>), grid, dim3(256), args, stream);
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
