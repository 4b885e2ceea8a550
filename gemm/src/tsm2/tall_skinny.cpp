#include "tall_skinny.hpp"

#include <string>

namespace skinny::gemm::detail {

Support tsm2_support(const Problem& p, const char* name) {
  if (p.in_type != p.out_type || p.in_type == DType::f16)
    return Support::no(std::string(name) + ": needs float or double inputs and output of the same type (got " +
                       std::string(to_string(p.in_type)) + " -> " + std::string(to_string(p.out_type)) + ")");
  if (skinny_side(p) > kMaxSkinny)
    return Support::no(std::string(name) + ": neither side is skinny (m=" + std::to_string(p.m) + ", n=" +
                       std::to_string(p.n) + "; TSM2 needs m or n <= " + std::to_string(kMaxSkinny) +
                       "); use cublas");
  return Support::yes();
}

template <class T>
TallSkinny<T> to_tall_skinny(const Problem& p) {
  TallSkinny<T> t;
  t.alpha = T(p.alpha);
  t.beta = T(p.beta);
  t.c = static_cast<T*>(p.c);
  const auto strides = [](Layout l, std::int64_t ld, std::int64_t& row, std::int64_t& col) {
    row = l == Layout::row_major ? ld : 1;
    col = l == Layout::row_major ? 1 : ld;
  };
  if (p.n <= p.m) {  // B is skinny: C = A B as given, C row-major
    t.rows = p.m;
    t.inner = p.k;
    t.cols = p.n;
    t.a = static_cast<const T*>(p.a);
    t.lda = p.lda;
    t.a_layout = p.a_layout;
    t.b = static_cast<const T*>(p.b);
    strides(p.b_layout, p.ldb, t.b_row_stride, t.b_col_stride);
    t.c_row_stride = p.ldc;
    t.c_col_stride = 1;
  } else {  // A is skinny: C^T (n x m, column-major in C's memory) = B^T A^T
    t.rows = p.n;
    t.inner = p.k;
    t.cols = p.m;
    t.a = static_cast<const T*>(p.b);  // B^T: the same memory with the other layout
    t.lda = p.ldb;
    t.a_layout = flipped(p.b_layout);
    t.b = static_cast<const T*>(p.a);  // A^T
    strides(flipped(p.a_layout), p.lda, t.b_row_stride, t.b_col_stride);
    t.c_row_stride = 1;
    t.c_col_stride = p.ldc;
  }
  return t;
}

template TallSkinny<float> to_tall_skinny(const Problem&);
template TallSkinny<double> to_tall_skinny(const Problem&);

}  // namespace skinny::gemm::detail
