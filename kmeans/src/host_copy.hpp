// HostCopier: one memcpy shared out over a few persistent host threads. A streamed fit copies pageable X
// into page-locked staging buffers before each chunk's DMA; one thread's memcpy (about 10 GB/s) would
// be slower than the PCIe link it feeds.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace skinny::kmeans::detail {

class HostCopier {
 public:
  /// `threads` copying in all, the caller's included (>= 1).
  explicit HostCopier(int threads);
  ~HostCopier();
  HostCopier(const HostCopier&) = delete;
  HostCopier& operator=(const HostCopier&) = delete;

  int threads() const noexcept { return static_cast<int>(workers_.size()) + 1; }
  /// memcpy(dst, src, bytes), in parts copied at once; returns when all are done.
  void copy(void* dst, const void* src, std::size_t bytes);

 private:
  void work(int part);
  void copy_part(int part);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::uint64_t generation_ = 0;  ///< one per copy(): wakes the workers
  int pending_ = 0;               ///< workers still copying their part of this generation
  bool stop_ = false;
  char* dst_ = nullptr;
  const char* src_ = nullptr;
  std::size_t bytes_ = 0, part_bytes_ = 0;
};

}  // namespace skinny::kmeans::detail
