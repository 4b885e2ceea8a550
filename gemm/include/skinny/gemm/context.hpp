// Context: the stream work is launched on, the cuBLAS handle bound to it, and the device's properties.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <skinny/gemm/tsm2_tuning.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace skinny {

/// Owns a cuBLAS handle (created on first use) bound to `stream`; does not own the stream.
/// One Context per host thread: cuBLAS handles are not meant to be shared across threads.
class Context {
 public:
  /// Binds to the current device and `stream` (the legacy default stream when null).
  explicit Context(cudaStream_t stream = nullptr);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  cudaStream_t stream() const noexcept { return stream_; }
  int device() const noexcept { return device_; }
  const cudaDeviceProp& properties() const noexcept { return props_; }
  /// The cuBLAS handle, created on first call, with its stream set to stream().
  cublasHandle_t cublas();
  /// Device scratch memory of at least `bytes`, owned by this Context (split-K partial sums, tuning
  /// trials). Valid until a later call asks for more: growing first waits for the stream.
  void* workspace(std::size_t bytes);
  /// Waits for all work queued on stream().
  void synchronize() const;
  /// How TSM2 plans the shapes launched through this Context (defaults: the library's own choice).
  const gemm::Tsm2Tuning& tsm2_tuning() const noexcept { return tsm2_tuning_; }
  void set_tsm2_tuning(const gemm::Tsm2Tuning& tuning) {
    tsm2_tuning_ = tuning;
    tsm2_tuning_key_ = tuning.key();
  }
  /// tsm2_tuning().key(), kept so that a launch, which looks its plan up by it, does not rebuild it.
  const std::string& tsm2_tuning_key() const noexcept { return tsm2_tuning_key_; }

  /// What gemm::nearest's exact mode saw on the last shape it ran through this Context: the shares of points
  /// its certificate left that were run again with three products and that were settled by their
  /// candidates (a collecting pass, on Hopper), what that cost (cost_share, in points run with three
  /// products: the first share, plus the second weighted by the candidates' cost per point, about
  /// (1 + 2600 / k) / 3 for 16-bit points; it may exceed 1), and the calls since it last tried.
  /// ExactMethod::automatic goes back to three products while that cost is too large for the re-check to
  /// pay (data in tight clusters far apart, with centres split among them), and tries again every 4 calls.
  struct NearestRecheck {
    std::int64_t n = 0, d = 0, k = 0;
    int x_type = -1;
    double rechecked_share = 0, candidates_share = 0, cost_share = 0;
    int calls_since_tried = 0;
  };
  NearestRecheck& nearest_recheck() noexcept { return nearest_recheck_; }

 private:
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  cudaDeviceProp props_{};
  cublasHandle_t cublas_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  gemm::Tsm2Tuning tsm2_tuning_;
  std::string tsm2_tuning_key_ = gemm::Tsm2Tuning{}.key();
  NearestRecheck nearest_recheck_;
};

/// Number of CUDA devices visible, 0 when there is no driver or no device (never throws).
int cuda_device_count() noexcept;

}  // namespace skinny
