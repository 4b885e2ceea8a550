// The public entry points: validate the arguments, normalise the layout of C once, pick the algorithm,
// ask it whether it can run the problem, launch it.
#include "problem.hpp"
#include "tsm2/tall_skinny.hpp"

#include <skinny/gemm/gemm.hpp>

#include <stdexcept>
#include <string>

namespace skinny::gemm {
namespace {

using detail::Problem;

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<__half>() { return DType::f16; }

template <class T>
std::string describe(const char* name, const MatrixView<T>& v) {
  return std::string(name) + " is " + std::to_string(v.rows) + "x" + std::to_string(v.cols) +
         (v.layout == Layout::row_major ? " row-major" : " column-major");
}

template <class T>
void check_view(const char* name, const MatrixView<T>& v) {
  if (v.rows < 1 || v.cols < 1)
    throw std::invalid_argument("gemm: " + describe(name, v) + ": rows and cols must be >= 1");
  if (v.data == nullptr) throw std::invalid_argument("gemm: " + std::string(name) + ".data is null (" +
                                                     describe(name, v) + ")");
  const std::int64_t min_ld = v.layout == Layout::row_major ? v.cols : v.rows;
  if (v.ld < min_ld)
    throw std::invalid_argument("gemm: " + std::string(name) + ".ld = " + std::to_string(v.ld) + " is too small: " +
                                describe(name, v) + " needs ld >= " + std::to_string(min_ld));
}

/// Validates and normalises: the returned problem has a row-major C.
template <class TIn, class TOut>
Problem make_problem(const Arguments<TIn, TOut>& args) {
  check_view("A", args.a);
  check_view("B", args.b);
  check_view("C", args.c);
  if (args.a.cols != args.b.rows || args.a.rows != args.c.rows || args.b.cols != args.c.cols)
    throw std::invalid_argument("gemm: shape mismatch: " + describe("A", args.a) + ", " + describe("B", args.b) +
                                ", " + describe("C", args.c) +
                                " (need A.cols == B.rows, A.rows == C.rows, B.cols == C.cols)");
  Problem p;
  p.in_type = dtype_of<TIn>();
  p.out_type = dtype_of<TOut>();
  p.alpha = double(args.alpha);
  p.beta = double(args.beta);
  p.allow_tf32 = args.allow_tf32 && p.in_type == DType::f32;
  p.c = args.c.data;
  p.ldc = args.c.ld;
  // A column-major C is a row-major C^T = B^T A^T: swap the operands and flip their layouts.
  const bool c_row = args.c.layout == Layout::row_major;
  const MatrixView<const TIn> a = c_row ? args.a : args.b.transposed();
  const MatrixView<const TIn> b = c_row ? args.b : args.a.transposed();
  p.m = a.rows;
  p.n = b.cols;
  p.k = a.cols;
  p.a = a.data;
  p.lda = a.ld;
  p.a_layout = a.layout;
  p.b = b.data;
  p.ldb = b.ld;
  p.b_layout = b.layout;
  return p;
}

/// Where TSM2 beat cuBLAS in tsm2-bench on the H100 (bench/results/h100/2026-11-24_dmma-block-copies/
/// check_a114f80): float with k <= 16 in both layouts (1.05-1.58x); double with k <= 16 and a column-major
/// tall matrix (1.04-1.08x up to n = 20480, 1.01-1.03x at n = 30720, 0.99-1.01x on the K-means shape over
/// seven runs). Double with a row-major tall matrix ties (K-means shape 1.00x): cuBLAS keeps it.
bool tsm2_wins(const Problem& p) {
  if (!detail::tsm2_support(p, "tsm2")) return false;
  const std::int64_t k = detail::skinny_side(p);
  if (p.in_type == DType::f32) return k <= 16;
  return k <= 16 && detail::tall_layout(p) == Layout::col_major;
}

Algo choose_for(const Context&, const Problem& p) {
  // Tall-and-skinny where TSM2 measured faster; everything else: cuBLAS, the fastest general GEMM we
  // measure (the ladder is there to be measured against it).
  return tsm2_wins(p) ? Algo::tsm2 : Algo::cublas;
}

template <class TIn, class TOut>
Support can_implement_impl(Algo algo, const Arguments<TIn, TOut>& args) {
  const Problem p = make_problem(args);
  if (algo == Algo::automatic) return Support::yes();  // TSM2 or cuBLAS: one of them takes every valid problem
  return detail::find_algorithm(algo).can_implement(p);
}

template <class TIn, class TOut>
void gemm_impl(Context& ctx, const Arguments<TIn, TOut>& args, Algo algo) {
  const Problem p = make_problem(args);
  const detail::Algorithm& entry = detail::find_algorithm(algo == Algo::automatic ? choose_for(ctx, p) : algo);
  const Support support = entry.can_implement(p);
  if (!support) throw std::invalid_argument("gemm: " + support.reason);
  entry.launch(p, ctx);
}

}  // namespace

Support can_implement(Algo algo, const Arguments<float>& args) { return can_implement_impl(algo, args); }
Support can_implement(Algo algo, const Arguments<double>& args) { return can_implement_impl(algo, args); }
Support can_implement(Algo algo, const Arguments<__half, float>& args) { return can_implement_impl(algo, args); }

Algo choose(const Context& ctx, const Arguments<float>& args) { return choose_for(ctx, make_problem(args)); }
Algo choose(const Context& ctx, const Arguments<double>& args) { return choose_for(ctx, make_problem(args)); }
Algo choose(const Context& ctx, const Arguments<__half, float>& args) { return choose_for(ctx, make_problem(args)); }

void gemm(Context& ctx, const Arguments<float>& args, Algo algo) { gemm_impl(ctx, args, algo); }
void gemm(Context& ctx, const Arguments<double>& args, Algo algo) { gemm_impl(ctx, args, algo); }
void gemm(Context& ctx, const Arguments<__half, float>& args, Algo algo) { gemm_impl(ctx, args, algo); }

}  // namespace skinny::gemm
