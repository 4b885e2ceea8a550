// The sum of a row group's splits inside the main kernel, through distributed shared memory (compute
// capability >= 9.0), in place of the reduction kernel (tsm2_reduce_kernel, tsm2.cu).
//
// The blocks of one row group's splits (grid y) run as one thread-block cluster of (1, split, 1).
// Each block leaves its partial sums in its own shared memory; after a cluster barrier every block
// adds one slice of the tile over all the cluster's blocks, split 0 first, and stores it to C with
// alpha and beta. No partial sums go to global memory and no second kernel waits for the first: at
// n = 10240 that kernel took 4-5 us of a 0.15 ms product (ncu, bench/results/h100/2026-11-24_launch-bounds).
// The additions are those of the reduction kernel in the same order, so both give the same bits.
// Used by the column-major kernels (tsm2.cu, cm_mma_kernel.cuh); included by tsm2_device.cuh's users.
#pragma once

#include "tsm2_device.cuh"

#include <cooperative_groups.h>

#include <cstdint>

namespace skinny::gemm::detail::tsm2_device {

/// A block's partial sums in its shared memory, column by column (C's columns are its short side):
/// C(i, j) at data[(j - j0) * rows + (i - row0)].
template <class T>
struct SplitTile {
  T* data = nullptr;  ///< nullptr: the splits are not summed in the cluster
  std::int64_t row0 = 0, j0 = 0;
  int rows = 0, cols = 0;  ///< rows per block, columns per pass
};

/// The tile of this block when its kernel sums the splits in the cluster, else an empty one. The tile
/// reuses `smem`, the block's shared memory: the caller's copies into it have all landed
/// (run_stages ends with cp_async_wait<0>) and the barrier here waits until no thread reads it any more.
/// The caller guarantees rows * cols elements of T fit.
template <class T>
__device__ __forceinline__ SplitTile<T> split_tile(const Args<T>& g, void* smem, std::int64_t row0,
                                                   std::int64_t j0, int rows, int cols) {
  if (!g.cluster_sum || g.split == 1) return {};
  __syncthreads();
  return {static_cast<T*>(smem), row0, j0, rows, cols};
}

/// store_result (tsm2_device.cuh), or into the block's tile when there is one.
template <class T>
__device__ __forceinline__ void store_result(const Args<T>& g, int split, std::int64_t i, std::int64_t j, T v,
                                             const SplitTile<T>& tile) {
  if (tile.data)
    tile.data[(j - tile.j0) * tile.rows + (i - tile.row0)] = v;
  else
    store_result(g, split, i, j, v);
}

/// With a tile: waits for the cluster's tiles, adds this block's slice of them in split order, stores
/// it to C, and waits again so that no block leaves while another reads its shared memory. Every
/// thread of the block calls it, after its last store_result.
template <class T>
__device__ __forceinline__ void sum_splits_in_cluster(const Args<T>& g, const SplitTile<T>& tile) {
  if (!tile.data) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  // The cluster is (1, split, 1) and spans grid y: block rank q is split q.
  const int n = tile.rows * tile.cols;
  const int per_block = (n + g.split - 1) / g.split;
  const int begin = static_cast<int>(cluster.block_rank()) * per_block;
  const int end = min(n, begin + per_block);
  for (int e = begin + static_cast<int>(threadIdx.x); e < end; e += static_cast<int>(blockDim.x)) {
    const int jj = e / tile.rows;
    const std::int64_t i = tile.row0 + (e - jj * tile.rows), j = tile.j0 + jj;
    if (i >= g.rows || j >= g.cols) continue;  // never written
    T s = *cluster.map_shared_rank(tile.data + e, 0);
    for (int q = 1; q < g.split; ++q) s += *cluster.map_shared_rank(tile.data + e, q);
    store_c(g, i, j, s);
  }
  cluster.sync();
#else
  __trap();  // the host launches clusters only for kernels compiled for compute capability >= 9.0
#endif
}

}  // namespace skinny::gemm::detail::tsm2_device
