// The normalised problem every launcher receives: C is row-major, A and B keep their own layouts.
#pragma once

#include <skinny/gemm/context.hpp>
#include <skinny/gemm/gemm.hpp>

#include <cstdint>

namespace skinny::gemm::detail {

/// C (m x n, row-major, ldc) = alpha * A (m x k) * B (k x n) + beta * C. The dispatcher maps a
/// column-major C to this form once (C^T = B^T A^T), so kernels handle one output convention.
struct Problem {
  DType in_type = DType::f32;   ///< type of A and B
  DType out_type = DType::f32;  ///< type of C, alpha and beta
  std::int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  std::int64_t lda = 0;
  Layout a_layout = Layout::row_major;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  Layout b_layout = Layout::row_major;
  void* c = nullptr;
  std::int64_t ldc = 0;
  double alpha = 1, beta = 0;
  bool allow_tf32 = false;  ///< Arguments::allow_tf32 (float inputs only)
};

/// One registry entry: the single source for dispatch, command-line choices, tests and benchmarks.
struct Algorithm {
  const char* name;
  Algo algo;
  const char* summary;
  Support (*can_implement)(const Problem&);
  void (*launch)(const Problem&, Context&);
};

/// The table (registry.cu), without Algo::automatic.
const Algorithm* registry_begin();
const Algorithm* registry_end();
const Algorithm& find_algorithm(Algo algo);

}  // namespace skinny::gemm::detail
