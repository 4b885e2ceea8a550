// Algorithm-based fault tolerance of the Lloyd loop (Params::protect).
//
// Distances. The GEMM computes the cross terms g_ij = x_i . c_j for the k centroids and one more
// "checksum centroid" s = sum_j c_j, so each point carries g_is = x_i . s from the same pass over X. Before
// the argmin uses a point's terms, sum_j g_ij (in double) must equal g_is within the rounding of the two:
// the GEMM rounds each term by about u sqrt(d) |x_i| |c_j| (random-walk growth of the sum's errors), the k
// terms' errors add in quadrature, and g_is's own rounding (and that of s, rounded to the compute type)
// is about u sqrt(d) |x_i| |s|. So the bound of point i is
//     kappa * u * sqrt(d + k) * |x_i| * M,     M = sqrt(sum_j |c_j|^2) + |s|,
// with kappa calibrated on the GPU (kDistanceKappa; docs/fault-tolerant-kmeans.md). A chunk with a point
// over its bound is recomputed before the update reads its labels. For few clusters on the GEMM path the
// checks run on blocks of points instead (DistanceGuard::set_blocks), so that the GEMM keeps its k columns.
//
// One product per term (the fused kernel in Math::fast, and the first pass of Math::exact by
// fast_then_recheck) is checked at float level too, against the points and centroids as the tensor cores
// take them (x^: float points truncated to TF32, 16-bit points as they are; c^: the centroids rounded to
// TF32 or to the points' type): the products x^_l c^_jl are exact in float, so sum_j x^.c^_j and x^.s^
// (s^ = sum_j c^_j) differ by the float sums only. Those sums run in the tensor cores, which add by
// truncation: besides the random rounding of the model above, each term shrinks by up to a unit in the
// last place per step of the inner dimension, a bias that grows like d and adds up coherently where the
// terms share a sign. The checks go by blocks of kOneProductBlockRows points, whose x^ totals are fixed for
// the fit (so no pass over X per iteration carries x^.s^):
//     | sum_{i in b} sum_j g_ij - T^_b . s^ | <= kappa u ( sqrt(d + k + B) |X_b| M + (d / 4 + 1) |T^_b . s^| ),
// |X_b| = (sum_{i in b} |x_i|^2)^(1/2), u = 2^-24 (one_product_block_bound). The points the first pass of
// fast_then_recheck leaves are run again at float accuracy; their terms are checked per point as above.
//
// Sums. The centroid sums are exact integers (fixed_point.hpp), so their column sums over the clusters
// must equal the column totals of X (and the weight sums the total weight) exactly: any change of any
// bit of any word is seen, with no false alarm. An update whose sums differ is accumulated again.
#pragma once

#include <skinny/gemm/context.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/host_device.hpp>
#include <skinny/gemm/pinned_buffer.hpp>
#include <skinny/kmeans/kmeans.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace skinny::kmeans::detail {

template <class T>
class Updater;

/// Safety factor of the distance bound over the rounding model, calibrated on the H100: the largest clean
/// |difference| / (u sqrt(d + k) |x| M) seen over the benchmark shapes and data kinds, times a margin
/// (docs/fault-tolerant-kmeans.md).
constexpr double kDistanceKappa = 4;

/// Unit round-off of the distance GEMM in compute type C (the float backends run IEEE float products or
/// 3xTF32, which matches them).
template <class C>
constexpr double unit_roundoff() {
  return sizeof(C) == 8 ? 0x1p-53 : 0x1p-24;
}

/// Points per block of the one-product checks.
constexpr std::int64_t kOneProductBlockRows = 64;

/// The bound of a one-product block check: factor |X_b| M + bias |carried|, with
/// factor = kappa u sqrt(d + k + B) and bias = kappa u (d / 4 + 1) (one_product_factor, one_product_bias).
SKINNY_HOST_DEVICE inline double one_product_block_bound(double block_sq_norm, double carried, double centroid_scale,
                                                         double factor, double bias) {
  return factor * sqrt(block_sq_norm > 0 ? block_sq_norm : 0.0) * centroid_scale + bias * fabs(carried);
}
inline double one_product_factor(std::int64_t d, std::int64_t k) {
  return kDistanceKappa * 0x1p-24 * std::sqrt(static_cast<double>(d + k + kOneProductBlockRows));
}
inline double one_product_bias(std::int64_t d) { return kDistanceKappa * 0x1p-24 * (static_cast<double>(d) / 4 + 1); }

