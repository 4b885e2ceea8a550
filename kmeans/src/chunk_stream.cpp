#include "chunk_stream.hpp"

#include <skinny/gemm/errors.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace skinny::kmeans::detail {

bool page_locked(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // older runtimes fail on pageable memory: not page-locked, and no error to keep
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

ChunkStream::ChunkStream(std::int64_t n, std::int64_t chunk_rows, std::vector<std::size_t> row_bytes,
                         cudaStream_t compute, int host_threads)
    : n_(n), chunk_rows_(chunk_rows), chunks_(chunk_rows > 0 ? (n + chunk_rows - 1) / chunk_rows : 0),
      row_bytes_(std::move(row_bytes)), compute_(compute), copy_(cudaStreamNonBlocking),
      device_(row_bytes_.size()), staging_(row_bytes_.size()), copier_(host_threads) {
  if (n < 1 || chunk_rows < 1)
    throw std::invalid_argument("ChunkStream: need n >= 1 and chunk_rows >= 1 (got n = " + std::to_string(n) +
                                ", chunk_rows = " + std::to_string(chunk_rows) + ")");
  for (std::size_t a = 0; a < row_bytes_.size(); ++a)
    for (auto& buf : device_[a]) buf = DeviceBuffer<unsigned char>(static_cast<std::size_t>(chunk_rows_) * row_bytes_[a]);
  for (std::int64_t i = 0; i < chunks_; ++i) {
    copy_start_.push_back(std::make_unique<CudaEvent>());
    copy_end_.push_back(std::make_unique<CudaEvent>());
  }
}

ChunkStream::~ChunkStream() {
  cudaStreamSynchronize(copy_);  // no copy may still read the staging buffers freed next; never throw here
}

void ChunkStream::stage(std::int64_t i, const std::vector<const void*>& hosts, const std::vector<bool>& staged) {
  const int s = static_cast<int>(i % 2);
  const std::int64_t r0 = i * chunk_rows_, rows = std::min(chunk_rows_, n_ - r0);
  if (std::find(staged.begin(), staged.end(), true) != staged.end()) {
    // staging[s] is free once chunk i - 2's copy out of it is done (at once for a fresh event).
    SKINNY_CUDA_TRY(cudaEventSynchronize(copied_[static_cast<std::size_t>(s)].get()));
    for (std::size_t a = 0; a < hosts.size(); ++a)
      if (staged[a])
        copier_.copy(staging_[a][static_cast<std::size_t>(s)].data(),
                     static_cast<const unsigned char*>(hosts[a]) + static_cast<std::size_t>(r0) * row_bytes_[a],
                     static_cast<std::size_t>(rows) * row_bytes_[a]);
  }
  // device[s] is free once the work on chunk i - 2 is done.
  SKINNY_CUDA_TRY(cudaStreamWaitEvent(copy_, processed_[static_cast<std::size_t>(s)].get(), 0));
  copy_start_[static_cast<std::size_t>(i)]->record(copy_);
  for (std::size_t a = 0; a < hosts.size(); ++a) {
    if (!hosts[a]) continue;
    const std::size_t bytes = static_cast<std::size_t>(rows) * row_bytes_[a];
    const void* src = staged[a] ? static_cast<const void*>(staging_[a][static_cast<std::size_t>(s)].data())
                                : static_cast<const unsigned char*>(hosts[a]) + static_cast<std::size_t>(r0) * row_bytes_[a];
    SKINNY_CUDA_TRY(cudaMemcpyAsync(device_[a][static_cast<std::size_t>(s)].data(), src, bytes,
                                    cudaMemcpyHostToDevice, copy_));
    last_bytes_ += bytes;
  }
  copy_end_[static_cast<std::size_t>(i)]->record(copy_);
  copied_[static_cast<std::size_t>(s)].record(copy_);
}

void ChunkStream::pass(const std::vector<const void*>& hosts, const std::function<void(const Chunk&)>& process,
                       std::int64_t max_chunks) {
  if (hosts.size() != row_bytes_.size())
    throw std::invalid_argument("ChunkStream::pass: " + std::to_string(hosts.size()) + " host arrays for " +
                                std::to_string(row_bytes_.size()) + " streamed ones");
  std::vector<bool> staged(hosts.size());
  for (std::size_t a = 0; a < hosts.size(); ++a) {
    staged[a] = hosts[a] != nullptr && !page_locked(hosts[a]);
    if (staged[a] && staging_[a][0].size() == 0)
      for (auto& buf : staging_[a]) buf = PinnedBuffer<unsigned char>(static_cast<std::size_t>(chunk_rows_) * row_bytes_[a]);
  }
  const std::int64_t count = max_chunks >= 0 ? std::min(max_chunks, chunks_) : chunks_;
  last_chunks_ = count;
  last_bytes_ = 0;
  const auto run = [&](std::int64_t i) {
    const std::size_t s = static_cast<std::size_t>(i % 2);
    Chunk chunk;
    chunk.index = i;
    chunk.row0 = i * chunk_rows_;
    chunk.rows = std::min(chunk_rows_, n_ - chunk.row0);
    chunk.device.resize(hosts.size());
    for (std::size_t a = 0; a < hosts.size(); ++a) chunk.device[a] = hosts[a] ? device_[a][s].data() : nullptr;
    SKINNY_CUDA_TRY(cudaStreamWaitEvent(compute_, copied_[s].get(), 0));
    process(chunk);
    processed_[s].record(compute_);
  };
  // Chunk i + 1 is staged and its copy queued before the work on chunk i: the copy runs while the GPU
  // works on chunk i, and the host fills the next staging buffer meanwhile.
  for (std::int64_t i = 0; i < count; ++i) {
    stage(i, hosts, staged);
    if (i > 0) run(i - 1);
  }
  if (count > 0) run(count - 1);
}

double ChunkStream::last_copy_ms() const {
  double ms = 0;
  for (std::int64_t i = 0; i < last_chunks_; ++i)
    ms += copy_end_[static_cast<std::size_t>(i)]->ms_since(*copy_start_[static_cast<std::size_t>(i)]);
  return ms;
}

}  // namespace skinny::kmeans::detail
