// The checks of Params::protect (protect.hpp): the checksum centroid and the scale M of the distance
// bound, the exact column-total check of the centroid sums, and the bit flips of fault injection.
#include "detail.hpp"
#include "block_sum.cuh"
#include "protect.hpp"

#include <skinny/gemm/bit_flip.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/gemm.hpp>
#include <skinny/gemm/splitmix64.hpp>
#include <skinny/gemm/tf32.hpp>

#include <thrust/copy.h>
#include <thrust/execution_policy.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace skinny::kmeans::detail {
namespace {

using u64 = unsigned long long;
constexpr int kThreads = 256;
/// Centroids per piece of the column sums of the checksum row (fixed pieces: a fixed order).
constexpr std::int64_t kCentroidPiece = 256;

/// A centroid element as the fused kernel's one-product terms take it (the nearest kernel's
/// centre_parts_kernel): rounded to TF32 (to nearest, ties away from zero), half or bfloat16.
__device__ __forceinline__ double rounded_centre(float v, CentreRounding r) {
  switch (r) {
    case CentreRounding::tf32: return __uint_as_float(gemm::tf32_rounded_bits(__float_as_uint(v)));
    case CentreRounding::f16: return __half2float(__float2half_rn(v));
    case CentreRounding::bf16: return __bfloat162float(__float2bfloat16_rn(v));
  }
  return v;
}

/// part[piece][j] = sum over the centroids of piece `blockIdx.y` of c_ij, in double (with kRounded, of the
/// centroids rounded as `r` says).
template <class C, bool kRounded>
__global__ void centroid_column_parts(const C* __restrict__ c, std::int64_t k, std::int64_t d,
                                      double* __restrict__ part, CentreRounding r = CentreRounding::tf32) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.y) * kCentroidPiece;
  const std::int64_t i1 = i0 + kCentroidPiece < k ? i0 + kCentroidPiece : k;
  double s = 0;
  for (std::int64_t i = i0; i < i1; ++i) {
    if constexpr (kRounded) s += rounded_centre(static_cast<float>(c[i * d + j]), r);
    else s += static_cast<double>(c[i * d + j]);
  }
  part[static_cast<std::int64_t>(blockIdx.y) * d + j] = s;
}

/// s[j] = the sum of the pieces' parts of column j, in order.
__global__ void sum_column_parts(const double* __restrict__ part, std::int64_t pieces, std::int64_t d,
                                 double* __restrict__ s) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  double v = 0;
  for (std::int64_t p = 0; p < pieces; ++p) v += part[p * d + j];
  s[j] = v;
}

/// One block: s = the column sums (from the pieces) into s_out and, rounded, row k of c_aug (when not
/// null); and scale = sqrt(sum_j cnorm_j) + |s|.
template <class C>
__global__ void checksum_row(const double* __restrict__ part, std::int64_t pieces, std::int64_t k, std::int64_t d,
                             const C* __restrict__ cnorm, C* __restrict__ c_aug, double* __restrict__ s_out,
                             double* __restrict__ scale) {
  __shared__ double s_sq[kThreads], c_sq[kThreads];
  double ss = 0, cs = 0;
  for (std::int64_t j = threadIdx.x; j < d; j += kThreads) {
    double s = 0;
    for (std::int64_t p = 0; p < pieces; ++p) s += part[p * d + j];
    const C rounded = static_cast<C>(s);
    if (c_aug) c_aug[k * d + j] = rounded;
    s_out[j] = s;
    ss += static_cast<double>(rounded) * static_cast<double>(rounded);
  }
  for (std::int64_t i = threadIdx.x; i < k; i += kThreads) cs += static_cast<double>(cnorm[i]);
  const double s_total = block_tree_sum<kThreads>(ss, s_sq), c_total = block_tree_sum<kThreads>(cs, c_sq);
  if (threadIdx.x == 0) *scale = sqrt(c_total) + sqrt(s_total);
}

/// The 128-bit value of a (high, low) pair of sum words (fixed_point.hpp: signed high * 2^32 + low).
__device__ __forceinline__ __int128 wide_value(u64 hi, u64 lo) {
  return static_cast<__int128>(static_cast<long long>(hi)) * (__int128(1) << 32) + static_cast<__int128>(lo);
}