/// How the fused kernel's one-product terms take the centroids: rounded to TF32 (float points, and 16-bit
/// points widened to float), to half or to bfloat16 (16-bit points read as they are).
enum class CentreRounding { tf32, f16, bf16 };

/// Unit round-off of one TF32 product (cuBLAS's TF32 GEMM in Math::fast, whose rounding of the operands is
/// its own: the check cannot take them as it does): 11 significant bits, truncated at worst (2^-10).
constexpr double kTf32Roundoff = 0x1p-10;

/// kappa u sqrt(d + k): the part of every point's bound that depends on the shape and the arithmetic only.
inline double distance_bound_factor(std::int64_t d, std::int64_t k, double unit_roundoff) {
  return kDistanceKappa * unit_roundoff * std::sqrt(static_cast<double>(d + k));
}
template <class C>
double distance_bound_factor(std::int64_t d, std::int64_t k) {
  return distance_bound_factor(d, k, unit_roundoff<C>());
}

/// The bound of one point's check: factor |x|^2^(1/2) M (M: centroid_scale).
SKINNY_HOST_DEVICE inline double distance_bound(double x_sq_norm, double centroid_scale, double factor) {
  return factor * sqrt(x_sq_norm > 0 ? x_sq_norm : 0.0) * centroid_scale;
}

/// How the checksum side of the distance checks is carried.
enum class Carry {
  column,  ///< x.s as one more column of the GEMM (centroids()): many clusters on the GEMM path
  pass,    ///< the fused nearest kernel, which returns each point's sum of cross terms: one-product sums
           ///< checked by blocks (set_one_product_blocks), float-accurate ones against x.s from a pass over X
           ///< in double (column_sums())
  blocks,  ///< block checks (set_blocks): few clusters on the GEMM path, which keeps its k columns
};

/// The distance checks of one fit: what each assignment's check compares with (the centroids with their
/// checksum row and M, or the carried block checksums), and the failures of the assignment per chunk.
template <class C>
class DistanceGuard {
 public:
  /// `unit_roundoff`: of the products the distances are computed with.
  DistanceGuard(std::int64_t d, std::int64_t k, std::int64_t chunks, double unit_roundoff, Carry carry);
  /// Queues what the checks of an assignment with the k x d centroids c (squared norms cnorm) compare with,
  /// and clears the failures. column and pass: s = sum_j c_j (as row k of centroids(), in double in
  /// column_sums()) and M; blocks: carried_blocks() = the block totals . c_j (a GEMM in double).
  void prepare(Context& ctx, const C* c, const C* cnorm);
  /// (k + 1) x d row-major: the centroids, then their sum.
  const C* centroids() const noexcept { return c_aug_.data(); }
  /// s = sum_j c_j in double (d values).
  const double* column_sums() const noexcept { return s_.data(); }
  const double* centroid_scale() const noexcept { return scale_.data(); }
  double bound_factor() const noexcept { return factor_; }
  /// The failure counter of chunk i and the shared maximum ratio, for checked_argmin.
  int* failures(std::int64_t chunk) noexcept { return failures_.data() + chunk; }
  unsigned* max_ratio() noexcept { return max_ratio_.data(); }
  /// Waits for the stream: the chunks whose check failed since prepare(), and clears their counters.
  std::vector<std::int64_t> failed_chunks(cudaStream_t stream);
  /// Largest ratio of a passing check since the fit began (valid after failed_chunks).
  double max_clean_ratio() const noexcept { return max_clean_ratio_; }
  /// M of the current centroids (waits for the stream).
  double centroid_scale_now(cudaStream_t stream) const;

  /// Block checks, for few clusters on the GEMM path, where a checksum column would cost the tall-skinny
  /// GEMM a second pass (17 columns: TSM2's tensor-core kernels take 16 per pass): the column sums of each
  /// block of kCheckBlockRows points, sum_i x_i . c_j = (sum_i x_i) . c_j. X's side is fixed for the fit:
  /// its block totals and norms are computed once here, for chunks of `chunk` rows.
  template <class T>
  void set_blocks(const T* x, std::int64_t n, std::int64_t chunk, cudaStream_t stream);
  bool blocks() const noexcept { return carry_ == Carry::blocks; }
  std::int64_t blocks_per_chunk() const noexcept { return blocks_per_chunk_; }
  const double* carried_blocks() const noexcept { return carried_blocks_.data(); }
  const double* block_norms() const noexcept { return block_norms_.data(); }
  /// kappa u sqrt(d + kCheckBlockRows): a block check's bound is this times sqrt(block norm) |c_j|.
  double block_factor() const noexcept { return block_factor_; }
  /// The bound of block `block`'s check of a centroid with squared norm c_sq_norm (waits for the stream).
  double block_bound(std::int64_t block, double c_sq_norm, cudaStream_t stream) const;

