// Sums of a matrix along both directions against weight vectors, in one read: the pass ProtectedGemm
// makes over each operand and over C. For X (rows x cols, column-major, packed):
//   row sums     R(t, i) = sum_j f_t(x_ij) u_t(j)       column sums  K(t, j) = sum_i f_t(x_ij) p_t(i)
// where f_t is x itself for a side's first `plain` weights and the magnitude (x^2 or |x|) for the others,
// and a weight is a vector in device memory or its square. One kernel reads tiles of X once, sums each
// tile in T along both directions (the encoder's scheme, encode.cu) and writes partial sums; a second
// adds them in a fixed order in double (deterministic), or a caller's kernel does as it uses them.
#pragma once

#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/programmatic_launch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace skinny::abft::detail {

enum class Magnitude { square, absolute };

/// One weight vector along a dimension: w(pos) = values[pos], or its square.
template <class T>
struct Weight {
  const T* values = nullptr;
  bool squared = false;
};

/// One side's sums: kPlain weights applied to x, then kMagnitude to its magnitude; `out` is
/// (kPlain + kMagnitude) x extent, value-major: out[t * extent + pos].
template <class T, int kPlain, int kMagnitude>
struct SideSums {
  static constexpr int kPlainTerms = kPlain, kTerms = kPlain + kMagnitude;
  static constexpr bool kCheckWeights = false;
  Weight<T> w[kTerms > 0 ? kTerms : 1];
  T* out = nullptr;
};

/// A side weighed by the checks' own weights, alternating e = (1, ..., 1) and w = (1, 2, 3, ...) (term t:
/// e if t is even): every pass over C and the operands' first passes. The kernel computes them where it
/// uses them instead of reading them from shared memory, whose traffic bounds the passes.
template <class T, int kPlain, int kMagnitude>
struct CheckWeightSums {
  static constexpr int kPlainTerms = kPlain, kTerms = kPlain + kMagnitude;
  static constexpr bool kCheckWeights = true;
  T* out = nullptr;
};

constexpr int kSumThreads = 256;  ///< also the rows of a tile: one per thread for the row sums
constexpr int kSumPad = 8;        ///< column stride = 264 words: the columns a warp sums hit distinct banks
constexpr int kMaxTilesPerBand = 16;
/// Columns of a tile (33 KB of shared memory either way); the threads of a column share its rows.
template <class T>
constexpr int kSumTileCols = sizeof(T) == 8 ? 16 : 32;

template <Magnitude kMag, class T>
__device__ __forceinline__ T magnitude(T x) {
  if constexpr (kMag == Magnitude::square) return x * x;
  return x < T(0) ? -x : x;
}

template <class T>
__device__ __forceinline__ T weight_at(const Weight<T>& w, std::int64_t pos) {
  const T v = w.values[pos];
  return w.squared ? v * v : v;
}

/// acc += x u for check weight t (e: 1, w: `position`, the position + 1), or for weight t of a side's
/// values (`weight`). Computed positions are T(first + 1) + T(offset): every pass cuts a dimension at the
/// same multiples, so the carried and the computed checksums weigh a position alike.
template <class Side, class T>
__device__ __forceinline__ void add_weighted(T& acc, int t, T x, T position, T weight) {
  if constexpr (Side::kCheckWeights) {
    acc += t % 2 == 0 ? x : x * position;
  } else {
    acc += x * weight;
  }
}

