// The centroid update, deterministic for any k and d, reading X once: the cluster sums (exact integer
// sums, fixed_point.hpp, optionally of weighted points), empty clusters moved to the farthest points,
// then the means and the shift. Two ways to the sums:
//  * few clusters (k <= kStreamMaxK): X streamed in row order, no sort. A block owns a range of rows and
//    a slice of columns and adds each row to its cluster's sums in shared memory (64-bit integers), then
//    adds those to the global sums every kFlushRows rows.
//  * otherwise: points sorted by label (a radix sort), each block summing kPiece consecutive sorted
//    points, one cluster's run after another, into registers.
// Either way the sums are the same integers, however the rows were shared out.
#include "detail.hpp"
#include "element.cuh"
#include "fixed_point.hpp"

#include <skinny/gemm/errors.hpp>

#include <cub/device/device_radix_sort.cuh>
#include <thrust/execution_policy.h>
#include <thrust/sequence.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace skinny::kmeans::detail {
namespace {

using u64 = unsigned long long;

constexpr std::int64_t kPiece = 256;  ///< sorted points per block
constexpr int kThreads = 128;
constexpr int kBatch = 8;             ///< rows whose loads are in flight together per thread
/// Streamed sums up to here (k x 4 KB of shared memory per block). Measured on the H100 at 262144 x
/// 4096, k = 16, in one run: streamed 1.59 / 2.94 ms, sorted 1.64 / 3.04 ms (float / double).
constexpr std::int64_t kStreamMaxK = 16;
constexpr double kMaxFlushFraction = 0.03;  ///< streamed flushes' atomics at most this fraction of the bytes of X
constexpr std::int64_t kSharedWeightSums = 4096;  ///< clusters whose weight sums a block keeps in shared memory

/// Elements per vector load: 16 bytes of float or double, 8 bytes of 16-bit data (8 x 16-bit columns per
/// thread would take twice the shared memory of the streamed sums per block).
template <class T>
constexpr int kVecOf = sizeof(T) >= 4 ? 16 / static_cast<int>(sizeof(T)) : 4;

/// Adds N elements of v times the weight w, each in fixed point with its column's scale.
template <class T, int N>
__device__ __forceinline__ void add_fixed_row(long long* s, std::int64_t stride, const Vec<T, N>& v, double w,
                                              const double (&scale)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) s[i * stride] += to_fixed(to_double(v.e[i]) * w, scale[i]);
}

/// Few clusters: block (range, slice) adds each row r of its range to sums[labels[r]] over the slice's
/// N * kThreads columns in shared memory (k x N * kThreads 64-bit integers; each thread only touches its
/// own columns, so no barrier is needed), and adds them to the global sums every kFlushRows rows.
template <class T, int N>
__global__ void __launch_bounds__(kThreads) stream_sums_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d,
                                                              const std::int32_t* __restrict__ labels,
                                                              const double* __restrict__ weights, std::int64_t k,
                                                              std::int64_t rows_per_range,
                                                              const double* __restrict__ scale, u64* __restrict__ hi,
                                                              u64* __restrict__ lo) {
  using V = Vec<T, N>;
  extern __shared__ long long sums[];  // [k][N * kThreads]: thread t's columns at N t ..
  const std::int64_t j = (static_cast<std::int64_t>(blockIdx.y) * kThreads + threadIdx.x) * N;
  if (j >= d) return;
  constexpr std::int64_t kStride = 1;  // a thread's N columns sit side by side
  long long* mine = sums + threadIdx.x * N;
  double f[N];
#pragma unroll
  for (int i = 0; i < N; ++i) f[i] = scale[j + i];
  const auto add = [&](std::int32_t label, const V& v, double w) {
    add_fixed_row<T, N>(mine + static_cast<std::int64_t>(label) * N * kThreads, kStride, v, w, f);
  };
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.x) * rows_per_range;
  const std::int64_t r_end = min(n, r0 + rows_per_range);
  for (std::int64_t f0 = r0; f0 < r_end; f0 += kFlushRows) {
    const std::int64_t r1 = min(r_end, f0 + kFlushRows);
    for (std::int64_t c = 0; c < k; ++c)
#pragma unroll
      for (int i = 0; i < N; ++i) mine[c * N * kThreads + i] = 0;
    // Two batches of rows in flight: the next batch's loads are issued before the current one is added.
    V v[kBatch];
    std::int32_t l[kBatch];
    double w[kBatch];
    const auto load = [&](std::int64_t rb, V (&vv)[kBatch], std::int32_t (&ll)[kBatch], double (&ww)[kBatch]) {
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        vv[b] = *reinterpret_cast<const V*>(x + (rb + b) * d + j);
        ll[b] = labels[rb + b];
        ww[b] = weights ? weights[rb + b] : 1.0;
      }
    };
    std::int64_t r = f0;
    if (r + kBatch <= r1) load(r, v, l, w);
    for (; r + kBatch <= r1; r += kBatch) {
      V nv[kBatch];
      std::int32_t nl[kBatch];
      double nw[kBatch];
      const bool more = r + 2 * kBatch <= r1;
      if (more) load(r + kBatch, nv, nl, nw);
#pragma unroll
      for (int b = 0; b < kBatch; ++b) add(l[b], v[b], w[b]);
      if (more)
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          v[b] = nv[b];
          l[b] = nl[b];
          w[b] = nw[b];
        }
    }
    for (; r < r1; ++r) add(labels[r], *reinterpret_cast<const V*>(x + r * d + j), weights ? weights[r] : 1.0);
    for (std::int64_t c = 0; c < k; ++c)
