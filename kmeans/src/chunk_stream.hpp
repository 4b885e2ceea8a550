// ChunkStream: the rows of host arrays through the GPU, chunk by chunk, double-buffered. Chunk i's
// copy (a copy stream) overlaps the work on chunk i - 1 (the compute stream); pageable host memory
// goes through two page-locked staging buffers, filled by host threads while the previous chunk is
// copied; page-locked memory is copied as it is. Events order the two streams:
//
//   host:    fill staging[i % 2] (after chunk i - 2's copy out of it)
//   copy:    wait for the work on chunk i - 2 -> H2D into device[i % 2] -> record copied[i % 2]
//   compute: wait copied[i % 2] -> process(chunk i) -> record processed[i % 2]
#pragma once

#include "host_copy.hpp"

#include <skinny/gemm/cuda_event.hpp>
#include <skinny/gemm/cuda_stream.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/pinned_buffer.hpp>

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace skinny::kmeans::detail {

/// Whether p points into page-locked host memory (cudaMallocHost, cudaHostRegister): a DMA reads it
/// directly. Pageable and memory-mapped memory are not.
bool page_locked(const void* p);

class ChunkStream {
 public:
  /// A chunk as process() sees it: its rows, and each array's rows on the device (null for an array
  /// not streamed in this pass).
  struct Chunk {
    std::int64_t index = 0, row0 = 0, rows = 0;
    std::vector<const void*> device;
  };

  /// n rows in chunks of chunk_rows; array a has row_bytes[a] bytes per row. Work is queued on
  /// `compute`; the copies go on a stream of their own (non-blocking, so they also overlap work on the
  /// legacy default stream). `host_threads` fill the staging buffers.
  ChunkStream(std::int64_t n, std::int64_t chunk_rows, std::vector<std::size_t> row_bytes, cudaStream_t compute,
              int host_threads);
  ~ChunkStream();
  ChunkStream(const ChunkStream&) = delete;
  ChunkStream& operator=(const ChunkStream&) = delete;

  std::int64_t chunks() const noexcept { return chunks_; }
  std::int64_t chunk_rows() const noexcept { return chunk_rows_; }
  int host_threads() const noexcept { return copier_.threads(); }

  /// One pass over the rows (the first `max_chunks` chunks when >= 0): hosts[a] is array a in host
  /// memory (null: not streamed this pass); process(chunk) queues its work on the compute stream and
  /// must not wait for it. Returns once everything is queued (the last copies may still run).
  void pass(const std::vector<const void*>& hosts, const std::function<void(const Chunk&)>& process,
            std::int64_t max_chunks = -1);

  /// Bytes copied host-to-device by the last pass, and the milliseconds the copy stream spent copying
  /// them (events around each chunk's copies; waits for them).
  std::uint64_t last_bytes() const noexcept { return last_bytes_; }
  double last_copy_ms() const;

 private:
  void stage(std::int64_t i, const std::vector<const void*>& hosts, const std::vector<bool>& staged);

  std::int64_t n_, chunk_rows_, chunks_;
  std::vector<std::size_t> row_bytes_;
  cudaStream_t compute_;
  CudaStream copy_;
  std::vector<std::array<DeviceBuffer<unsigned char>, 2>> device_;
  std::vector<std::array<PinnedBuffer<unsigned char>, 2>> staging_;  ///< allocated when first needed
  std::array<CudaEvent, 2> copied_, processed_;
  std::vector<std::unique_ptr<CudaEvent>> copy_start_, copy_end_;  ///< per chunk
  std::int64_t last_chunks_ = 0;
  std::uint64_t last_bytes_ = 0;
  HostCopier copier_;
};

}  // namespace skinny::kmeans::detail
