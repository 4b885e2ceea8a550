// Ranks as threads, collectives through host memory (thread_communicator.hpp), and LocalCommunicator's
// allgather, the one collective of one rank that moves data.
#include <skinny/gemm/errors.hpp>
#include <skinny/kmeans/communicator.hpp>
#include <skinny/kmeans/thread_communicator.hpp>

#include <algorithm>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

namespace skinny::kmeans {
namespace {

/// Whether p is memory CUDA does not know (plain host memory), or there is no CUDA device at all: then
/// copies are plain memcpy and no stream is touched (the CPU tests run the collectives that way).
bool plain_host(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();  // clear the error this query left
    return true;
  }
  return a.type == cudaMemoryTypeUnregistered;
}

/// Device or host memory to host (cudaMemcpyDefault: unified addressing tells which), after the
/// stream's earlier work; waits.
void to_host(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  if (plain_host(src)) {
    std::memcpy(dst, src, bytes);
    return;
  }
  SKINNY_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
}

void from_host(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  if (plain_host(dst)) {
    std::memcpy(dst, src, bytes);
    return;
  }
  SKINNY_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));  // src is host memory the caller frees next
}

/// out[i] = op over ranks (in rank order) of each rank's element i.
template <class U, class Op>
void reduce_slots(const std::vector<std::vector<unsigned char>>& slots, std::size_t count, U* out, Op op) {
  for (std::size_t r = 0; r < slots.size(); ++r) {
    const U* v = reinterpret_cast<const U*>(slots[r].data());
    for (std::size_t i = 0; i < count; ++i) out[i] = r == 0 ? v[i] : op(out[i], v[i]);
  }
}

}  // namespace

void LocalCommunicator::allgather(const void* send, void* recv, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0 || send == recv) return;
  if (plain_host(send) && plain_host(recv)) {
    std::memcpy(recv, send, bytes);
    return;
  }
  SKINNY_CUDA_TRY(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDefault, stream));
}

ThreadGroup::ThreadGroup(int ranks) : ranks_(ranks), slots_(static_cast<std::size_t>(std::max(ranks, 0))) {
  if (ranks < 1) throw std::invalid_argument("ThreadGroup: need ranks >= 1, got " + std::to_string(ranks));
}

void ThreadGroup::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  cv_.notify_all();
}

void ThreadGroup::barrier() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_) throw std::runtime_error("kmeans: another rank failed; this one stops");
  const std::uint64_t generation = generation_;
  if (++arrived_ == ranks_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
  if (generation_ == generation) throw std::runtime_error("kmeans: another rank failed; this one stops");
}

ThreadCommunicator::ThreadCommunicator(ThreadGroup& group, int rank) : group_(group), rank_(rank) {
  if (rank < 0 || rank >= group.size())
    throw std::invalid_argument("ThreadCommunicator: rank " + std::to_string(rank) + " is outside 0 .. " +
                                std::to_string(group.size() - 1));
}

void ThreadCommunicator::exchange(const void* data, std::size_t bytes, cudaStream_t stream,
                                  const std::function<void(const std::vector<std::vector<unsigned char>>&)>& combine) {
  std::vector<unsigned char>& slot = group_.slots_[static_cast<std::size_t>(rank_)];
  slot.resize(data ? bytes : 0);
  if (data) to_host(slot.data(), data, bytes, stream);
  group_.barrier();  // every slot written
  combine(group_.slots_);
  group_.barrier();  // every slot read: they may be overwritten by the next collective
}

void ThreadCommunicator::allreduce_sum(std::uint64_t* data, std::size_t count, cudaStream_t stream) {
  std::vector<std::uint64_t> out(count);
  exchange(data, count * sizeof *data, stream, [&](const auto& slots) {
    reduce_slots(slots, count, out.data(), [](std::uint64_t a, std::uint64_t b) { return a + b; });
  });
  from_host(data, out.data(), count * sizeof *data, stream);
}

void ThreadCommunicator::allreduce_sum(std::int32_t* data, std::size_t count, cudaStream_t stream) {
  std::vector<std::int32_t> out(count);
  exchange(data, count * sizeof *data, stream, [&](const auto& slots) {
    // Wrapping like NCCL's 32-bit sum (through unsigned arithmetic, which is defined).
    reduce_slots(slots, count, out.data(), [](std::int32_t a, std::int32_t b) {
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
    });
  });
  from_host(data, out.data(), count * sizeof *data, stream);
}

void ThreadCommunicator::allreduce_sum(double* data, std::size_t count, cudaStream_t stream) {
  std::vector<double> out(count);
  exchange(data, count * sizeof *data, stream, [&](const auto& slots) {
    reduce_slots(slots, count, out.data(), [](double a, double b) { return a + b; });
  });
  from_host(data, out.data(), count * sizeof *data, stream);
}

void ThreadCommunicator::allreduce_max(std::uint64_t* data, std::size_t count, cudaStream_t stream) {
  std::vector<std::uint64_t> out(count);
  exchange(data, count * sizeof *data, stream, [&](const auto& slots) {
    reduce_slots(slots, count, out.data(), [](std::uint64_t a, std::uint64_t b) { return std::max(a, b); });
  });
  from_host(data, out.data(), count * sizeof *data, stream);
}

void ThreadCommunicator::broadcast(void* data, std::size_t bytes, int root, cudaStream_t stream) {
  if (root < 0 || root >= size())
    throw std::invalid_argument("ThreadCommunicator::broadcast: root " + std::to_string(root) + " is not a rank");
  std::vector<unsigned char> out(bytes);
  exchange(rank_ == root ? data : nullptr, bytes, stream, [&](const auto& slots) {
    if (bytes > 0) std::memcpy(out.data(), slots[static_cast<std::size_t>(root)].data(), bytes);
  });
  if (rank_ != root) from_host(data, out.data(), bytes, stream);
}

void ThreadCommunicator::allgather(const void* send, void* recv, std::size_t bytes, cudaStream_t stream) {
  std::vector<unsigned char> out(bytes * static_cast<std::size_t>(size()));
  exchange(send, bytes, stream, [&](const auto& slots) {
    for (std::size_t r = 0; r < slots.size(); ++r)
      if (bytes > 0) std::memcpy(out.data() + r * bytes, slots[r].data(), bytes);
  });
  from_host(recv, out.data(), out.size(), stream);
}

void run_ranks(int ranks, const std::function<void(int)>& fn, const std::function<void()>& on_failure) {
  if (ranks < 1) throw std::invalid_argument("run_ranks: need ranks >= 1, got " + std::to_string(ranks));
  std::mutex mutex;
  std::exception_ptr first;  // the first failure in time: the others may only be its consequences
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        bool was_first = false;
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (!first) {
            first = std::current_exception();
            was_first = true;
          }
        }
        if (was_first && on_failure) on_failure();
      }
    });
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace skinny::kmeans