#pragma unroll
      for (int i = 0; i < N; ++i) add_fixed(hi + c * d + j + i, lo + c * d + j + i, mine[c * N * kThreads + i]);
  }
}

/// Block (piece, column slice): adds kPiece consecutive points of the label-sorted order (gathered
/// through perm) over N * kThreads columns; each run of one cluster is summed in registers and added to
/// that cluster's global sums when the run ends.
template <class T, int N>
__global__ void __launch_bounds__(kThreads) sorted_sums_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d,
                                                              const std::int32_t* __restrict__ perm,
                                                              const std::int32_t* __restrict__ sorted_labels,
                                                              const double* __restrict__ weights,
                                                              const double* __restrict__ scale, u64* __restrict__ hi,
                                                              u64* __restrict__ lo) {
  using V = Vec<T, N>;
  const std::int64_t j = (static_cast<std::int64_t>(blockIdx.y) * kThreads + threadIdx.x) * N;
  if (j >= d) return;
  double f[N];
#pragma unroll
  for (int i = 0; i < N; ++i) f[i] = scale[j + i];
  const std::int64_t p0 = static_cast<std::int64_t>(blockIdx.x) * kPiece, p1 = min(n, p0 + kPiece);
  long long acc[N] = {};
  std::int32_t run = sorted_labels[p0];
  const auto flush = [&] {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      add_fixed(hi + run * d + j + i, lo + run * d + j + i, acc[i]);
      acc[i] = 0;
    }
  };
  const auto add = [&](std::int32_t label, const V& v, double w) {
    if (label != run) {
      flush();
      run = label;
    }
    add_fixed_row<T, N>(acc, 1, v, w, f);
  };
  std::int64_t p = p0;
  for (; p + kBatch <= p1; p += kBatch) {
    V v[kBatch];
    std::int32_t l[kBatch];
    double w[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const std::int64_t row = perm[p + b];
      v[b] = *reinterpret_cast<const V*>(x + row * d + j);
      l[b] = sorted_labels[p + b];
      w[b] = weights ? weights[row] : 1.0;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) add(l[b], v[b], w[b]);
  }
  for (; p < p1; ++p) {
    const std::int64_t row = perm[p];
    add(sorted_labels[p], *reinterpret_cast<const V*>(x + row * d + j), weights ? weights[row] : 1.0);
  }
  flush();
}

