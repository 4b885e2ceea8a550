// PinnedBuffer<T>: RAII ownership of page-locked host memory, the target of asynchronous copies from the
// device (a copy into pageable memory waits for the stream, which leaves the GPU idle while the host
// then queues the next work).
#pragma once

#include <skinny/gemm/errors.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace skinny {

template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t count) : count_(count) {
    if (count_ > 0) SKINNY_CUDA_TRY(cudaMallocHost(reinterpret_cast<void**>(&data_), count_ * sizeof(T)));
  }
  ~PinnedBuffer() {
    if (data_) cudaFreeHost(data_);  // never throw from a destructor
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
      if (data_) cudaFreeHost(data_);
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  std::size_t size() const noexcept { return count_; }

  /// Queues the copy of size() elements from device memory `src` on `stream`; read them after the
  /// stream has been synchronised.
  void copy_from_device_async(const T* src, cudaStream_t stream) {
    SKINNY_CUDA_TRY(cudaMemcpyAsync(data_, src, count_ * sizeof(T), cudaMemcpyDeviceToHost, stream));
  }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace skinny
