// The centroid update, deterministic for any k and d, reading X once: the cluster sums, empty clusters
// moved to the farthest points, then the means and the shift. Two ways to the sums:
//  * few clusters (k <= kStreamMaxK): X streamed in row order, no sort. A block owns a fixed range of
//    rows and a slice of columns and adds each row to its cluster's sums in shared memory (double),
//    rows in index order; the ranges' partial sums are added in order.
//  * otherwise: points sorted by label (a stable radix sort), each cluster's sorted range cut into fixed
//    pieces whose rows are gathered and summed, the pieces of a cluster added in order.
#include "detail.hpp"

#include <skinny/gemm/errors.hpp>

#include <cub/device/device_radix_sort.cuh>
#include <thrust/execution_policy.h>
#include <thrust/sequence.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace skinny::kmeans::detail {
namespace {

constexpr std::int64_t kPiece = 256;  ///< points per piece: enough pieces to fill the GPU, few partial sums
constexpr int kThreads = 128;
constexpr int kBatch = 8;             ///< rows whose loads are in flight together per thread
/// Streamed sums up to here (k x 4 KB of shared memory per block). Measured on the H100 at 262144 x
/// 4096, k = 16, in one run: streamed 1.59 / 2.94 ms, sorted 1.64 / 3.04 ms (float / double).
constexpr std::int64_t kStreamMaxK = 16;
constexpr double kMaxPartialFraction = 0.03;  ///< streamed partial sums at most this fraction of the bytes of X

template <class T, int N> struct Vec;
template <> struct Vec<float, 1> { using type = float; };
template <> struct Vec<float, 4> { using type = float4; };
template <> struct Vec<double, 1> { using type = double; };
template <> struct Vec<double, 2> { using type = double2; };

template <class T, int N, class V>
__device__ __forceinline__ void accumulate(T (&acc)[N], const V& v) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] += e[i];
}

/// Block (piece, column slice): sums the piece's rows (gathered through perm) over N * kThreads columns.
/// Summing in T keeps the inner loop free of conversions; a piece has at most kPiece rows.
template <class T, int N>
__global__ void __launch_bounds__(kThreads) piece_sums_kernel(const T* __restrict__ x, std::int64_t d,
                                                             const std::int32_t* __restrict__ perm,
                                                             const std::int64_t* __restrict__ pieces,
                                                             double* __restrict__ out) {
  using V = typename Vec<T, N>::type;
  const std::int64_t piece = blockIdx.x;
  const std::int64_t j = (static_cast<std::int64_t>(blockIdx.y) * kThreads + threadIdx.x) * N;
  if (j >= d) return;
  const std::int64_t start = pieces[3 * piece], len = pieces[3 * piece + 1];
  T acc[N] = {};  // in T over at most kPiece rows; the pieces are added in double
  std::int64_t r = 0;
  for (; r + kBatch <= len; r += kBatch) {
    V v[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) v[b] = *reinterpret_cast<const V*>(x + std::int64_t(perm[start + r + b]) * d + j);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) accumulate<T, N>(acc, v[b]);
  }
  for (; r < len; ++r) accumulate<T, N>(acc, *reinterpret_cast<const V*>(x + std::int64_t(perm[start + r]) * d + j));
#pragma unroll
  for (int i = 0; i < N; ++i) out[piece * d + j + i] = acc[i];
}