/// Weight sums per cluster: block b adds the weights of points [b * kFlushRows, (b + 1) * kFlushRows),
/// in shared memory when k <= kSharedWeightSums.
__global__ void weight_sums_kernel(const std::int32_t* __restrict__ labels, const double* __restrict__ weights,
                                   std::int64_t n, std::int64_t k, double scale, u64* __restrict__ hi,
                                   u64* __restrict__ lo) {
  extern __shared__ long long block_sums[];
  const bool shared = k <= kSharedWeightSums;
  if (shared)
    for (std::int64_t c = threadIdx.x; c < k; c += blockDim.x) block_sums[c] = 0;
  __syncthreads();
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * kFlushRows;
  const std::int64_t end = min(n, begin + kFlushRows);
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const long long q = to_fixed(weights[i], scale);
    if (shared)
      atomicAdd(reinterpret_cast<u64*>(block_sums + labels[i]), static_cast<u64>(q));
    else
      add_fixed(hi + labels[i], lo + labels[i], q);
  }
  __syncthreads();
  if (shared)
    for (std::int64_t c = threadIdx.x; c < k; c += blockDim.x) add_fixed(hi + c, lo + c, block_sums[c]);
}

/// |w_i x_ij| maxima per column (and of the weights, at out[d]), as the bits of non-negative doubles,
/// whose unsigned order is their numeric order: an integer atomicMax gives the same result in any order.
template <class T>
__global__ void column_max_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d,
                                  const double* __restrict__ weights, std::int64_t rows_per_block, u64* __restrict__ out) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j > d || (j == d && !weights)) return;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * rows_per_block;
  const std::int64_t r1 = min(n, r0 + rows_per_block);
  double m = 0;
  for (std::int64_t i = r0; i < r1; ++i) {
    const double w = weights ? weights[i] : 1.0;
    m = fmax(m, j < d ? fabs(to_double(x[i * d + j]) * w) : fabs(w));
  }
  atomicMax(out + j, static_cast<u64>(__double_as_longlong(m)));
}

/// Moves point `point` (weight w) from cluster `from` to the empty cluster `to` (scikit-learn's relocation).
template <class T>
__global__ void move_point_kernel(const T* __restrict__ x, std::int64_t d, std::int64_t point, double w,
                                  std::int64_t from, std::int64_t to, const double* __restrict__ scale,
                                  u64* __restrict__ hi, u64* __restrict__ lo) {
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const long long q = to_fixed(to_double(x[point * d + j]) * w, scale[j]);
    hi[from * d + j] += fixed_high(-q);
    lo[from * d + j] += fixed_low(-q);
    hi[to * d + j] = fixed_high(q);
    lo[to * d + j] = fixed_low(q);
  }
}

/// The weight-sum side of a moved point (finish() does it on the host with the same rounding).
__global__ void move_weight_kernel(double w, double scale, std::int64_t from, std::int64_t to, u64* __restrict__ hi,
                                   u64* __restrict__ lo) {
  const long long q = to_fixed(w, scale);
  hi[from] += fixed_high(-q);
  lo[from] += fixed_low(-q);
  hi[to] = fixed_high(q);
  lo[to] = fixed_low(q);
}

/// Means (clusters left empty keep their centroid) and each element's squared shift. The denominator is
/// the count, or the weight sum when the points are weighted (w_hi non-null).
template <class C>
__global__ void means_kernel(const u64* __restrict__ hi, const u64* __restrict__ lo, const double* __restrict__ inv_scale,
                             const int* __restrict__ counts, const u64* __restrict__ w_hi, const u64* __restrict__ w_lo,
                             double w_inv_scale, const C* __restrict__ old_c, std::int64_t k, std::int64_t d,
                             C* __restrict__ new_c, double* __restrict__ shift_parts) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < k * d; idx += stride) {
    const std::int64_t c = idx / d, j = idx - c * d;
    const double denom = w_hi ? from_fixed(w_hi[c], w_lo[c], w_inv_scale) : static_cast<double>(counts[c]);
    const C value = counts[c] > 0 ? static_cast<C>(from_fixed(hi[idx], lo[idx], inv_scale[j]) / denom) : old_c[idx];
    new_c[idx] = value;
    const double delta = static_cast<double>(value) - static_cast<double>(old_c[idx]);
    shift_parts[idx] = delta * delta;
  }
}

template <class U>
DeviceBuffer<U> device_array(std::int64_t count) {
  return DeviceBuffer<U>(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)));
}

