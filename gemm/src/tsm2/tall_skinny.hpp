// The form every TSM2 kernel receives: a tall matrix A times a skinny matrix B.
//
//   C (rows x cols) = alpha * A (rows x inner) * B (inner x cols) + beta * C,   cols <= kMaxSkinny
//
// In the paper's notation A is n x n and B is n x k. A keeps its layout (column-major: the paper's;
// row-major: K-means data, points are rows). B and C are small and reached through strides, so a
// problem whose skinny side ended up in m after the dispatcher's normalisation (a column-major C)
// is simply turned back (C^T = B^T A^T) without moving data.
#pragma once

#include "../problem.hpp"

#include <cstdint>

namespace skinny::gemm::detail {

/// The widest skinny dimension the TSM2 kernels accept; wider problems are refused (cuBLAS is the
/// right tool there: the product is no longer bandwidth bound).
constexpr std::int64_t kMaxSkinny = 64;

template <class T>
struct TallSkinny {
  std::int64_t rows = 0, inner = 0, cols = 0;
  const T* a = nullptr;
  std::int64_t lda = 0;
  Layout a_layout = Layout::col_major;
  const T* b = nullptr;
  std::int64_t b_row_stride = 0, b_col_stride = 0;  ///< B(p, j) = b[p * b_row_stride + j * b_col_stride]
  T* c = nullptr;
  std::int64_t c_row_stride = 0, c_col_stride = 0;  ///< C(i, j) = c[i * c_row_stride + j * c_col_stride]
  T alpha = 1, beta = 0;
};

/// The skinny dimension of a normalised problem: n when B is the skinny operand, m when A is (then
/// the product is turned around). Ties go to n.
inline std::int64_t skinny_side(const Problem& p) { return p.n <= p.m ? p.n : p.m; }

/// Layout of the tall operand once the problem is in tall-skinny form (see to_tall_skinny).
inline Layout tall_layout(const Problem& p) { return p.n <= p.m ? p.a_layout : flipped(p.b_layout); }

/// Whether a problem's skinny side fits TSM2, with the reason if not. `name` prefixes the reason.
Support tsm2_support(const Problem& p, const char* name);

/// The tall-skinny form of a normalised problem (float or double; call after tsm2_support).
template <class T>
TallSkinny<T> to_tall_skinny(const Problem& p);

}  // namespace skinny::gemm::detail
