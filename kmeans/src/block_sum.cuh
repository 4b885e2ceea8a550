// The sum of one value per thread over a block, in a fixed tree: each step adds the upper half of the
// partial sums to the lower half, so the result has the same bits on every run (the deterministic sums of
// the inertia, the shift, the norms and the protection's checks).
#pragma once

namespace skinny::kmeans::detail {

/// The block's sum of every thread's `v` (kThreads threads, all of which call it), returned to every
/// thread. `part`: kThreads values of shared memory, which may be reused after the call.
template <int kThreads, class V>
__device__ V block_tree_sum(V v, V* part) {
  static_assert((kThreads & (kThreads - 1)) == 0, "a power of two threads");
  __syncthreads();  // the last readers of part are done
  part[threadIdx.x] = v;
  for (int half = kThreads / 2; half > 0; half /= 2) {
    __syncthreads();
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
  }
  __syncthreads();
  return part[0];
}

}  // namespace skinny::kmeans::detail