/// Few clusters: block (range, slice) adds each row r of its range to sums[labels[r]] over the slice's
/// N * kThreads columns, in shared memory (k x N * kThreads doubles; each thread only touches its own
/// columns, so no barrier is needed), then writes them to part[range][k][d].
template <class T, int N>
__global__ void __launch_bounds__(kThreads) stream_sums_kernel(const T* __restrict__ x, std::int64_t n, std::int64_t d,
                                                              const std::int32_t* __restrict__ labels, std::int64_t k,
                                                              std::int64_t rows_per_range, double* __restrict__ part) {
  using V = typename Vec<T, N>::type;
  extern __shared__ double sums[];  // [k][N * kThreads]: thread t's columns at N t ..
  const std::int64_t j = (static_cast<std::int64_t>(blockIdx.y) * kThreads + threadIdx.x) * N;
  if (j >= d) return;
  double* mine = sums + threadIdx.x * N;
  for (std::int64_t c = 0; c < k; ++c)
#pragma unroll
    for (int i = 0; i < N; ++i) mine[c * N * kThreads + i] = 0.0;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.x) * rows_per_range;
  const std::int64_t r1 = min(n, r0 + rows_per_range);
  const auto add = [&](std::int32_t label, const V& v) {
    const T* e = reinterpret_cast<const T*>(&v);
    double* s = mine + static_cast<std::int64_t>(label) * N * kThreads;
#pragma unroll
    for (int i = 0; i < N; ++i) s[i] += static_cast<double>(e[i]);
  };
  // Two batches of rows in flight: the next batch's loads are issued before the current one is added.
  V v[kBatch];
  std::int32_t l[kBatch];
  const auto load = [&](std::int64_t rb, V (&vv)[kBatch], std::int32_t (&ll)[kBatch]) {
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      vv[b] = *reinterpret_cast<const V*>(x + (rb + b) * d + j);
      ll[b] = labels[rb + b];
    }
  };
  std::int64_t r = r0;
  if (r + kBatch <= r1) load(r, v, l);
  for (; r + kBatch <= r1; r += kBatch) {
    V nv[kBatch];
    std::int32_t nl[kBatch];
    const bool more = r + 2 * kBatch <= r1;
    if (more) load(r + kBatch, nv, nl);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) add(l[b], v[b]);
    if (more)
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        v[b] = nv[b];
        l[b] = nl[b];
      }
  }
  for (; r < r1; ++r) add(labels[r], *reinterpret_cast<const V*>(x + r * d + j));
  double* out = part + static_cast<std::int64_t>(blockIdx.x) * k * d + j;
  for (std::int64_t c = 0; c < k; ++c)
#pragma unroll
    for (int i = 0; i < N; ++i) out[c * d + i] = mine[c * N * kThreads + i];
}

/// cluster_sums[c][j] = the row ranges' partial sums added in order.
__global__ void add_ranges_kernel(const double* __restrict__ part, std::int64_t ranges, std::int64_t k, std::int64_t d,
                                  double* __restrict__ cluster_sums) {
  const std::int64_t total = k * d;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    double s = 0;
    for (std::int64_t p = 0; p < ranges; ++p) s += part[p * total + idx];
    cluster_sums[idx] = s;
  }
}

/// cluster_sums[c][j] = the pieces of cluster c added in order.
__global__ void cluster_sums_kernel(const double* __restrict__ piece_sums, const std::int64_t* __restrict__ piece_begin,
                                    std::int64_t d, double* __restrict__ cluster_sums) {
  const std::int64_t c = blockIdx.y;
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  double s = 0;
  for (std::int64_t p = piece_begin[c]; p < piece_begin[c + 1]; ++p) s += piece_sums[p * d + j];
  cluster_sums[c * d + j] = s;
}

/// Moves point `point` from cluster `from` to the empty cluster `to` (scikit-learn's relocation).
template <class T>
__global__ void move_point_kernel(const T* __restrict__ x, std::int64_t d, std::int64_t point, std::int64_t from,
                                  std::int64_t to, double* __restrict__ cluster_sums) {
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const double v = x[point * d + j];
    cluster_sums[from * d + j] -= v;
    cluster_sums[to * d + j] = v;
  }
}