int bits_for(std::int64_t k) {
  int bits = 1;
  while ((std::int64_t(1) << bits) < k) ++bits;
  return bits;
}

/// Shared memory of stream_sums_kernel: k x (columns per block) 64-bit integers.
std::size_t stream_smem(std::int64_t k, int vec) {
  return static_cast<std::size_t>(k) * static_cast<std::size_t>(vec) * kThreads * sizeof(long long);
}

}  // namespace

template <class T>
Updater<T>::Updater(std::int64_t n, std::int64_t d, std::int64_t k, Sums sums) : n_(n), d_(d), k_(k) {
  vec_ = d % kVecOf<T> == 0 ? kVecOf<T> : 1;
  sums_ = device_array<u64>(2 * k * d);
  weight_sums_ = device_array<u64>(2 * k);
  scale_ = device_array<double>(2 * d);
  shift_parts_ = device_array<double>(k * d);
  counts_ = device_array<int>(k);
  counts_host_ = PinnedBuffer<int>(static_cast<std::size_t>(k));
  sms_ = multiprocessors();
  if ((sums == Sums::automatic && k <= kStreamMaxK) || sums == Sums::streamed) {
    // Row ranges: enough blocks for one full wave of resident blocks (shared memory bounds them). Each
    // range adds k x d sums to the global ones per kFlushRows rows; where those atomics would exceed
    // kMaxFlushFraction of the bytes of X (few points), the sorted path is used instead.
    const std::size_t smem = stream_smem(k, vec_);
    const void* fn = vec_ > 1 ? reinterpret_cast<const void*>(&stream_sums_kernel<T, kVecOf<T>>)
                              : reinterpret_cast<const void*>(&stream_sums_kernel<T, 1>);
    SKINNY_CUDA_TRY(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int per_sm = 0;
    SKINNY_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kThreads, smem));
    const std::int64_t slices = (d / vec_ + kThreads - 1) / kThreads;
    ranges_ = std::max<std::int64_t>(1, std::min<std::int64_t>(n, std::max(1, per_sm) * sms_ / slices));
    const double flushes = double(ranges_) + double(n) / double(kFlushRows);
    const double flush_fraction = flushes * double(k) * 2 * sizeof(u64) / (double(n) * sizeof(T));
    streaming_ = sums == Sums::streamed || flush_fraction <= kMaxFlushFraction;
  }
  if (streaming_) return;
  keys_ = device_array<std::int32_t>(n);
  keys_out_ = device_array<std::int32_t>(n);
  perm_ = device_array<std::int32_t>(n);
  perm_in_ = device_array<std::int32_t>(n);
  SKINNY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, sort_temp_bytes_, keys_.data(), keys_out_.data(),
                                                  perm_in_.data(), perm_.data(), static_cast<int>(n), 0, bits_for(k)));
  sort_temp_ = device_array<unsigned char>(static_cast<std::int64_t>(sort_temp_bytes_));
}

template <class T>
std::vector<double> Updater<T>::column_max_abs(const T* x, std::int64_t rows, const double* weights,
                                               cudaStream_t stream) const {
  DeviceBuffer<u64> bits(static_cast<std::size_t>(d_ + 1));
  SKINNY_CUDA_TRY(cudaMemsetAsync(bits.data(), 0, bits.size() * sizeof(u64), stream));
  const std::int64_t pieces = std::min<std::int64_t>(rows, 4LL * sms_);
  const std::int64_t rows_per_block = (rows + pieces - 1) / pieces;
  const dim3 grid(static_cast<unsigned>((d_ + 1 + 255) / 256), static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block));
  column_max_kernel<T><<<grid, 256, 0, stream>>>(x, rows, d_, weights, rows_per_block, bits.data());
  SKINNY_CHECK_LAUNCH();
  const std::vector<u64> host = bits.to_host();
  std::vector<double> out(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) std::memcpy(&out[i], &host[i], sizeof(double));
  return out;
}

