// Asynchronous copies from global to shared memory (cp.async, compute capability >= 8.0): the bytes in
// flight cost no registers, so a block can keep several tiles of a streamed matrix on the way while it
// works on one. Used by the TSM2 kernels and the fused nearest-centre kernel.
#pragma once

#include <cuda_runtime.h>

namespace skinny {

/// Queues a copy of BYTES (4, 8 or 16) from global to shared memory; the bytes past src_bytes are
/// zero-filled (src_bytes == 0 reads nothing, but src must still be a valid address).
template <int BYTES>
__device__ __forceinline__ void cp_async(void* dst, const void* src, int src_bytes) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  if constexpr (BYTES == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(src_bytes) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(src), "n"(BYTES), "r"(src_bytes)
                 : "memory");
}

/// Closes the group of copies queued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace skinny