/// Means (clusters left empty keep their centroid) and each element's squared shift.
template <class T>
__global__ void means_kernel(const double* __restrict__ cluster_sums, const int* __restrict__ counts,
                             const T* __restrict__ old_c, std::int64_t d, T* __restrict__ new_c,
                             double* __restrict__ shift_parts) {
  const std::int64_t c = blockIdx.y;
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const std::int64_t idx = c * d + j;
  const T value = counts[c] > 0 ? static_cast<T>(cluster_sums[idx] / counts[c]) : old_c[idx];
  new_c[idx] = value;
  const double delta = static_cast<double>(value) - static_cast<double>(old_c[idx]);
  shift_parts[idx] = delta * delta;
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

/// Shared memory of stream_sums_kernel: k x (columns per block) doubles.
std::size_t stream_smem(std::int64_t k, int vec) {
  return static_cast<std::size_t>(k) * static_cast<std::size_t>(vec) * kThreads * sizeof(double);
}

}  // namespace

template <class T>
Updater<T>::Updater(std::int64_t n, std::int64_t d, std::int64_t k, Sums sums) : n_(n), d_(d), k_(k) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  vec_ = d % kVec == 0 ? kVec : 1;
  cluster_sums_ = device_array<double>(k * d);
  shift_parts_ = device_array<double>(k * d);
  counts_ = device_array<int>(k);
  counts_host_ = PinnedBuffer<int>(static_cast<std::size_t>(k));
  sms_ = multiprocessors();
  if ((sums == Sums::automatic && k <= kStreamMaxK) || sums == Sums::streamed) {
    // Row ranges: enough blocks for one full wave of resident blocks (shared memory bounds them). Each
    // range writes k x d partial sums; where that would exceed kMaxPartialFraction of X (few points),
    // the sorted path is used instead.
    const std::size_t smem = stream_smem(k, vec_);
    const void* fn = vec_ > 1 ? reinterpret_cast<const void*>(&stream_sums_kernel<T, 16 / sizeof(T)>)
                              : reinterpret_cast<const void*>(&stream_sums_kernel<T, 1>);
    SKINNY_CUDA_TRY(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int per_sm = 0;
    SKINNY_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kThreads, smem));
    const std::int64_t slices = (d / vec_ + kThreads - 1) / kThreads;
    ranges_ = std::max<std::int64_t>(1, std::min<std::int64_t>(n, std::max(1, per_sm) * sms_ / slices));
    const double partial_fraction = double(ranges_) * k * sizeof(double) / (double(n) * sizeof(T));
    streaming_ = sums == Sums::streamed || partial_fraction <= kMaxPartialFraction;
  }
  if (streaming_) {
    piece_sums_ = device_array<double>(ranges_ * k * d);
    return;
  }
  keys_ = device_array<std::int32_t>(n);
  keys_out_ = device_array<std::int32_t>(n);
  perm_ = device_array<std::int32_t>(n);
  perm_in_ = device_array<std::int32_t>(n);
  SKINNY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, sort_temp_bytes_, keys_.data(), keys_out_.data(),
                                                  perm_in_.data(), perm_.data(), static_cast<int>(n), 0, bits_for(k)));
  sort_temp_ = device_array<unsigned char>(static_cast<std::int64_t>(sort_temp_bytes_));
  const std::int64_t piece_capacity = n / kPiece + k + 1;
  piece_sums_ = device_array<double>(piece_capacity * d);
  pieces_ = device_array<std::int64_t>(3 * piece_capacity);
  piece_begin_ = device_array<std::int64_t>(k + 1);
}