/// Block j: column j < d (or the weights, j = d): the sum over the k clusters of the sums' values, its
/// threads taking clusters in turn (integer sums: any order gives the same), against the totals;
/// *mismatches += 1 when they differ.
__global__ void __launch_bounds__(kThreads) compare_column_totals(const u64* __restrict__ hi, const u64* __restrict__ lo,
                                                                  std::int64_t k, std::int64_t d,
                                                                  const u64* __restrict__ w_hi,
                                                                  const u64* __restrict__ w_lo,
                                                                  const u64* __restrict__ totals,
                                                                  int* __restrict__ mismatches) {
  __shared__ __int128 part[kThreads];
  const std::int64_t j = blockIdx.x;
  __int128 s = 0;
  for (std::int64_t c = threadIdx.x; c < k; c += kThreads)
    s += j < d ? wide_value(hi[c * d + j], lo[c * d + j]) : wide_value(w_hi[c], w_lo[c]);
  const __int128 sum = block_tree_sum<kThreads>(s, part);
  // totals: [hi][d], [lo][d], then the weights' hi, lo.
  const __int128 t = j < d ? wide_value(totals[j], totals[d + j]) : wide_value(totals[2 * d], totals[2 * d + 1]);
  if (threadIdx.x == 0 && sum != t) atomicAdd(mismatches, 1);
}

}  // namespace

// ------------------------------------------------------------------------------------------- distances

template <class C>
DistanceGuard<C>::DistanceGuard(std::int64_t d, std::int64_t k, std::int64_t chunks, double unit_roundoff, Carry carry)
    : d_(d), k_(k), chunks_(chunks), carry_(carry), factor_(distance_bound_factor(d, k, unit_roundoff)),
      c_aug_(carry == Carry::column ? static_cast<std::size_t>((k + 1) * d) : 0), s_(static_cast<std::size_t>(d)),
      scale_(1),
      column_parts_(static_cast<std::size_t>((k + kCentroidPiece - 1) / kCentroidPiece * d)),
      failures_(static_cast<std::size_t>(chunks)), max_ratio_(1), failures_host_(static_cast<std::size_t>(chunks)),
      max_ratio_host_(1), unit_roundoff_(unit_roundoff) {
  SKINNY_CUDA_TRY(cudaMemset(max_ratio_.data(), 0, sizeof(unsigned)));
  SKINNY_CUDA_TRY(cudaMemset(failures_.data(), 0, failures_.bytes()));
}

template <class C>
void DistanceGuard<C>::prepare(Context& ctx, const C* c, const C* cnorm) {
  const cudaStream_t stream = ctx.stream();
  SKINNY_CUDA_TRY(cudaMemsetAsync(failures_.data(), 0, failures_.bytes(), stream));
  if (carry_ == Carry::blocks) {
    carry_blocks(ctx, c);
    return;
  }
  if (carry_ == Carry::column)
    SKINNY_CUDA_TRY(cudaMemcpyAsync(c_aug_.data(), c, static_cast<std::size_t>(k_ * d_) * sizeof(C),
                                    cudaMemcpyDeviceToDevice, stream));
  const std::int64_t pieces = (k_ + kCentroidPiece - 1) / kCentroidPiece;
  const dim3 grid(static_cast<unsigned>((d_ + kThreads - 1) / kThreads), static_cast<unsigned>(pieces));
  centroid_column_parts<C, false><<<grid, kThreads, 0, stream>>>(c, k_, d_, column_parts_.data());
  SKINNY_CHECK_LAUNCH();
  checksum_row<<<1, kThreads, 0, stream>>>(column_parts_.data(), pieces, k_, d_, cnorm, c_aug_.data(), s_.data(),
                                           scale_.data());
  SKINNY_CHECK_LAUNCH();
  if (one_product_blocks_ > 0) {  // s^ from the rounded centroids, then T^_b . s^ for every block
    centroid_column_parts<C, true><<<grid, kThreads, 0, stream>>>(c, k_, d_, rounded_parts_.data(), centre_rounding_);
    SKINNY_CHECK_LAUNCH();
    sum_column_parts<<<grid.x, kThreads, 0, stream>>>(rounded_parts_.data(), pieces, d_, rounded_s_.data());
    SKINNY_CHECK_LAUNCH();
    row_dots(one_product_totals_.data(), one_product_blocks_, d_, rounded_s_.data(), one_product_carried_.data(),
             stream);
  }
}

template <class C>
std::vector<std::int64_t> DistanceGuard<C>::failed_chunks(cudaStream_t stream) {
  failures_host_.copy_from_device_async(failures_.data(), stream);
  max_ratio_host_.copy_from_device_async(max_ratio_.data(), stream);
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  float ratio = 0;
  std::memcpy(&ratio, &max_ratio_host_[0], sizeof ratio);
  max_clean_ratio_ = ratio;
  std::vector<std::int64_t> failed;
  for (std::int64_t i = 0; i < chunks_; ++i)
    if (failures_host_[static_cast<std::size_t>(i)] != 0) failed.push_back(i);
  if (!failed.empty()) SKINNY_CUDA_TRY(cudaMemsetAsync(failures_.data(), 0, failures_.bytes(), stream));
  return failed;
}

