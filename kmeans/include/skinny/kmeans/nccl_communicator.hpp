// The communicator over NCCL (built with SKINNY_WITH_NCCL; SKINNY_WITH_NCCL is then defined for users of
// skinny::kmeans): GPUs of one process, of several processes, or of several hosts, one rank per GPU
// (NCCL refuses two ranks on one device: ThreadCommunicator runs those).
//
//   one process, N GPUs:   auto comms = NcclCommunicator::for_devices({0, 1, 2, 3});  // rank i: device i
//                          a thread per rank: cudaSetDevice(devices[i]), then fit_distributed(..., *comms[i], ...)
//   several processes:     rank 0: id = NcclCommunicator::unique_id(); send it to all (MPI: mpi_communicator.hpp)
//                          every rank: cudaSetDevice(its GPU); NcclCommunicator comm(id, rank, size);
//
// NVLink SHARP (multicast) stays off: NCCL_NVLS_ENABLE is set to 0 in the environment before the first
// communicator is made, unless the caller set it (some machines forbid multicast objects).
#pragma once

#include <skinny/kmeans/communicator.hpp>

#include <nccl.h>

#include <array>
#include <memory>
#include <vector>

namespace skinny::kmeans {

class NcclCommunicator final : public Communicator {
 public:
  /// NCCL's unique id, made by one rank and handed to all (ncclUniqueId's 128 bytes).
  using Id = std::array<char, NCCL_UNIQUE_ID_BYTES>;
  static Id unique_id();

  /// Rank `rank` of `size` on the current device, from the id all ranks share (ncclCommInitRank).
  NcclCommunicator(const Id& id, int rank, int size);
  /// An existing communicator; destroyed with this object when `owned`.
  NcclCommunicator(ncclComm_t comm, bool owned);
  /// One communicator per device of this process, rank i on devices[i] (ncclCommInitAll). Each is
  /// then used from a thread whose current device is its own.
  static std::vector<std::unique_ptr<NcclCommunicator>> for_devices(const std::vector<int>& devices);

  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }
  ncclComm_t handle() const noexcept { return comm_; }
  /// ncclCommAbort: collectives waiting for a failed rank return (with an error) instead of hanging.
  void abort() noexcept;

  void allreduce_sum(std::uint64_t* data, std::size_t count, cudaStream_t stream) override;
  void allreduce_sum(std::int32_t* data, std::size_t count, cudaStream_t stream) override;
  void allreduce_sum(double* data, std::size_t count, cudaStream_t stream) override;
  void allreduce_max(std::uint64_t* data, std::size_t count, cudaStream_t stream) override;
  void broadcast(void* data, std::size_t bytes, int root, cudaStream_t stream) override;
  void allgather(const void* send, void* recv, std::size_t bytes, cudaStream_t stream) override;
  void group_begin() override;
  void group_end() override;

 private:
  ncclComm_t comm_ = nullptr;
  bool owned_ = false;
  int rank_ = 0, size_ = 1;
};

}  // namespace skinny::kmeans
