// CPU reference GEMM with double accumulation, and the norm-wise error measure the tests use.
#pragma once

#include <skinny/gemm/gemm.hpp>

#include <cstdint>
#include <vector>

namespace skinny::gemm {

/// A host matrix described like a MatrixView: element (i, j) of a rows x cols matrix in `data`.
struct HostMatrix {
  std::int64_t rows = 0, cols = 0, ld = 0;
  Layout layout = Layout::row_major;
  std::int64_t offset(std::int64_t i, std::int64_t j) const {
    return layout == Layout::row_major ? i * ld + j : j * ld + i;
  }
  /// Elements the storage must hold: up to and including the last element.
  std::int64_t span() const {
    return layout == Layout::row_major ? (rows - 1) * ld + cols : (cols - 1) * ld + rows;
  }
};

/// C = alpha * A * B + beta * C, every product and sum in double; beta == 0 ignores C's old contents.
/// Element types float, double or __half (inputs); the result is returned as a dense row-major m x n
/// double matrix and is also written back to `c` (rounded to TOut).
template <class TIn, class TOut>
std::vector<double> reference_gemm(const HostMatrix& a_shape, const std::vector<TIn>& a, const HostMatrix& b_shape,
                                   const std::vector<TIn>& b, const HostMatrix& c_shape, std::vector<TOut>& c,
                                   double alpha, double beta);

/// Norm-wise comparison of a computed m x n result against the reference.
struct ErrorReport {
  double relative_error = 0;  ///< ||C - Cref||_F / ||Cref||_F (absolute when Cref is all zero)
  double worst_abs = 0;       ///< largest |C(i,j) - Cref(i,j)|
  std::int64_t worst_row = -1, worst_col = -1;
  double worst_value = 0, worst_reference = 0;
  std::int64_t non_finite = 0;  ///< NaN/Inf elements in C (for example, never written: poisoned)
};
template <class TOut>
ErrorReport compare(const HostMatrix& c_shape, const std::vector<TOut>& c, const std::vector<double>& reference);

/// Bound on the norm-wise relative error of a GEMM with inner dimension k in a precision whose unit
/// round-off is `unit_roundoff` (2^-24 float, 2^-53 double, 2^-11 for f16 inputs): a multiple of
/// sqrt(k) * u, the typical (not worst-case) growth of a sum of k rounded products.
double error_bound(std::int64_t k, double unit_roundoff);

}  // namespace skinny::gemm
