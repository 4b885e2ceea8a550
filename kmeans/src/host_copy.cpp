#include "host_copy.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace skinny::kmeans::detail {
namespace {

/// Below this a copy is not worth waking the workers for.
constexpr std::size_t kSplitBytes = std::size_t(1) << 20;
constexpr std::size_t kPage = 4096;

}  // namespace

HostCopier::HostCopier(int threads) {
  if (threads < 1) throw std::invalid_argument("HostCopier: threads = " + std::to_string(threads) + " must be >= 1");
  for (int part = 1; part < threads; ++part) workers_.emplace_back([this, part] { work(part); });
}

HostCopier::~HostCopier() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void HostCopier::copy_part(int part) {
  const std::size_t begin = std::min(bytes_, static_cast<std::size_t>(part) * part_bytes_);
  const std::size_t end = std::min(bytes_, begin + part_bytes_);
  if (end > begin) std::memcpy(dst_ + begin, src_ + begin, end - begin);
}

void HostCopier::copy(void* dst, const void* src, std::size_t bytes) {
  if (workers_.empty() || bytes < kSplitBytes) {
    std::memcpy(dst, src, bytes);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dst_ = static_cast<char*>(dst);
    src_ = static_cast<const char*>(src);
    bytes_ = bytes;
    // Whole pages per part: no two threads write the same page.
    const std::size_t parts = static_cast<std::size_t>(threads());
    part_bytes_ = ((bytes + parts - 1) / parts + kPage - 1) / kPage * kPage;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  start_.notify_all();
  copy_part(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
}

void HostCopier::work(int part) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    copy_part(part);  // the fields it reads do not change until every part is done
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

}  // namespace skinny::kmeans::detail
