// CudaStream: RAII ownership of a CUDA stream, for programs and tests that launch on their own stream.
#pragma once

#include <skinny/gemm/errors.hpp>

#include <cuda_runtime.h>

namespace skinny {

class CudaStream {
 public:
  CudaStream() { SKINNY_CUDA_TRY(cudaStreamCreate(&stream_)); }
  /// With cudaStreamCreateWithFlags' flags: cudaStreamNonBlocking for a stream that must overlap work
  /// queued on the legacy default stream (which otherwise waits for, and is waited for by, this one).
  explicit CudaStream(unsigned int flags) { SKINNY_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, flags)); }
  ~CudaStream() { cudaStreamDestroy(stream_); }  // never throw from a destructor
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const noexcept { return stream_; }
  operator cudaStream_t() const noexcept { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace skinny