template <class T>
void Updater<T>::set_scales(const std::vector<double>& max_abs, bool weighted) {
  if (static_cast<std::int64_t>(max_abs.size()) != d_ + 1)
    throw std::invalid_argument("Updater::set_scales: need d + 1 maxima (columns, then weights)");
  std::vector<double> scales(static_cast<std::size_t>(2 * d_));
  for (std::int64_t j = 0; j < d_; ++j) {
    scales[static_cast<std::size_t>(j)] = fixed_scale(max_abs[static_cast<std::size_t>(j)]);
    scales[static_cast<std::size_t>(d_ + j)] = 1.0 / scales[static_cast<std::size_t>(j)];
  }
  scale_.copy_from(scales);
  weighted_ = weighted;
  weight_scale_ = fixed_scale(max_abs[static_cast<std::size_t>(d_)]);
  scaled_ = true;
}

template <class T>
void Updater<T>::begin(cudaStream_t stream) {
  if (!scaled_) throw std::logic_error("Updater: set_scales before the first update");
  SKINNY_CUDA_TRY(cudaMemsetAsync(sums_.data(), 0, sums_.size() * sizeof(u64), stream));
  if (weighted_) SKINNY_CUDA_TRY(cudaMemsetAsync(weight_sums_.data(), 0, weight_sums_.size() * sizeof(u64), stream));
}

template <class T>
void Updater<T>::accumulate(const T* x, const double* weights, const std::int32_t* labels, std::int64_t rows,
                            cudaStream_t stream) {
  u64* hi = sums_.data();
  u64* lo = hi + k_ * d_;
  const double* scale = scale_.data();
  // Vector loads when every row starts aligned (d a multiple of the vector and x aligned).
  const int vec = reinterpret_cast<std::uintptr_t>(x) % (sizeof(T) * kVecOf<T>) == 0 ? vec_ : 1;
  const std::int64_t slices = (d_ / vec + kThreads - 1) / kThreads;
  if (streaming_) {
    const std::int64_t rows_per_range = (rows + ranges_ - 1) / ranges_;
    const dim3 grid(static_cast<unsigned>((rows + rows_per_range - 1) / rows_per_range), static_cast<unsigned>(slices));
    const std::size_t smem = stream_smem(k_, vec);
    // The shared-memory limit is the kernel's, not this updater's: another updater (of other k or
    // vectors) may have set it since the constructor, so it is set for this launch.
    const void* fn = vec > 1 ? reinterpret_cast<const void*>(&stream_sums_kernel<T, kVecOf<T>>)
                             : reinterpret_cast<const void*>(&stream_sums_kernel<T, 1>);
    SKINNY_CUDA_TRY(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    if (vec > 1)
      stream_sums_kernel<T, kVecOf<T>><<<grid, kThreads, smem, stream>>>(x, rows, d_, labels, weights, k_,
                                                                               rows_per_range, scale, hi, lo);
    else
      stream_sums_kernel<T, 1><<<grid, kThreads, smem, stream>>>(x, rows, d_, labels, weights, k_, rows_per_range,
                                                                 scale, hi, lo);
    SKINNY_CHECK_LAUNCH();
  } else {
    // Points sorted by label (the sums do not depend on the order within a cluster).
    SKINNY_CUDA_TRY(cudaMemcpyAsync(keys_.data(), labels, static_cast<std::size_t>(rows) * sizeof(std::int32_t),
                                    cudaMemcpyDeviceToDevice, stream));
    thrust::sequence(thrust::cuda::par_nosync.on(stream), perm_in_.data(), perm_in_.data() + rows);
    SKINNY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(sort_temp_.data(), sort_temp_bytes_, keys_.data(), keys_out_.data(),
                                                    perm_in_.data(), perm_.data(), static_cast<int>(rows), 0,
                                                    bits_for(k_), stream));
    const dim3 grid(static_cast<unsigned>((rows + kPiece - 1) / kPiece), static_cast<unsigned>(slices));
    if (vec > 1)
      sorted_sums_kernel<T, kVecOf<T>><<<grid, kThreads, 0, stream>>>(x, rows, d_, perm_.data(), keys_out_.data(),
                                                                            weights, scale, hi, lo);
    else
      sorted_sums_kernel<T, 1><<<grid, kThreads, 0, stream>>>(x, rows, d_, perm_.data(), keys_out_.data(), weights,
                                                              scale, hi, lo);
    SKINNY_CHECK_LAUNCH();
  }
  if (weighted_) {
    const std::size_t smem = k_ <= kSharedWeightSums ? static_cast<std::size_t>(k_) * sizeof(long long) : 0;
    weight_sums_kernel<<<static_cast<unsigned>((rows + kFlushRows - 1) / kFlushRows), 256, smem, stream>>>(
        labels, weights, rows, k_, weight_scale_, weight_sums_.data(), weight_sums_.data() + k_);
    SKINNY_CHECK_LAUNCH();
  }
}

