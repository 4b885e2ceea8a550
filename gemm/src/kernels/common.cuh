// Pieces every kernel of the ladder shares: operand access by layout, dispatch over element types and
// layouts, the alpha/beta epilogue, and the refusals common to all of them.
#pragma once

#include "../problem.hpp"

#include <skinny/gemm/errors.hpp>

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

namespace skinny::gemm::detail {

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// Read-only operand with its layout fixed at compile time, so each kernel is instantiated for the
/// access pattern it will see and the compiler can schedule loads for it.
template <class T, Layout L>
struct Operand {
  const T* p;
  std::int64_t ld;
  static constexpr bool row_major = L == Layout::row_major;
  __device__ __forceinline__ std::int64_t offset(std::int64_t r, std::int64_t c) const {
    return row_major ? r * ld + c : c * ld + r;
  }
  __device__ __forceinline__ T operator()(std::int64_t r, std::int64_t c) const { return p[offset(r, c)]; }
  /// Element (r, c), or zero outside rows x cols: edge tiles pad with zeros that add nothing.
  __device__ __forceinline__ T get_or_zero(std::int64_t r, std::int64_t c, std::int64_t rows,
                                           std::int64_t cols) const {
    return (r < rows && c < cols) ? p[offset(r, c)] : T(0);
  }
};

/// C(i, j) = alpha * acc + beta * C(i, j); with beta == 0 the old value is never read (BLAS semantics).
template <class T>
__device__ __forceinline__ void store_result(T* c, std::int64_t ldc, std::int64_t i, std::int64_t j, T acc, T alpha,
                                             T beta) {
  T* out = c + i * ldc + j;
  *out = beta == T(0) ? alpha * acc : alpha * acc + beta * *out;
}

/// Copies the ROWS x COLS tile of `op` with corner (r0, c0) to shared memory, element (r, c) going to
/// s[r * RS + c * CS]. Consecutive threads take consecutive addresses of the operand: along a row when
/// it is row-major, down a column when column-major. With Guard, elements at or beyond (rows, cols)
/// read as zero; without, the whole tile must be in range.
template <int ROWS, int COLS, int NT, int RS, int CS, bool Guard, class T, class Op>
__device__ __forceinline__ void load_tile(T* __restrict__ s, const Op& op, std::int64_t r0, std::int64_t c0,
                                          std::int64_t rows, std::int64_t cols, int tid) {
  static_assert((ROWS * COLS) % NT == 0, "the threads must split the tile evenly");
  static_assert(NT % (Op::row_major ? COLS : ROWS) == 0, "a pass of the threads must cover whole lines of the tile");
  constexpr int kLine = Op::row_major ? COLS : ROWS;  // contiguous extent of the tile in the operand
  constexpr int kStep = NT / kLine;                   // lines covered by one pass of all threads
  const int along = tid % kLine, line = tid / kLine;
#pragma unroll
  for (int l = 0; l < ROWS * COLS / NT; ++l) {
    const int r = Op::row_major ? line + l * kStep : along;
    const int cc = Op::row_major ? along : line + l * kStep;
    T v;
    if constexpr (Guard)
      v = op.get_or_zero(r0 + r, c0 + cc, rows, cols);
    else
      v = op(r0 + r, c0 + cc);
    s[r * RS + cc * CS] = v;
  }
}

/// Calls f(Operand<T, LA>, Operand<T, LB>) with the layouts of the problem's A and B.
template <class T, class F>
void with_operands(const Problem& p, F&& f) {
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b);
  const bool a_row = p.a_layout == Layout::row_major;
  const bool b_row = p.b_layout == Layout::row_major;
  if (a_row && b_row)
    f(Operand<T, Layout::row_major>{a, p.lda}, Operand<T, Layout::row_major>{b, p.ldb});
  else if (a_row)
    f(Operand<T, Layout::row_major>{a, p.lda}, Operand<T, Layout::col_major>{b, p.ldb});
  else if (b_row)
    f(Operand<T, Layout::col_major>{a, p.lda}, Operand<T, Layout::row_major>{b, p.ldb});
  else
    f(Operand<T, Layout::col_major>{a, p.lda}, Operand<T, Layout::col_major>{b, p.ldb});
}

/// Calls f(T{}) with T = float or double for the problem's element type (the ladder's two precisions).
template <class F>
void with_float_or_double(const Problem& p, F&& f) {
  if (p.in_type == DType::f64)
    f(double{});
  else
    f(float{});
}

/// Refusals shared by the SIMT ladder: element types and 32-bit tile indices. `grid_rows`/`grid_cols`
/// are the block-grid extents the kernel would launch (y and z are limited to 65535 blocks).
inline Support ladder_support(const Problem& p, const char* name, std::int64_t grid_y) {
  if (p.in_type != p.out_type || p.in_type == DType::f16)
    return Support::no(std::string(name) + ": needs float or double inputs and output of the same type (got " +
                       std::string(to_string(p.in_type)) + " -> " + std::string(to_string(p.out_type)) + ")");
  if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX)
    return Support::no(std::string(name) + ": m, n and k must each be at most " + std::to_string(INT_MAX) +
                       " (got m=" + std::to_string(p.m) + ", n=" + std::to_string(p.n) + ", k=" + std::to_string(p.k) +
                       ")");
  if (grid_y > 65535)
    return Support::no(std::string(name) + ": n=" + std::to_string(p.n) + " needs " + std::to_string(grid_y) +
                       " blocks along y, more than the 65535 CUDA allows");
  return Support::yes();
}

}  // namespace skinny::gemm::detail