template <class T>
void Updater<T>::stream_sums(const T* x, const std::int32_t* labels, cudaStream_t stream) {
  const std::int64_t rows_per_range = (n_ + ranges_ - 1) / ranges_;
  const std::int64_t ranges = (n_ + rows_per_range - 1) / rows_per_range;
  const dim3 grid(static_cast<unsigned>(ranges), static_cast<unsigned>((d_ / vec_ + kThreads - 1) / kThreads));
  const std::size_t smem = stream_smem(k_, vec_);
  if (vec_ > 1)
    stream_sums_kernel<T, 16 / sizeof(T)><<<grid, kThreads, smem, stream>>>(x, n_, d_, labels, k_, rows_per_range,
                                                                             piece_sums_.data());
  else
    stream_sums_kernel<T, 1><<<grid, kThreads, smem, stream>>>(x, n_, d_, labels, k_, rows_per_range,
                                                               piece_sums_.data());
  SKINNY_CHECK_LAUNCH();
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((k_ * d_ + 255) / 256, 4LL * sms_));
  add_ranges_kernel<<<blocks, 256, 0, stream>>>(piece_sums_.data(), ranges, k_, d_, cluster_sums_.data());
  SKINNY_CHECK_LAUNCH();
}

template <class T>
void Updater<T>::sorted_sums(const T* x, const std::int32_t* labels, const std::vector<int>& counts,
                             cudaStream_t stream) {
  // Points sorted by label; the radix sort is stable, so each cluster's points stay in index order.
  SKINNY_CUDA_TRY(cudaMemcpyAsync(keys_.data(), labels, static_cast<std::size_t>(n_) * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToDevice, stream));
  thrust::sequence(thrust::cuda::par_nosync.on(stream), perm_in_.data(), perm_in_.data() + n_);
  SKINNY_CUDA_TRY(cub::DeviceRadixSort::SortPairs(sort_temp_.data(), sort_temp_bytes_, keys_.data(), keys_out_.data(), perm_in_.data(), perm_.data(),
                                                  static_cast<int>(n_), 0, bits_for(k_), stream));

  std::vector<std::int64_t> pieces, begin(static_cast<std::size_t>(k_ + 1), 0);
  std::int64_t offset = 0;
  for (std::int64_t c = 0; c < k_; ++c) {
    begin[static_cast<std::size_t>(c)] = static_cast<std::int64_t>(pieces.size() / 3);
    for (std::int64_t s = 0; s < counts[static_cast<std::size_t>(c)]; s += kPiece)
      pieces.insert(pieces.end(), {offset + s, std::min<std::int64_t>(kPiece, counts[static_cast<std::size_t>(c)] - s), c});
    offset += counts[static_cast<std::size_t>(c)];
  }
  const auto npieces = static_cast<std::int64_t>(pieces.size() / 3);
  begin[static_cast<std::size_t>(k_)] = npieces;
  SKINNY_CUDA_TRY(cudaMemcpyAsync(pieces_.data(), pieces.data(), pieces.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice, stream));
  SKINNY_CUDA_TRY(cudaMemcpyAsync(piece_begin_.data(), begin.data(), begin.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice, stream));

  if (npieces > 0) {
    const std::int64_t cols = (d_ / vec_ + kThreads - 1) / kThreads;
    const dim3 grid(static_cast<unsigned>(npieces), static_cast<unsigned>(cols));
    if (vec_ == 16 / static_cast<int>(sizeof(T)))
      piece_sums_kernel<T, 16 / sizeof(T)><<<grid, kThreads, 0, stream>>>(x, d_, perm_.data(), pieces_.data(), piece_sums_.data());
    else
      piece_sums_kernel<T, 1><<<grid, kThreads, 0, stream>>>(x, d_, perm_.data(), pieces_.data(), piece_sums_.data());
    SKINNY_CHECK_LAUNCH();
  }
  const dim3 grid_kd(static_cast<unsigned>((d_ + 255) / 256), static_cast<unsigned>(k_));
  cluster_sums_kernel<<<grid_kd, 256, 0, stream>>>(piece_sums_.data(), piece_begin_.data(), d_, cluster_sums_.data());
  SKINNY_CHECK_LAUNCH();
}

