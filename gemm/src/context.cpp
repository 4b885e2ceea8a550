#include <skinny/gemm/context.hpp>
#include <skinny/gemm/errors.hpp>

#include <string>

namespace skinny {

namespace detail {
void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  throw CudaError(code, std::string("CUDA error ") + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) +
                            ") in " + call + " at " + file + ":" + std::to_string(line));
}
void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw CublasError(status, std::string("cuBLAS error ") + cublasGetStatusName(status) + " (" +
                                cublasGetStatusString(status) + ") in " + call + " at " + file + ":" +
                                std::to_string(line));
}
}  // namespace detail

Context::Context(cudaStream_t stream) : stream_(stream) {
  SKINNY_CUDA_TRY(cudaGetDevice(&device_));
  SKINNY_CUDA_TRY(cudaGetDeviceProperties(&props_, device_));
}

Context::~Context() {
  if (cublas_) cublasDestroy(cublas_);
  if (workspace_) cudaFree(workspace_);
}

void* Context::workspace(std::size_t bytes) {
  if (bytes > workspace_bytes_) {
    if (workspace_) {
      SKINNY_CUDA_TRY(cudaStreamSynchronize(stream_));  // work queued earlier may still use it
      SKINNY_CUDA_TRY(cudaFree(workspace_));
      workspace_ = nullptr;
      workspace_bytes_ = 0;
    }
    SKINNY_CUDA_TRY(cudaMalloc(&workspace_, bytes));
    workspace_bytes_ = bytes;
  }
  return workspace_;
}

cublasHandle_t Context::cublas() {
  if (!cublas_) {
    SKINNY_CUBLAS_TRY(cublasCreate(&cublas_));
    SKINNY_CUBLAS_TRY(cublasSetStream(cublas_, stream_));
  }
  return cublas_;
}

void Context::synchronize() const { SKINNY_CUDA_TRY(cudaStreamSynchronize(stream_)); }

int cuda_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error so later calls report their own
    return 0;
  }
  return count;
}

}  // namespace skinny
