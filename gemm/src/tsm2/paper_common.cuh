// Pieces shared by the four versions of the TSM2 paper's ablation (v0_inner_product.cu ..
// v3_prefetch.cu): the fixed parameters, operand access, the alpha/beta epilogue, the refusals and the
// launch plumbing. Each version keeps only its own kernel.
//
// Work distribution (paper 3.2): one thread per row i of A (and of C), t1 threads per block, a 1-D
// grid of ceil(rows / t1) blocks. With a column-major A, consecutive threads of a warp read
// consecutive addresses of each column of A: every access to A is coalesced.
#pragma once

#include "../kernels/common.cuh"
#include "../kernels/launchers.hpp"
#include "tall_skinny.hpp"

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

namespace skinny::gemm::detail::tsm2_paper {

/// The paper's K40c choice (4.2): t1 = 128 threads per block (rows of a B tile), t3 = 4 elements of
/// A per thread and step, t2 = 16 (float) or 8 (double) columns of C held in registers per pass.
template <class T>
struct Params {
  static constexpr int t1 = 128;
  static constexpr int t2 = sizeof(T) == 4 ? 16 : 8;
  static constexpr int t3 = 4;
};

/// Row i of A as its thread sees it: A(i, p) = base[p * lda] (column-major) or base[p] (row-major).
template <class T, Layout LA>
struct ARow {
  const T* base;
  std::int64_t lda;

  __device__ __forceinline__ ARow(const TallSkinny<T>& t, std::int64_t i)
      : base(LA == Layout::col_major ? t.a + i : t.a + i * t.lda), lda(t.lda) {}

  __device__ __forceinline__ T operator()(std::int64_t p) const {
    if constexpr (LA == Layout::col_major)
      return __ldg(base + p * lda);  // a warp reads 32 consecutive rows of column p: coalesced
    else
      return __ldg(base + p);  // a warp reads 32 different rows: correct, not coalesced
  }

  /// Address of A(i, p), and the distance between A(i, p) and A(i, p + 1).
  __device__ __forceinline__ const T* ptr(std::int64_t p) const {
    return LA == Layout::col_major ? base + p * lda : base + p;
  }
  __device__ __forceinline__ std::int64_t step() const { return LA == Layout::col_major ? lda : 1; }

  /// A(i, p), or zero at and past `inner`.
  __device__ __forceinline__ T get_or_zero(std::int64_t p, std::int64_t inner) const {
    return p < inner ? (*this)(p) : T(0);
  }
};

/// B(p, j).
template <class T>
__device__ __forceinline__ T b_at(const TallSkinny<T>& t, std::int64_t p, std::int64_t j) {
  return __ldg(t.b + p * t.b_row_stride + j * t.b_col_stride);
}

/// Row p of B restricted to the pass's columns j0 .. j0+N-1, zero outside the matrix. The addresses
/// are formed by walking along the row, so no per-column offsets stay live across a kernel's loops.
template <class T, int N>
__device__ __forceinline__ void load_b_row(T (&out)[N], const TallSkinny<T>& t, std::int64_t p, std::int64_t j0) {
  const bool row_ok = p < t.inner;
  const std::int64_t n_cols = t.cols - j0;  // columns left from j0 (> 0)
  const T* q = t.b + (row_ok ? p : 0) * t.b_row_stride + j0 * t.b_col_stride;
#pragma unroll
  for (int jj = 0; jj < N; ++jj, q += t.b_col_stride) out[jj] = (row_ok && jj < n_cols) ? __ldg(q) : T(0);
}

/// C(i, j) = alpha * acc + beta * C(i, j); with beta == 0 C is never read (BLAS semantics).
template <class T>
__device__ __forceinline__ void store_c(const TallSkinny<T>& t, std::int64_t i, std::int64_t j, T acc) {
  T* out = t.c + i * t.c_row_stride + j * t.c_col_stride;
  *out = t.beta == T(0) ? t.alpha * acc : t.alpha * acc + t.beta * *out;
}

/// Writes the N accumulators of row i for columns j0 .. j0+N-1, skipping columns past the edge.
template <class T, int N>
__device__ __forceinline__ void store_c_pass(const TallSkinny<T>& t, std::int64_t i, std::int64_t j0,
                                             const T (&acc)[N]) {
#pragma unroll
  for (int jj = 0; jj < N; ++jj)
    if (j0 + jj < t.cols) store_c(t, i, j0 + jj, acc[jj]);
}

/// Rows of the tall-skinny form (to_tall_skinny's choice: m when B is skinny, n otherwise).
inline std::int64_t tall_rows(const Problem& p) { return p.n <= p.m ? p.m : p.n; }

/// tsm2_support plus the grid: ceil(rows / threads) blocks along x (at most 2^31 - 1).
inline Support support(const Problem& p, const char* name, int threads) {
  Support s = tsm2_support(p, name);
  if (!s) return s;
  const std::int64_t blocks = ceil_div(tall_rows(p), threads);
  if (blocks > INT_MAX)
    return Support::no(std::string(name) + ": " + std::to_string(tall_rows(p)) + " rows need " +
                       std::to_string(blocks) + " blocks of " + std::to_string(threads) +
                       " threads, more than the 2^31 - 1 CUDA allows");
  return Support::yes();
}

/// The 1-D grid over rows.
inline dim3 grid(std::int64_t rows, int threads) { return dim3(static_cast<unsigned>(ceil_div(rows, threads))); }

/// Calls f(std::integral_constant<Layout, L>{}) with L the layout of A, so each kernel is
/// instantiated for the access pattern it will see.
template <class F>
void with_a_layout(Layout l, F&& f) {
  if (l == Layout::col_major)
    f(std::integral_constant<Layout, Layout::col_major>{});
  else
    f(std::integral_constant<Layout, Layout::row_major>{});
}

/// The launch every version shares: float or double, the tall-skinny form, nothing to do for an
/// empty C, then launch(TallSkinny<T>, integral_constant<Layout, LA>) for A's layout.
template <class F>
void launch_tall_skinny(const Problem& p, F&& launch) {
  with_float_or_double(p, [&](auto zero) {
    using T = decltype(zero);
    const TallSkinny<T> t = to_tall_skinny<T>(p);
    if (t.rows == 0 || t.cols == 0) return;
    with_a_layout(t.a_layout, [&](auto la) { launch(t, la); });
  });
  SKINNY_CHECK_LAUNCH();
}

}  // namespace skinny::gemm::detail::tsm2_paper