template <class T>
double Updater<T>::update(const T* x, std::int32_t* labels, const T* mindist, const int* counts_dev, const T* old_c,
                          T* new_c, cudaStream_t stream) {
  // The counts come back while the sums are formed. Streamed, the means are queued at once on the
  // assumption that no cluster is empty, so one wait covers all; sorted, the counts decide the pieces.
  counts_host_.copy_from_device_async(counts_dev, stream);
  if (streaming_) {
    stream_sums(x, labels, stream);
    means_and_shift(counts_dev, old_c, new_c, stream);
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
    if (std::find(counts_host_.data(), counts_host_.data() + k_, 0) == counts_host_.data() + k_) return shift_.value();
  } else {
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  }
  std::vector<int> counts(counts_host_.data(), counts_host_.data() + k_);
  if (!streaming_) sorted_sums(x, labels, counts, stream);

  // Empty clusters take the points farthest from their centroids (largest distance first, ties to the
  // lower index), as scikit-learn's _relocate_empty_clusters does.
  std::vector<std::int64_t> empty;
  for (std::int64_t c = 0; c < k_; ++c)
    if (counts[static_cast<std::size_t>(c)] == 0) empty.push_back(c);
  if (!empty.empty()) {
    std::vector<T> dist(static_cast<std::size_t>(n_));
    std::vector<std::int32_t> lab(static_cast<std::size_t>(n_));
    SKINNY_CUDA_TRY(cudaMemcpyAsync(dist.data(), mindist, dist.size() * sizeof(T), cudaMemcpyDeviceToHost, stream));
    SKINNY_CUDA_TRY(cudaMemcpyAsync(lab.data(), labels, lab.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
    std::vector<std::int64_t> order(static_cast<std::size_t>(n_));
    std::iota(order.begin(), order.end(), 0);
    const auto m = static_cast<std::ptrdiff_t>(std::min<std::size_t>(empty.size(), order.size()));
    std::partial_sort(order.begin(), order.begin() + m, order.end(), [&](std::int64_t a, std::int64_t b) {
      const T da = dist[static_cast<std::size_t>(a)], db = dist[static_cast<std::size_t>(b)];
      return da > db || (da == db && a < b);
    });
    for (std::ptrdiff_t e = 0; e < m; ++e) {
      const std::int64_t point = order[static_cast<std::size_t>(e)], to = empty[static_cast<std::size_t>(e)];
      const std::int32_t from = lab[static_cast<std::size_t>(point)];
      move_point_kernel<T><<<1, 256, 0, stream>>>(x, d_, point, from, to, cluster_sums_.data());
      SKINNY_CHECK_LAUNCH();
      --counts[static_cast<std::size_t>(from)];
      counts[static_cast<std::size_t>(to)] = 1;
      const std::int32_t label = static_cast<std::int32_t>(to);
      SKINNY_CUDA_TRY(cudaMemcpyAsync(labels + point, &label, sizeof label, cudaMemcpyHostToDevice, stream));
      SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));  // `label` lives on this stack frame
    }
  }
  SKINNY_CUDA_TRY(cudaMemcpyAsync(counts_.data(), counts.data(), counts.size() * sizeof(int), cudaMemcpyHostToDevice, stream));
  means_and_shift(counts_.data(), old_c, new_c, stream);
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  return shift_.value();
}

template <class T>
void Updater<T>::means_and_shift(const int* counts, const T* old_c, T* new_c, cudaStream_t stream) {
  const dim3 grid_kd(static_cast<unsigned>((d_ + 255) / 256), static_cast<unsigned>(k_));
  means_kernel<T><<<grid_kd, 256, 0, stream>>>(cluster_sums_.data(), counts, old_c, d_, new_c, shift_parts_.data());
  SKINNY_CHECK_LAUNCH();
  // A reduction of our own: thrust's allocates (and frees) scratch memory on every call.
  shift_.queue(shift_parts_.data(), k_ * d_, stream);
}

template class Updater<float>;
template class Updater<double>;

}  // namespace skinny::kmeans::detail
