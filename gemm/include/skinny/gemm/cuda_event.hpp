// CudaEvent: RAII ownership of a CUDA event, for timing work on a stream or ordering two streams.
#pragma once

#include <skinny/gemm/errors.hpp>

#include <cuda_runtime.h>

namespace skinny {

class CudaEvent {
 public:
  CudaEvent() { SKINNY_CUDA_TRY(cudaEventCreate(&event_)); }
  /// With cudaEventCreateWithFlags' flags: cudaEventDisableTiming for an event that only orders streams.
  explicit CudaEvent(unsigned int flags) { SKINNY_CUDA_TRY(cudaEventCreateWithFlags(&event_, flags)); }
  ~CudaEvent() { cudaEventDestroy(event_); }  // never throw from a destructor
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  void record(cudaStream_t stream) { SKINNY_CUDA_TRY(cudaEventRecord(event_, stream)); }
  /// The event, for cudaStreamWaitEvent and cudaEventSynchronize (ordering work across streams).
  cudaEvent_t get() const noexcept { return event_; }
  /// Milliseconds from `start` to this event, once this event has completed (waits for it).
  float ms_since(const CudaEvent& start) const {
    SKINNY_CUDA_TRY(cudaEventSynchronize(event_));
    float ms = 0;
    SKINNY_CUDA_TRY(cudaEventElapsedTime(&ms, start.event_, event_));
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace skinny