template <class T>
double Updater<T>::finish(const T* x, const double* weights, std::int32_t* labels, const C* mindist,
                          const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream) {
  std::vector<double> host_weights;
  Points points;
  points.x = x;
  points.fetch = [&](std::vector<C>& dist, std::vector<std::int32_t>& lab) {
    dist.resize(static_cast<std::size_t>(n_));
    lab.resize(static_cast<std::size_t>(n_));
    SKINNY_CUDA_TRY(cudaMemcpyAsync(dist.data(), mindist, dist.size() * sizeof(C), cudaMemcpyDeviceToHost, stream));
    SKINNY_CUDA_TRY(cudaMemcpyAsync(lab.data(), labels, lab.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
    if (weights) {
      host_weights.resize(static_cast<std::size_t>(n_));
      SKINNY_CUDA_TRY(cudaMemcpyAsync(host_weights.data(), weights, host_weights.size() * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream));
    }
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  };
  points.relabel = [&](std::int64_t point, std::int32_t label) {
    SKINNY_CUDA_TRY(cudaMemcpyAsync(labels + point, &label, sizeof label, cudaMemcpyHostToDevice, stream));
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));  // `label` lives on this stack frame
  };
  // The weights come back with the distances: their host copy exists once fetch() has run.
  return finish_with(points, weights ? &host_weights : nullptr, counts_dev, old_c, new_c, stream);
}

template <class T>
double Updater<T>::finish(const Points& points, const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream) {
  return finish_with(points, nullptr, counts_dev, old_c, new_c, stream);
}

