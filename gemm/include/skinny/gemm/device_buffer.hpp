// DeviceBuffer<T>: RAII ownership of a device allocation, with host copies in and out.
#pragma once

#include <skinny/gemm/errors.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

namespace skinny {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count_ > 0) SKINNY_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { copy_from(host); }
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);  // never throw from a destructor
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      if (data_) cudaFree(data_);
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

  /// Synchronous copy of host.size() elements (at most size()) to the start of the buffer.
  void copy_from(const std::vector<T>& host) {
    if (host.size() > count_) throw std::invalid_argument("DeviceBuffer::copy_from: host vector larger than buffer");
    SKINNY_CUDA_TRY(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  /// Synchronous copy of the whole buffer to a new host vector.
  std::vector<T> to_host() const {
    std::vector<T> host(count_);
    SKINNY_CUDA_TRY(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace skinny