/// Block (row tile, column band): row partials per (band, term, row), column partials per (row tile,
/// term, column). A side's own weights of the tile in hand are staged in shared memory; check weights are
/// computed.
template <class T, Magnitude kMag, class Rows, class Cols>
__global__ void __launch_bounds__(kSumThreads)
    two_way_sums_kernel(const T* __restrict__ x, std::int64_t rows, std::int64_t cols, int tiles_per_band,
                        const Rows row_side, const Cols col_side, T* __restrict__ row_part, T* __restrict__ col_part) {
  constexpr int kRow = Rows::kTerms, kCol = Cols::kTerms;
  constexpr int kCols = kSumTileCols<T>, kPerCol = kSumThreads / kCols;
  static_assert(kCols * kRow <= kSumThreads, "one thread per weight of a tile");
  static_assert(kPerCol <= 32 && (kPerCol & (kPerCol - 1)) == 0, "a column's threads: a power of two within a warp");
  constexpr bool kRowWeightsRead = kRow > 0 && !Rows::kCheckWeights, kColWeightsRead = kCol > 0 && !Cols::kCheckWeights;
  __shared__ T tile[kCols][kSumThreads + kSumPad];
  __shared__ T row_w[kCols][kRowWeightsRead ? kRow : 1];
  __shared__ T col_w[kColWeightsRead ? kCol : 1][kSumThreads];
  const int tid = threadIdx.x;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kSumThreads;
  const std::int64_t i = row0 + tid;  // the row this thread sums
  const std::int64_t band0 = static_cast<std::int64_t>(blockIdx.y) * tiles_per_band * kCols;
  const int col = tid / kPerCol, q = tid % kPerCol;  // the column this thread helps sum, and its share of rows
  if constexpr (kColWeightsRead) {
#pragma unroll
    for (int t = 0; t < kCol; ++t) col_w[t][tid] = i < rows ? weight_at(col_side.w[t], i) : T(0);
  }
  // Computed check weights of the rows this thread sums for its column: row0 + q + kPerCol kk + 1.
  const T col_position = T(row0 + q + 1);
  T row_acc[kRow > 0 ? kRow : 1] = {};
  // The next tile's loads are issued before this tile is summed, so a block keeps its reads in flight.
  const auto load = [&](std::int64_t c0, T (&v)[kCols]) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) v[c] = (i < rows && c0 + c < cols) ? x[(c0 + c) * rows + i] : T(0);
  };
  T next[kCols];
  load(band0, next);
  for (int s = 0; s < tiles_per_band; ++s) {
    const std::int64_t c0 = band0 + std::int64_t(s) * kCols;
    if (c0 >= cols) break;
    T v[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) v[c] = next[c];
    if (s + 1 < tiles_per_band && c0 + kCols < cols) load(c0 + kCols, next);
    __syncthreads();  // the previous tile and its weights have been read
    if constexpr (kCol > 0) {
#pragma unroll
      for (int c = 0; c < kCols; ++c) tile[c][tid] = v[c];
    }
    if constexpr (kRowWeightsRead) {
      if (tid < kCols * kRow) {
        const int c = tid / kRow, t = tid % kRow;
        row_w[c][t] = c0 + c < cols ? weight_at(row_side.w[t], c0 + c) : T(0);
      }
    }
    __syncthreads();
    if constexpr (kRow > 0) {
      const T row_position = T(c0 + 1);  // computed check weights: column c0 + c weighs c0 + c + 1
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const T g = magnitude<kMag>(v[c]);
#pragma unroll
        for (int t = 0; t < kRow; ++t)
          add_weighted<Rows>(row_acc[t], t, t < Rows::kPlainTerms ? v[c] : g, row_position + T(c),
                             kRowWeightsRead ? row_w[c][t] : T(0));
      }
    }
    if constexpr (kCol > 0) {
      T acc[kCol] = {};
#pragma unroll
      for (int kk = 0; kk < kSumThreads / kPerCol; ++kk) {
        const int r = q + kPerCol * kk;
        const T xv = tile[col][r];
        const T g = magnitude<kMag>(xv);
#pragma unroll
        for (int t = 0; t < kCol; ++t)
          add_weighted<Cols>(acc[t], t, t < Cols::kPlainTerms ? xv : g, col_position + T(kPerCol * kk),
                             kColWeightsRead ? col_w[t][r] : T(0));
      }
#pragma unroll
      for (int off = 1; off < kPerCol; off <<= 1)
#pragma unroll
        for (int t = 0; t < kCol; ++t) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], off);
      const std::int64_t j = c0 + col;
      if (q == 0 && j < cols) {
#pragma unroll
        for (int t = 0; t < kCol; ++t) col_part[(static_cast<std::int64_t>(blockIdx.x) * kCol + t) * cols + j] = acc[t];
      }
    }
  }
  if (i < rows) {
#pragma unroll
    for (int t = 0; t < kRow; ++t) row_part[(static_cast<std::int64_t>(blockIdx.y) * kRow + t) * rows + i] = row_acc[t];
  }
}

/// Partial sums of one side: output o = t * extent + pos (0 <= o < values * extent) is the sum over
/// p < parts of part[p * values * extent + o].
template <class T>
struct Parts {
  const T* part = nullptr;
  std::int64_t outputs = 0;  ///< values * extent; 0: this side is not summed
  std::int64_t parts = 0;
  T* out = nullptr;
};

/// Kernels that add partial sums run blocks of kOutputsPerBlock x kPartGroups threads: the kPartGroups
/// threads of an output (threadIdx.y) each add every kPartGroups-th part, then the first adds their
/// results in order. Deterministic, with kPartGroups loads in flight per output instead of one.
constexpr int kOutputsPerBlock = 32, kPartGroups = 8;

inline dim3 adding_block() { return dim3(kOutputsPerBlock, kPartGroups); }
inline dim3 adding_grid(std::int64_t outputs) {
  return dim3(static_cast<unsigned>((outputs + kOutputsPerBlock - 1) / kOutputsPerBlock));
}