template <class T>
double Updater<T>::finish_with(const Points& points, const std::vector<double>* fetched_weights, const int* counts_dev,
                               const C* old_c, C* new_c, cudaStream_t stream) {
  // The counts come back while the means are queued on the assumption that no cluster is empty, so one
  // wait covers all; an empty cluster redoes the means after its move.
  counts_host_.copy_from_device_async(counts_dev, stream);
  means_and_shift(counts_dev, old_c, new_c, stream);
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  if (std::find(counts_host_.data(), counts_host_.data() + k_, 0) == counts_host_.data() + k_) return shift_.value();
  std::vector<int> counts(counts_host_.data(), counts_host_.data() + k_);

  // Empty clusters take the points farthest from their centroids (largest distance first, ties to the
  // lower index), as scikit-learn's _relocate_empty_clusters does.
  std::vector<std::int64_t> empty;
  for (std::int64_t c = 0; c < k_; ++c)
    if (counts[static_cast<std::size_t>(c)] == 0) empty.push_back(c);
  std::vector<C> dist;
  std::vector<std::int32_t> lab;
  points.fetch(dist, lab);
  const double* weights = fetched_weights ? fetched_weights->data() : points.weights;
  std::vector<std::int64_t> order(dist.size());
  std::iota(order.begin(), order.end(), 0);
  const auto m = static_cast<std::ptrdiff_t>(std::min<std::size_t>(empty.size(), order.size()));
  std::partial_sort(order.begin(), order.begin() + m, order.end(), [&](std::int64_t a, std::int64_t b) {
    const C da = dist[static_cast<std::size_t>(a)], db = dist[static_cast<std::size_t>(b)];
    return da > db || (da == db && a < b);
  });
  u64* hi = sums_.data();
  u64* lo = hi + k_ * d_;
  std::vector<u64> wsums;
  if (weighted_) wsums = weight_sums_.to_host();  // waits for the stream
  DeviceBuffer<T> row(points.x_on_device ? 0 : static_cast<std::size_t>(d_));
  for (std::ptrdiff_t e = 0; e < m; ++e) {
    const std::int64_t point = order[static_cast<std::size_t>(e)], to = empty[static_cast<std::size_t>(e)];
    const std::int32_t from = lab[static_cast<std::size_t>(point)];
    const double wp = weights ? weights[point] : 1.0;
    if (points.x_on_device) {
      move_point_kernel<T><<<1, 256, 0, stream>>>(points.x, d_, point, wp, from, to, scale_.data(), hi, lo);
    } else {  // stream order keeps the copy of each row after the kernel that read the previous one
      SKINNY_CUDA_TRY(cudaMemcpyAsync(row.data(), points.x + point * d_, row.bytes(), cudaMemcpyHostToDevice, stream));
      move_point_kernel<T><<<1, 256, 0, stream>>>(row.data(), d_, 0, wp, from, to, scale_.data(), hi, lo);
    }
    SKINNY_CHECK_LAUNCH();
    if (weighted_) {
      const long long q = std::llrint(wp * weight_scale_);
      wsums[static_cast<std::size_t>(from)] += fixed_high(-q);
      wsums[static_cast<std::size_t>(k_ + from)] += fixed_low(-q);
      wsums[static_cast<std::size_t>(to)] = fixed_high(q);
      wsums[static_cast<std::size_t>(k_ + to)] = fixed_low(q);
    }
    --counts[static_cast<std::size_t>(from)];
    counts[static_cast<std::size_t>(to)] = 1;
    points.relabel(point, static_cast<std::int32_t>(to));
  }
  if (weighted_) weight_sums_.copy_from(wsums);
  SKINNY_CUDA_TRY(cudaMemcpyAsync(counts_.data(), counts.data(), counts.size() * sizeof(int), cudaMemcpyHostToDevice, stream));
  means_and_shift(counts_.data(), old_c, new_c, stream);
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  return shift_.value();
}

template <class T>
double Updater<T>::update(const T* x, const double* weights, std::int32_t* labels, const C* mindist,
                          const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream) {
  begin(stream);
  accumulate(x, weights, labels, n_, stream);
  return finish(x, weights, labels, mindist, counts_dev, old_c, new_c, stream);
}

template <class T>
void Updater<T>::move_point(const T* row, double w, std::int64_t from, std::int64_t to, cudaStream_t stream) {
  u64* hi = sums_.data();
  move_point_kernel<T><<<1, 256, 0, stream>>>(row, d_, 0, w, from, to, scale_.data(), hi, hi + k_ * d_);
  SKINNY_CHECK_LAUNCH();
  if (weighted_) {
    move_weight_kernel<<<1, 1, 0, stream>>>(w, weight_scale_, from, to, weight_sums_.data(), weight_sums_.data() + k_);
    SKINNY_CHECK_LAUNCH();
  }
}

template <class T>
double Updater<T>::means(const int* counts_dev, const C* old_c, C* new_c, cudaStream_t stream) {
  means_and_shift(counts_dev, old_c, new_c, stream);
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  return shift_.value();
}

template <class T>
void Updater<T>::means_and_shift(const int* counts, const C* old_c, C* new_c, cudaStream_t stream) {
  const u64* hi = sums_.data();
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((k_ * d_ + 255) / 256, 8LL * sms_));
  means_kernel<C><<<blocks, 256, 0, stream>>>(hi, hi + k_ * d_, scale_.data() + d_, counts,
                                              weighted_ ? weight_sums_.data() : nullptr,
                                              weighted_ ? weight_sums_.data() + k_ : nullptr, 1.0 / weight_scale_,
                                              old_c, k_, d_, new_c, shift_parts_.data());
  SKINNY_CHECK_LAUNCH();
  // A reduction of our own: thrust's allocates (and frees) scratch memory on every call.
  shift_.queue(shift_parts_.data(), k_ * d_, stream);
}

template class Updater<float>;
template class Updater<double>;
template class Updater<__half>;
template class Updater<__nv_bfloat16>;

}  // namespace skinny::kmeans::detail
