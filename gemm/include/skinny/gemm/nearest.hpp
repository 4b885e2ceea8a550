// The nearest of k centres for each of n points by squared Euclidean distance, with the cross terms
// x.c on the tensor cores (Math: the accuracy of float arithmetic, or one TF32 / 16-bit product) and the
// argmin fused into the GEMM, so the n x k matrix of distances is never written. Points are float, half
// or bfloat16 (read as they are, multiplied by the tensor cores in their own type); centres are float. K-means with many clusters is compute
// bound in that GEMM; writing and re-reading its result would add two passes over n x k values.
//
//   skinny::gemm::NearestArguments a;  a.x = dX; a.n = n; a.d = d; a.c = dC; a.k = k; ...
//   if (auto s = skinny::gemm::nearest_can_implement(ctx, a); !s) std::puts(s.reason.c_str());
//   skinny::gemm::nearest(ctx, a);
#pragma once

#include <skinny/gemm/context.hpp>
#include <skinny/gemm/gemm.hpp>

#include <cstdint>

namespace skinny::gemm {

/// How the cross terms x.c are multiplied: exact (the accuracy of float arithmetic: 3xTF32 for float
/// points; for 16-bit points, each centre a sum of three 16-bit parts, every product exact) or fast (one
/// product per term: TF32 for float points, each product rounded to 11 significant bits as TF32 GEMMs
/// compute them; for 16-bit points the centres rounded to the points' type, as 16-bit GEMMs take them;
/// distances close to a tie can then pick the other centre).
enum class Math { exact, fast };

/// The points' element type.
enum class Element { f32, f16, bf16 };

/// How Math::exact is reached.
///  - three_products: every cross term at float accuracy (3xTF32, or three 16-bit parts), about three
///    times the tensor-core work of Math::fast.
///  - fast_then_recheck: one product per term, and each point's best two distances. Where they differ by
///    more than twice a bound on the one-product error (from ||x||, the centres' own rounding, d and the
///    arithmetic; for float points left by it, again from the point's own distance to its TF32 value),
///    the label is the exact argmin's; the other points (near ties: 4-10 % of blob data under Lloyd,
///    most points where several centres share a tight cluster) are run again. On Hopper (more than 64
///    centres, no row_sums, and where it pays: from about 1300 centres for 16-bit points, 870 for float
///    points with a half copy, 2600 without) a second one-product pass over them lists each one's
///    candidates, the centres the same bound leaves within reach of its best, and their cross terms are
///    summed in double: a point with up to 16 candidates costs about one product per term against k + 2600
///    centres instead of three products. Points with more go through three products over all the centres.
///    nearest() then waits for its stream once or twice.
///  - automatic: fast_then_recheck where the products dominate (float points: k >= 64, k d >= 16384 and
///    d >= 16, on wgmma d >= 48 or d >= 32 with k d >= 65536; 16-bit points: d >= 64 and k d >= 8192, for bfloat16 without a half copy also d >= 256 or k >= 1024),
///    three_products elsewhere and where row_sums are asked for without the re-check's outputs
///    (NearestArguments::rechecked_rows). When the last try on the same shape
///    (through the same Context) cost more than re-checking 35 % of the points with three products
///    (Context::NearestRecheck::cost_share), three_products, with a new try every 4 calls.
enum class ExactMethod { automatic, three_products, fast_then_recheck };

struct NearestArguments {
  const void* x = nullptr;  ///< n x d row-major points of type x_type, leading dimension ldx (0: d)
  Element x_type = Element::f32;
  std::int64_t n = 0, d = 0, ldx = 0;
  const float* c = nullptr;  ///< k x d row-major centres, leading dimension ldc (0: d)
  std::int64_t k = 0, ldc = 0;
  /// n values ||x_i||^2 (fast_then_recheck's certificate takes them as accurate to 2^-20 relative, e.g.
  /// summed in double and rounded once)
  const float* x_sq_norms = nullptr;
  const float* c_sq_norms = nullptr;  ///< k values ||c_j||^2
  /// Out: labels[i] = argmin_j ||x_i||^2 + ||c_j||^2 - 2 x_i.c_j (ties: the lowest j), and
  /// sq_distances[i] = that minimum clamped at 0 (either may be null when not wanted). Math::fast takes
  /// ||c_j||^2 of the centres as it rounds them (computed here; c_sq_norms is read in exact mode): the
  /// distances to the rounded centres, with no bias of their own per centre. Math::exact through
  /// fast_then_recheck gives the certified points the one-product distance (within the certificate's
  /// bound of the exact one) and the re-checked points the float-accurate one.
  std::int32_t* labels = nullptr;
  float* sq_distances = nullptr;
  Math math = Math::exact;
  /// fast_then_recheck needs n <= 2^31 - 1, and with row_sums the re-check's outputs below.
  ExactMethod exact_method = ExactMethod::automatic;
  /// Out, optional: row_sums[i] = sum_j x_i.c_j, the cross terms of the first pass over the centres, added
  /// in double (the left side of a checksum test: it equals x_i.(sum_j c_j) up to rounding; K-means'
  /// Params::protect). The terms are one product each (points and centres as the tensor cores take them:
  /// see *row_sums_one_product) in Math::fast and in a fast_then_recheck first pass, float-accurate
  /// otherwise. Deterministic unless the centre tiles are shared among blocks (few points: their shares
  /// are added by atomics).
  double* row_sums = nullptr;
  /// Out, with row_sums, optional (all three or none; without them Math::exact takes three products): the
  /// points a fast_then_recheck call ran again with three products, in no particular order
  /// (rechecked_rows, device, room for n), the sum of each one's float-accurate terms
  /// (rechecked_row_sums[i] for point rechecked_rows[i], device, room for n) and how many there were
  /// (*rechecked_count, host; 0 when nothing was re-checked).
  std::int32_t* rechecked_rows = nullptr;
  double* rechecked_row_sums = nullptr;
  std::int64_t* rechecked_count = nullptr;
  /// Out, host, optional: whether row_sums add one-product terms (Math::fast, or Math::exact through
  /// fast_then_recheck) rather than float-accurate ones.
  bool* row_sums_one_product = nullptr;
  /// Optional, for float or bfloat16 points in Math::exact through fast_then_recheck without row_sums: a
  /// half copy of the points for the first pass, whose 16-bit products take about two thirds of TF32's
  /// time, and whose centres, rounded to half's 11 bits rather than bfloat16's 8, leave fewer bfloat16
  /// points to re-check (bfloat16 within half's range converts exactly: errors 0). x_half:
  /// n rows of ldx_half half values (a multiple of 8, >= d, 16-byte aligned; zeros past d), x_half_sq_norms
  /// their squared norms, x_half_errors[i] >= ||x^_i - x_i|| (x^_i: row i of the copy). The certificate
  /// takes each point's own distance to its copy; the points it leaves are re-checked on x itself at float
  /// accuracy, so the labels are exact either way. Ignored elsewhere.
  const void* x_half = nullptr;
  std::int64_t ldx_half = 0;
  const float* x_half_sq_norms = nullptr;
  const float* x_half_errors = nullptr;
  /// Fault injection (for tests of the checksum test; only with row_sums): the cross term of point
  /// fault_row and centre fault_col has bit fault_bit flipped before it is used; its value before and after
  /// go to fault_values[0], [1] (device). fault_row < 0: none.
  std::int64_t fault_row = -1, fault_col = 0;
  int fault_bit = 0;
  float* fault_values = nullptr;
};

/// Whether nearest() can run these arguments on ctx's device, and if not, why: pointers non-null,
/// n, d, k >= 1, k <= 2^31 - 129, leading dimensions >= d, rows of 16 bytes' multiples (ldx a multiple of 4
/// float or 8 16-bit elements) and x 16-byte aligned (the points are read with 16-byte copies), compute
/// capability >= 8.0 (TF32, half and bfloat16 tensor cores).
Support nearest_can_implement(const Context& ctx, const NearestArguments& args);

/// Whether one product per term (Math::fast, and the first pass of fast_then_recheck) and float points'
/// exact products run on Hopper's warpgroup MMA (wgmma) on ctx's device, rather than on mma.sync: a
/// compute capability 9.0 device and a library built for it (CUDA architectures 90, which the build
/// compiles as 90a for this kernel).
/// SKINNY_NEAREST_WGMMA=0 in the environment turns it off (for comparisons). The first call on a device
/// runs a one-thread kernel to ask.
bool nearest_uses_wgmma(const Context& ctx);

/// Whether Math::exact with ExactMethod::automatic takes fast_then_recheck for this shape (on its first call
/// through a Context; a shape that left too many points to re-check goes back to three products for a while):
/// whether a half copy of float or bfloat16 points (NearestArguments::x_half) can serve.
bool nearest_may_recheck(const Context& ctx, const NearestArguments& args);

/// Queues the labels and distances on ctx.stream() (scratch from ctx.workspace()). Deterministic:
/// each distance is computed in a fixed order and the minimum does not depend on the order blocks
/// finish. Throws std::invalid_argument with can_implement's reason when it cannot run them.
void nearest(Context& ctx, const NearestArguments& args);

}  // namespace skinny::gemm
