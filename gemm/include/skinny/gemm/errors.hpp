// Exceptions and the checking macros every layer of skinny uses.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace skinny {

/// A CUDA runtime call failed; what() holds the call, the error name and file:line.
class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

/// A cuBLAS call failed; what() holds the call, the status name and file:line.
class CublasError : public std::runtime_error {
 public:
  CublasError(cublasStatus_t status, const std::string& what) : std::runtime_error(what), status_(status) {}
  cublasStatus_t status() const noexcept { return status_; }

 private:
  cublasStatus_t status_;
};

namespace detail {
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);
}  // namespace detail

}  // namespace skinny

/// Throws skinny::CudaError when a CUDA runtime call does not return cudaSuccess.
#define SKINNY_CUDA_TRY(call)                                                 \
  do {                                                                        \
    const cudaError_t skinny_status_ = (call);                                \
    if (skinny_status_ != cudaSuccess)                                        \
      ::skinny::detail::throw_cuda_error(skinny_status_, #call, __FILE__, __LINE__); \
  } while (0)

/// Throws skinny::CublasError when a cuBLAS call does not return CUBLAS_STATUS_SUCCESS.
#define SKINNY_CUBLAS_TRY(call)                                                 \
  do {                                                                          \
    const cublasStatus_t skinny_status_ = (call);                               \
    if (skinny_status_ != CUBLAS_STATUS_SUCCESS)                                \
      ::skinny::detail::throw_cublas_error(skinny_status_, #call, __FILE__, __LINE__); \
  } while (0)

/// Checks the launch that was just made (bad configuration, missing kernel image).
#define SKINNY_CHECK_LAUNCH() SKINNY_CUDA_TRY(cudaGetLastError())
