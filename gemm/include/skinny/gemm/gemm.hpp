// The public GEMM call: C = alpha * A * B + beta * C on a stream, through one registry of algorithms.
//
//   skinny::Context ctx(stream);
//   skinny::gemm::Arguments<float> args{row_major(dA, m, k), row_major(dB, k, n), row_major(dC, m, n)};
//   skinny::gemm::gemm(ctx, args);                       // Algo::automatic picks for the shape
//   skinny::gemm::gemm(ctx, args, Algo::vectorized);     // or name one; can_implement() says why not
#pragma once

#include <skinny/gemm/context.hpp>

#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace skinny::gemm {

/// Storage order of a matrix. A transposed operand is the same memory with the other layout.
enum class Layout { row_major, col_major };

constexpr Layout flipped(Layout l) { return l == Layout::row_major ? Layout::col_major : Layout::row_major; }

/// A rows x cols matrix in device memory. `ld` is the distance between consecutive rows (row-major) or
/// columns (column-major), in elements.
template <class T>
struct MatrixView {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;
  Layout layout = Layout::row_major;

  MatrixView() = default;
  MatrixView(T* data_, std::int64_t rows_, std::int64_t cols_, std::int64_t ld_, Layout layout_)
      : data(data_), rows(rows_), cols(cols_), ld(ld_), layout(layout_) {}
  /// A view of T* is also a view of const T*.
  template <class U, class = std::enable_if_t<std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
  MatrixView(const MatrixView<U>& v) : MatrixView(v.data, v.rows, v.cols, v.ld, v.layout) {}

  /// The transpose, without moving data.
  MatrixView transposed() const { return {data, cols, rows, ld, flipped(layout)}; }
};

/// Row-major rows x cols view; ld defaults to cols (packed).
template <class T>
MatrixView<T> row_major(T* data, std::int64_t rows, std::int64_t cols, std::int64_t ld = 0) {
  return {data, rows, cols, ld ? ld : cols, Layout::row_major};
}
/// Column-major rows x cols view; ld defaults to rows (packed).
template <class T>
MatrixView<T> col_major(T* data, std::int64_t rows, std::int64_t cols, std::int64_t ld = 0) {
  return {data, rows, cols, ld ? ld : rows, Layout::col_major};
}

/// Element types: inputs and output are f32/f32, f64/f64, or f16 inputs with f32 output.
enum class DType { f16, f32, f64 };
std::string_view to_string(DType t);

/// The algorithms of the registry (gemm/src/registry.cu holds the one table of them).
enum class Algo {
  automatic,     ///< picks the fastest implementation that can do the shape
  cublas,        ///< cuBLAS (cublasGemmEx; fp32 math for float, TF32 only with Arguments::allow_tf32)
  naive,         ///< 01: one thread per C element, uncoalesced
  coalesced,     ///< 02: one thread per C element, warps read rows of B together
  smem_tiled,    ///< 03: 32x32 tiles of A and B staged in shared memory
  blocktile_1d,  ///< 04: each thread computes a column of 8 results
  blocktile_2d,  ///< 05: 128x128x8 tiles, 8x8 results per thread
  vectorized,    ///< 06: 05 with 16-byte loads, transposed As and register prefetch
  wmma,          ///< 07: tensor cores through WMMA 16x16x16, f16 inputs, f32 accumulate/output
  tsm2_v0,       ///< TSM2 paper V0: one thread per row of the tall matrix, inner products
  tsm2_v1,       ///< TSM2 paper V1: outer products (each element of A read once per pass)
  tsm2_v2,       ///< TSM2 paper V2: V1 + tiles of B in shared memory (column-major, conflict-free)
  tsm2_v3,       ///< TSM2 paper V3: V2 + prefetching of A and B (the paper's Alg. 4)
  tsm2,          ///< TSM2 for the H100: V3's ideas + wide loads, several rows per thread, split inner
                 ///< dimension with a deterministic reduction, parameters from the model
};

/// Every registered algorithm, in registry order (Algo::automatic is not one of them).
struct AlgoInfo {
  std::string_view name;
  Algo algo;
  std::string_view summary;
};
const std::vector<AlgoInfo>& algorithms();
std::string_view to_string(Algo a);
/// Parses a registry name ("auto" for Algo::automatic); throws std::invalid_argument listing valid names.
Algo algo_from_name(std::string_view name);
/// The registry names, "auto" first: what a command line offers as choices.
std::vector<std::string> algo_names();

/// Arguments of one call: A is m x k, B is k x n, C is m x n, each with its own layout and ld.
template <class TIn, class TOut = TIn>
struct Arguments {
  MatrixView<const TIn> a;
  MatrixView<const TIn> b;
  MatrixView<TOut> c;
  TOut alpha = TOut(1);
  TOut beta = TOut(0);  ///< beta == 0: C is write-only (its old contents, even NaN, are ignored)
  /// Float inputs may be rounded to TF32 (11 significant bits) by an implementation that gains from it:
  /// cuBLAS then computes with CUBLAS_COMPUTE_32F_FAST_TF32; every other algorithm stays in float.
  bool allow_tf32 = false;
};

/// Whether an algorithm can run a call, and if not, why.
struct Support {
  bool ok = true;
  std::string reason;  ///< empty when ok
  explicit operator bool() const { return ok; }
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
};

/// Checks the arguments (throws std::invalid_argument naming the offending values when they are not a
/// valid GEMM) and then whether `algo` can run them.
Support can_implement(Algo algo, const Arguments<float>& args);
Support can_implement(Algo algo, const Arguments<double>& args);
Support can_implement(Algo algo, const Arguments<__half, float>& args);

/// The algorithm Algo::automatic resolves to for these arguments.
Algo choose(const Context& ctx, const Arguments<float>& args);
Algo choose(const Context& ctx, const Arguments<double>& args);
Algo choose(const Context& ctx, const Arguments<__half, float>& args);

/// Queues C = alpha * A * B + beta * C on ctx.stream(). Throws std::invalid_argument for invalid
/// arguments or when `algo` cannot run them (with can_implement's reason).
void gemm(Context& ctx, const Arguments<float>& args, Algo algo = Algo::automatic);
void gemm(Context& ctx, const Arguments<double>& args, Algo algo = Algo::automatic);
void gemm(Context& ctx, const Arguments<__half, float>& args, Algo algo = Algo::automatic);

}  // namespace skinny::gemm
