// The collectives fit_distributed needs between the ranks (GPUs) that share one K-means problem, and
// the one-rank communicator. Implementations: LocalCommunicator (here), ThreadCommunicator (ranks as
// threads, collectives through host memory: thread_communicator.hpp), NcclCommunicator (NCCL, built
// with SKINNY_WITH_NCCL: nccl_communicator.hpp) and MpiCommunicator (MPI through host memory, header
// only: mpi_communicator.hpp).
//
// Every buffer is device memory of the calling rank's current device (NCCL reads and writes it there);
// the host-staged implementations accept host memory too. Every call is ordered on `stream`: it reads
// what the stream wrote before it, and what the stream runs after it sees the result.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace skinny::kmeans {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;  ///< 0 .. size() - 1
  virtual int size() const = 0;  ///< ranks in all
  /// "local", "threads", "nccl" or "mpi": for logs and JSON.
  virtual std::string name() const = 0;

  /// In place: data[i] = the sum over ranks of data[i]. Integer sums are exact in any order; double
  /// sums may depend on the order and the number of ranks (fit_distributed uses none for its results).
  virtual void allreduce_sum(std::uint64_t* data, std::size_t count, cudaStream_t stream) = 0;
  virtual void allreduce_sum(std::int32_t* data, std::size_t count, cudaStream_t stream) = 0;
  virtual void allreduce_sum(double* data, std::size_t count, cudaStream_t stream) = 0;
  /// In place: data[i] = the maximum over ranks (non-negative doubles compare as their bits do).
  virtual void allreduce_max(std::uint64_t* data, std::size_t count, cudaStream_t stream) = 0;
  /// Root's `bytes` at data to every rank's data.
  virtual void broadcast(void* data, std::size_t bytes, int root, cudaStream_t stream) = 0;
  /// recv (size() x bytes) gets rank r's `bytes` from its send at recv + r x bytes.
  virtual void allgather(const void* send, void* recv, std::size_t bytes, cudaStream_t stream) = 0;

  /// Collectives between group_begin() and group_end() may be launched together (NCCL fuses a group
  /// into one launch); the others run each call at once. Every rank must issue the same calls in the
  /// same order either way.
  virtual void group_begin() {}
  virtual void group_end() {}
};

/// One rank: every collective leaves the data as it is (a fit over a communicator of one equals fit).
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "local"; }
  void allreduce_sum(std::uint64_t*, std::size_t, cudaStream_t) override {}
  void allreduce_sum(std::int32_t*, std::size_t, cudaStream_t) override {}
  void allreduce_sum(double*, std::size_t, cudaStream_t) override {}
  void allreduce_max(std::uint64_t*, std::size_t, cudaStream_t) override {}
  void broadcast(void*, std::size_t, int, cudaStream_t) override {}
  void allgather(const void* send, void* recv, std::size_t bytes, cudaStream_t stream) override;
};

}  // namespace skinny::kmeans