template <class C>
double DistanceGuard<C>::centroid_scale_now(cudaStream_t stream) const {
  double m = 0;
  SKINNY_CUDA_TRY(cudaMemcpyAsync(&m, scale_.data(), sizeof m, cudaMemcpyDeviceToHost, stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  return m;
}

template <class C>
template <class T>
void DistanceGuard<C>::set_blocks(const T* x, std::int64_t n, std::int64_t chunk, cudaStream_t stream) {
  if (carry_ != Carry::blocks) throw std::logic_error("DistanceGuard::set_blocks: not a guard of block checks");
  blocks_per_chunk_ = (chunk + kCheckBlockRows - 1) / kCheckBlockRows;
  block_count_ = (n + chunk - 1) / chunk * blocks_per_chunk_;
  block_factor_ = distance_bound_factor(d_, kCheckBlockRows, unit_roundoff_);
  block_totals_ = DeviceBuffer<double>(static_cast<std::size_t>(block_count_ * d_));
  block_norms_ = DeviceBuffer<double>(static_cast<std::size_t>(block_count_));
  carried_blocks_ = DeviceBuffer<double>(static_cast<std::size_t>(block_count_ * k_));
  if (!std::is_same_v<C, double>) c_double_ = DeviceBuffer<double>(static_cast<std::size_t>(k_ * d_));
  block_column_totals(x, n, d_, chunk, kCheckBlockRows, false, block_totals_.data(), block_norms_.data(), stream);
}

template <class C>
template <class T>
void DistanceGuard<C>::set_one_product_blocks(const T* x, std::int64_t n, std::int64_t chunk, CentreRounding centres,
                                              cudaStream_t stream) {
  if (carry_ != Carry::pass)
    throw std::logic_error("DistanceGuard::set_one_product_blocks: not a guard of the fused kernel");
  centre_rounding_ = centres;
  one_product_blocks_per_chunk_ = (chunk + kOneProductBlockRows - 1) / kOneProductBlockRows;
  one_product_blocks_ = (n + chunk - 1) / chunk * one_product_blocks_per_chunk_;
  one_product_totals_ = DeviceBuffer<double>(static_cast<std::size_t>(one_product_blocks_ * d_));
  one_product_norms_ = DeviceBuffer<double>(static_cast<std::size_t>(one_product_blocks_));
  one_product_carried_ = DeviceBuffer<double>(static_cast<std::size_t>(one_product_blocks_));
  rounded_parts_ = DeviceBuffer<double>(column_parts_.size());
  rounded_s_ = DeviceBuffer<double>(static_cast<std::size_t>(d_));
  block_column_totals(x, n, d_, chunk, kOneProductBlockRows, true, one_product_totals_.data(),
                      one_product_norms_.data(), stream);
}

template <class C>
double DistanceGuard<C>::one_product_bound(std::int64_t block, cudaStream_t stream) const {
  double norm = 0, carried = 0;
  SKINNY_CUDA_TRY(
      cudaMemcpyAsync(&norm, one_product_norms_.data() + block, sizeof norm, cudaMemcpyDeviceToHost, stream));
  SKINNY_CUDA_TRY(
      cudaMemcpyAsync(&carried, one_product_carried_.data() + block, sizeof carried, cudaMemcpyDeviceToHost, stream));
  const double scale = centroid_scale_now(stream);  // waits for the copies too
  return one_product_block_bound(norm, carried, scale, one_product_factor(), one_product_bias());
}

template <class C>
void DistanceGuard<C>::carry_blocks(Context& ctx, const C* c) {
  const double* cd = nullptr;
  if constexpr (std::is_same_v<C, double>) {
    cd = c;
  } else {
    thrust::copy(thrust::cuda::par_nosync.on(ctx.stream()), c, c + k_ * d_, c_double_.data());
    SKINNY_CHECK_LAUNCH();
    cd = c_double_.data();
  }
  gemm::gemm(ctx,
             gemm::Arguments<double>{gemm::row_major<const double>(block_totals_.data(), block_count_, d_),
                                     gemm::col_major<const double>(cd, d_, k_),
                                     gemm::row_major(carried_blocks_.data(), block_count_, k_)},
             gemm::Algo::cublas);
}

template <class C>
double DistanceGuard<C>::block_bound(std::int64_t block, double c_sq_norm, cudaStream_t stream) const {
  double norm = 0;
  SKINNY_CUDA_TRY(cudaMemcpyAsync(&norm, block_norms_.data() + block, sizeof norm, cudaMemcpyDeviceToHost, stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  return distance_bound(norm, std::sqrt(c_sq_norm), block_factor_);
}

// ------------------------------------------------------------------------------------------------ sums

template <class T>
SumGuard<T>::SumGuard(const T* x, std::int64_t n, std::int64_t d, const std::vector<double>& max_abs,
                      const double* weights, cudaStream_t stream)
    : d_(d), weighted_(weights != nullptr), totals_(static_cast<std::size_t>(2 * d + 2)), mismatches_(1),
      mismatches_host_(1) {
  Updater<T> one(n, d, 1);
  one.set_scales(max_abs, weighted_);
  DeviceBuffer<std::int32_t> zeros(static_cast<std::size_t>(n));
  SKINNY_CUDA_TRY(cudaMemsetAsync(zeros.data(), 0, zeros.bytes(), stream));
  one.begin(stream);
  one.accumulate(x, weights, zeros.data(), n, stream);
  // One cluster: its sums [hi][d], [lo][d] are the totals; its weight sums [hi], [lo] follow.
  SKINNY_CUDA_TRY(cudaMemcpyAsync(totals_.data(), one.sums(), static_cast<std::size_t>(2 * d) * sizeof(u64),
                                  cudaMemcpyDeviceToDevice, stream));
  SKINNY_CUDA_TRY(cudaMemcpyAsync(totals_.data() + 2 * d, one.weight_sums(), 2 * sizeof(u64), cudaMemcpyDeviceToDevice,
                                  stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));  // `one` and `zeros` go when this returns
}

template <class T>
bool SumGuard<T>::matches(Updater<T>& u, cudaStream_t stream) {
  const std::int64_t k = u.sum_words() / (2 * d_);
  const u64* hi = u.sums();
  const u64* w = u.weight_sums();
  SKINNY_CUDA_TRY(cudaMemsetAsync(mismatches_.data(), 0, sizeof(int), stream));
  compare_column_totals<<<static_cast<unsigned>(d_ + (weighted_ ? 1 : 0)), kThreads, 0, stream>>>(
      hi, hi + k * d_, k, d_, w, w + k, totals_.data(), mismatches_.data());
  SKINNY_CHECK_LAUNCH();
  mismatches_host_.copy_from_device_async(mismatches_.data(), stream);
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  return mismatches_host_[0] == 0;
}

// ------------------------------------------------------------------------------------------- injection

template <class V>
FlippedBit flip_random_bit(V* values, std::int64_t count, std::uint64_t seed, cudaStream_t stream) {
  if (values == nullptr || count < 1) throw std::invalid_argument("flip_random_bit: nothing to flip");
  std::uint64_t state = splitmix64(seed ^ 0x4b4d464c4950ull);
  FlippedBit f;
  f.index = static_cast<std::int64_t>(splitmix64(state++) % static_cast<std::uint64_t>(count));
  f.bit = static_cast<int>(splitmix64(state++) % (8 * sizeof(V)));
  V v{};
  SKINNY_CUDA_TRY(cudaMemcpyAsync(&v, values + f.index, sizeof v, cudaMemcpyDeviceToHost, stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  f.before = static_cast<double>(v);
  v = with_bit_flipped(v, f.bit);
  f.after = static_cast<double>(v);
  SKINNY_CUDA_TRY(cudaMemcpyAsync(values + f.index, &v, sizeof v, cudaMemcpyHostToDevice, stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  return f;
}

template class DistanceGuard<float>;
template class DistanceGuard<double>;
template void DistanceGuard<float>::set_blocks(const float*, std::int64_t, std::int64_t, cudaStream_t);
template void DistanceGuard<float>::set_blocks(const __half*, std::int64_t, std::int64_t, cudaStream_t);
template void DistanceGuard<float>::set_blocks(const __nv_bfloat16*, std::int64_t, std::int64_t, cudaStream_t);
template void DistanceGuard<double>::set_blocks(const double*, std::int64_t, std::int64_t, cudaStream_t);
template void DistanceGuard<float>::set_one_product_blocks(const float*, std::int64_t, std::int64_t, CentreRounding,
                                                           cudaStream_t);
template void DistanceGuard<float>::set_one_product_blocks(const __half*, std::int64_t, std::int64_t, CentreRounding,
                                                           cudaStream_t);
template void DistanceGuard<float>::set_one_product_blocks(const __nv_bfloat16*, std::int64_t, std::int64_t,
                                                           CentreRounding, cudaStream_t);
template class SumGuard<float>;
template class SumGuard<double>;
template class SumGuard<__half>;
template class SumGuard<__nv_bfloat16>;
template FlippedBit flip_random_bit(float*, std::int64_t, std::uint64_t, cudaStream_t);
template FlippedBit flip_random_bit(double*, std::int64_t, std::uint64_t, cudaStream_t);
template FlippedBit flip_random_bit(unsigned long long*, std::int64_t, std::uint64_t, cudaStream_t);

}  // namespace skinny::kmeans::detail
