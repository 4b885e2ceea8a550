// A kernel launched so that it may start before the work ahead of it on the stream has finished
// (programmatic dependent launch, compute capability >= 9.0): its launch latency overlaps that work's
// tail. The kernel must call wait_for_previous_grid() before it reads anything that work wrote.
// Where the launch attribute is not supported, an ordinary launch.
#pragma once

#include <skinny/gemm/errors.hpp>

#include <cuda_runtime.h>

namespace skinny {

inline void launch_after_previous(const void* kernel, dim3 grid, dim3 block, void** args, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cudaLaunchKernelExC(&cfg, kernel, args) != cudaSuccess) {
    (void)cudaGetLastError();  // no programmatic dependent launch here
    SKINNY_CUDA_TRY(cudaLaunchKernel(kernel, grid, block, args, 0, stream));
  }
}

#ifdef __CUDACC__
/// In a kernel started by launch_after_previous: waits until the grids ahead of it have completed and
/// their writes are visible.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
#endif

}  // namespace skinny
