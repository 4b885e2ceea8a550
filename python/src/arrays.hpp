// Arrays across the boundary. Host (NumPy) arrays are copied to the device; CUDA arrays (DLPack: CuPy,
// PyTorch) are used in place. The Python layer (python/skinny/_arrays.py) has already checked the
// shape, the dtype (float32 or float64) and the layout (C order), so these helpers only dispatch.
#pragma once

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <vector>

namespace skinny::python {

namespace nb = nanobind;

/// A 2-D C-contiguous array of any dtype, on the host or a CUDA device.
using Matrix = nb::ndarray<nb::ndim<2>, nb::c_contig>;
/// The same, read-only: for inputs that are never written, so that read-only NumPy arrays are accepted.
using ConstMatrix = nb::ndarray<nb::ro, nb::ndim<2>, nb::c_contig>;

template <class Array>
bool on_cuda(const Array& a) {
  return a.device_type() == nb::device::cuda::value;
}

/// The DLPack dtype of T (nanobind names none for the CUDA 16-bit types).
template <class T>
nb::dlpack::dtype dtype_of() {
  return nb::dtype<T>();
}
template <>
inline nb::dlpack::dtype dtype_of<__half>() {
  return {static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
}
template <>
inline nb::dlpack::dtype dtype_of<__nv_bfloat16>() {
  return {static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
}

template <class T, class Array>
bool holds(const Array& a) {
  return a.dtype() == dtype_of<T>();
}

/// Makes a CUDA array's device the current one for this scope (host arrays: leaves the current one),
/// so that a CuPy array on device 1 is worked on by device 1.
class DeviceScope {
 public:
  template <class Array>
  explicit DeviceScope(const Array& a) : DeviceScope(on_cuda(a) ? int(a.device_id()) : -1) {}
  /// Makes `device` the current one for this scope (-1: leaves the current one).
  explicit DeviceScope(int device) {
    SKINNY_CUDA_TRY(cudaGetDevice(&previous_));
    if (device >= 0 && device != previous_) SKINNY_CUDA_TRY(cudaSetDevice(device));
  }
  ~DeviceScope() { cudaSetDevice(previous_); }  // never throw from a destructor
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

/// The rows x cols matrix on the device: the CUDA array itself (no copy), or a copy of a host array
/// (timed: users of NumPy input pay for it, so fit reports it).
template <class T>
class DeviceMatrix {
 public:
  template <class Array>
  explicit DeviceMatrix(const Array& a)
      : rows(static_cast<std::int64_t>(a.shape(0))), cols(static_cast<std::int64_t>(a.shape(1))) {
    if (!holds<T>(a)) throw std::invalid_argument("internal: array dtype does not match the dispatch");
    if (on_cuda(a)) {
      data_ = static_cast<const T*>(a.data());
    } else {
      copy_ = DeviceBuffer<T>(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
      const auto start = std::chrono::steady_clock::now();
      // Synchronous from pageable memory: the wall time is the time the user waits for the copy.
      SKINNY_CUDA_TRY(cudaMemcpy(copy_.data(), a.data(), copy_.bytes(), cudaMemcpyHostToDevice));
      copy_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      data_ = copy_.data();
    }
  }
  const T* data() const noexcept { return data_; }
  /// Bytes copied from the host (0 for a CUDA array) and the copy's wall time in milliseconds.
  std::size_t copied_bytes() const noexcept { return copy_.bytes(); }
  double copy_ms() const noexcept { return copy_ms_; }
  const std::int64_t rows, cols;

 private:
  DeviceBuffer<T> copy_;
  const T* data_ = nullptr;
  double copy_ms_ = 0;
};

/// A rows x cols matrix the device writes: the CUDA array itself, or for a host array a device copy (with
/// the host values when `copy_in`) that copy_back() or copy_back_element() writes back to the host.
template <class T>
class DeviceTarget {
 public:
  DeviceTarget(const Matrix& a, bool copy_in)
      : rows(static_cast<std::int64_t>(a.shape(0))), cols(static_cast<std::int64_t>(a.shape(1))) {
    if (!holds<T>(a)) throw std::invalid_argument("internal: array dtype does not match the dispatch");
    if (on_cuda(a)) {
      data_ = static_cast<T*>(a.data());
      return;
    }
    host_ = static_cast<T*>(a.data());
    copy_ = DeviceBuffer<T>(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
    if (copy_in) SKINNY_CUDA_TRY(cudaMemcpy(copy_.data(), host_, copy_.bytes(), cudaMemcpyHostToDevice));
    data_ = copy_.data();
  }
  T* data() noexcept { return data_; }
  /// All of it to the host array (nothing for a CUDA array). Call after the work on it has finished.
  void copy_back() {
    if (host_) SKINNY_CUDA_TRY(cudaMemcpy(host_, data_, copy_.bytes(), cudaMemcpyDeviceToHost));
  }
  /// The element at `offset` (row-major) to the host array (nothing for a CUDA array).
  void copy_back_element(std::int64_t offset) {
    if (host_) SKINNY_CUDA_TRY(cudaMemcpy(host_ + offset, data_ + offset, sizeof(T), cudaMemcpyDeviceToHost));
  }
  const std::int64_t rows, cols;

 private:
  DeviceBuffer<T> copy_;
  T* host_ = nullptr;
  T* data_ = nullptr;
};

/// The values of a host array (centroids), row-major.
template <class T>
std::vector<T> host_values(const Matrix& a) {
  if (on_cuda(a) || !holds<T>(a)) throw std::invalid_argument("internal: expected a host array of the data's dtype");
  const T* p = static_cast<const T*>(a.data());
  return std::vector<T>(p, p + a.size());
}

/// A NumPy array that owns `values` (no copy).
template <class T>
nb::object to_numpy(std::vector<T> values, std::initializer_list<std::size_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.begin(), owner));
}

}  // namespace skinny::python