  /// One-product checks (Carry::pass, the fused kernel): the totals and norms of X's blocks of
  /// kOneProductBlockRows rows in chunks of `chunk` rows, as the tensor cores read float points (truncated
  /// to TF32; 16-bit points as they are), computed once here; each prepare() then also carries
  /// one_product_carried() = T^_b . s^ with s^ the sum of the centroids rounded as `centres` says.
  template <class T>
  void set_one_product_blocks(const T* x, std::int64_t n, std::int64_t chunk, CentreRounding centres,
                              cudaStream_t stream);
  std::int64_t one_product_blocks_per_chunk() const noexcept { return one_product_blocks_per_chunk_; }
  const double* one_product_carried() const noexcept { return one_product_carried_.data(); }
  const double* one_product_norms() const noexcept { return one_product_norms_.data(); }
  double one_product_factor() const noexcept { return detail::one_product_factor(d_, k_); }
  double one_product_bias() const noexcept { return detail::one_product_bias(d_); }
  /// The bound of one-product block `block`'s check (waits for the stream).
  double one_product_bound(std::int64_t block, cudaStream_t stream) const;

 private:
  /// Queues carried_blocks() = the block totals . c_j for the k x d centroids c (a GEMM in double).
  void carry_blocks(Context& ctx, const C* c);

  std::int64_t d_, k_, chunks_;
  Carry carry_;
  double factor_;
  DeviceBuffer<C> c_aug_;
  DeviceBuffer<double> s_, scale_, column_parts_;
  DeviceBuffer<int> failures_;
  DeviceBuffer<unsigned> max_ratio_;
  PinnedBuffer<int> failures_host_;
  PinnedBuffer<unsigned> max_ratio_host_;
  double max_clean_ratio_ = 0;
  double unit_roundoff_;
  std::int64_t block_count_ = 0, blocks_per_chunk_ = 0;  ///< Carry::blocks, after set_blocks
  double block_factor_ = 0;
  DeviceBuffer<double> block_totals_, block_norms_, carried_blocks_, c_double_;
  std::int64_t one_product_blocks_ = 0, one_product_blocks_per_chunk_ = 0;  ///< after set_one_product_blocks
  CentreRounding centre_rounding_ = CentreRounding::tf32;
  DeviceBuffer<double> one_product_totals_, one_product_norms_, one_product_carried_, rounded_parts_, rounded_s_;
};

/// The exact checks of the centroid sums: the column totals of all n points (and their total weight)
/// under the updater's scales, accumulated once per fit.
template <class T>
class SumGuard {
 public:
  /// One pass over the n x d points X (device) with `weights` (device, or null) through an updater of one
  /// cluster with the scales `max_abs` (Updater::column_max_abs of X).
  SumGuard(const T* x, std::int64_t n, std::int64_t d, const std::vector<double>& max_abs, const double* weights,
           cudaStream_t stream);
  /// Whether the sums of `u` (after accumulate over all n points, before finish) add up over the clusters
  /// to the totals, word for word in 128-bit integers. Waits for the stream.
  bool matches(Updater<T>& u, cudaStream_t stream);

 private:
  std::int64_t d_;
  bool weighted_;
  DeviceBuffer<unsigned long long> totals_;  ///< [hi, lo][d] then [hi, lo] of the weights
  DeviceBuffer<int> mismatches_;
  PinnedBuffer<int> mismatches_host_;
};

/// A bit flipped in device memory: where, which bit, the value before and after.
struct FlippedBit {
  std::int64_t index = 0;
  int bit = 0;
  double before = 0, after = 0;
};

/// Flips one bit, drawn from the seed, of one of the `count` values at `values` (device), drawn too.
template <class V>
FlippedBit flip_random_bit(V* values, std::int64_t count, std::uint64_t seed, cudaStream_t stream);

}  // namespace skinny::kmeans::detail
