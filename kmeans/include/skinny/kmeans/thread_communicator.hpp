// Ranks as threads of one process, collectives through host memory: each rank copies its buffer to the
// host, waits for the others, computes the result from all ranks' copies in rank order, and copies it
// back. Slow (two host copies and two barriers per collective) but needs no NCCL and allows several
// ranks on one GPU, which NCCL refuses: the tests run 2, 3 and 4 ranks of fit_distributed on one device
// through it, the same calls in the same order that NCCL would receive. Also the kmeans program's
// --gpus fallback when the library was built without NCCL.
//
//   skinny::kmeans::ThreadGroup group(4);
//   skinny::kmeans::run_ranks(4, [&](int rank) {
//     skinny::kmeans::ThreadCommunicator comm(group, rank);
//     ... fit_distributed(ctx, comm, ...);
//   });
#pragma once

#include <skinny/kmeans/communicator.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace skinny::kmeans {

/// What the ranks of one ThreadCommunicator family share: a barrier and a host slot per rank.
class ThreadGroup {
 public:
  explicit ThreadGroup(int ranks);
  int size() const noexcept { return ranks_; }
  /// Wakes every rank waiting in a collective, and every later one, with an exception: a rank that
  /// failed calls it so that the others do not wait for it forever.
  void abort();

 private:
  friend class ThreadCommunicator;
  void barrier();
  const int ranks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  bool aborted_ = false;
  std::vector<std::vector<unsigned char>> slots_;
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(ThreadGroup& group, int rank);
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  std::string name() const override { return "threads"; }
  void allreduce_sum(std::uint64_t* data, std::size_t count, cudaStream_t stream) override;
  void allreduce_sum(std::int32_t* data, std::size_t count, cudaStream_t stream) override;
  void allreduce_sum(double* data, std::size_t count, cudaStream_t stream) override;
  void allreduce_max(std::uint64_t* data, std::size_t count, cudaStream_t stream) override;
  void broadcast(void* data, std::size_t bytes, int root, cudaStream_t stream) override;
  void allgather(const void* send, void* recv, std::size_t bytes, cudaStream_t stream) override;

 private:
  /// Every rank's `bytes` at data into the group's slots (after the stream's earlier work), a barrier,
  /// then combine(slots) writes the result at data, and a barrier before the slots are reused.
  void exchange(const void* data, std::size_t bytes, cudaStream_t stream,
                const std::function<void(const std::vector<std::vector<unsigned char>>&)>& combine);
  ThreadGroup& group_;
  int rank_;
};

/// Runs fn(rank) for rank 0 .. ranks - 1, each on its own thread, and waits for all; rethrows the first
/// exception (by rank). `on_failure` (when set) runs as soon as a rank throws: ThreadGroup::abort or
/// ncclCommAbort, so that the others stop waiting in their collectives.
void run_ranks(int ranks, const std::function<void(int)>& fn, const std::function<void()>& on_failure = {});

}  // namespace skinny::kmeans