/// The output of this block's column of threads, in double (valid in threadIdx.y == 0; false `valid`
/// adds nothing). Every thread of the block must call it, the same number of times.
template <class T>
__device__ double sum_of_parts(const Parts<T>& ps, std::int64_t o, bool valid) {
  __shared__ double group_sums[kPartGroups][kOutputsPerBlock];
  double sum = 0;
  if (valid) {
#pragma unroll 4
    for (std::int64_t p = threadIdx.y; p < ps.parts; p += kPartGroups) sum += double(ps.part[p * ps.outputs + o]);
  }
  group_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  double total = 0;
  if (threadIdx.y == 0) {
#pragma unroll
    for (int g = 0; g < kPartGroups; ++g) total += group_sums[g][threadIdx.x];
  }
  __syncthreads();  // group_sums is free for the next call
  return total;
}

/// The second pass, both sides in one launch (rows' outputs first).
template <class T>
__global__ void __launch_bounds__(kOutputsPerBlock * kPartGroups)
    add_two_way_parts(const Parts<T> rows, const Parts<T> cols) {
  wait_for_previous_grid();
  std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * kOutputsPerBlock + threadIdx.x;
  const bool is_row = o < rows.outputs;
  const Parts<T> ps = is_row ? rows : cols;
  if (!is_row) o -= rows.outputs;
  const bool valid = o < ps.outputs;
  const double sum = sum_of_parts(ps, o, valid);
  if (valid && threadIdx.y == 0) ps.out[o] = T(sum);
}

/// What the first pass leaves for the second: each side's partial sums.
template <class T>
struct TwoWayParts {
  Parts<T> rows, cols;
};

/// How a pass over a rows x cols matrix is cut: row tiles of kSumThreads rows, bands of tiles_per_band
/// tiles of columns, enough blocks to keep every SM reading (small matrices take narrow bands).
struct TwoWayGrid {
  std::int64_t row_tiles = 0, bands = 0;
  int tiles_per_band = 0;
};

template <class T>
TwoWayGrid two_way_grid(std::int64_t rows, std::int64_t cols, int sm_count) {
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  TwoWayGrid g;
  g.row_tiles = ceil_div(rows, kSumThreads);
  const std::int64_t col_tiles = ceil_div(cols, kSumTileCols<T>);
  const std::int64_t blocks_wanted = 4 * std::int64_t(sm_count);  // two waves of two blocks per SM
  const std::int64_t bands_wanted = ceil_div(blocks_wanted, g.row_tiles);
  g.tiles_per_band = int(std::clamp<std::int64_t>(ceil_div(col_tiles, bands_wanted), 1, kMaxTilesPerBand));
  g.bands = ceil_div(col_tiles, g.tiles_per_band);
  return g;
}

/// Elements of partial sums a pass with these term counts needs.
template <class T>
std::int64_t two_way_workspace(std::int64_t rows, std::int64_t cols, int row_terms, int col_terms, int sm_count) {
  const TwoWayGrid g = two_way_grid<T>(rows, cols, sm_count);
  return g.bands * row_terms * rows + g.row_tiles * col_terms * cols;
}

/// Queues the first pass on `stream`: the tiles' partial sums, in `part` (two_way_workspace() elements).
/// A caller that uses the sums where it adds them (ProtectedGemm's thresholds and comparison) adds the
/// parts itself with sum_of_parts; two_way_sums below adds them into the sides' `out`.
template <class T, Magnitude kMag, class Rows, class Cols>
TwoWayParts<T> two_way_partial_sums(const T* x, std::int64_t rows, std::int64_t cols, const Rows& row_side,
                                    const Cols& col_side, T* part, int sm_count, cudaStream_t stream) {
  const TwoWayGrid g = two_way_grid<T>(rows, cols, sm_count);
  T* row_part = part;
  T* col_part = part + g.bands * Rows::kTerms * rows;
  const dim3 grid(static_cast<unsigned>(g.row_tiles), static_cast<unsigned>(g.bands));
  two_way_sums_kernel<T, kMag, Rows, Cols>
      <<<grid, kSumThreads, 0, stream>>>(x, rows, cols, g.tiles_per_band, row_side, col_side, row_part, col_part);
  SKINNY_CHECK_LAUNCH();
  return {{row_part, Rows::kTerms * rows, g.bands, row_side.out},
          {col_part, Cols::kTerms * cols, g.row_tiles, col_side.out}};
}

/// Queues both passes on `stream`; `part` holds two_way_workspace() elements.
template <class T, Magnitude kMag, class Rows, class Cols>
void two_way_sums(const T* x, std::int64_t rows, std::int64_t cols, const Rows& row_side, const Cols& col_side,
                  T* part, int sm_count, cudaStream_t stream) {
  TwoWayParts<T> p = two_way_partial_sums<T, kMag>(x, rows, cols, row_side, col_side, part, sm_count, stream);
  const std::int64_t outputs = p.rows.outputs + p.cols.outputs;
  void* args[] = {&p.rows, &p.cols};
  launch_after_previous(reinterpret_cast<const void*>(&add_two_way_parts<T>), adding_grid(outputs), adding_block(),
                        args, stream);
}

}  // namespace skinny::abft::detail
