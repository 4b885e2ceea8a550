// MPI for fit_distributed, header only (the library itself does not link MPI; a program that includes
// this links MPI::MPI_CXX): MpiCommunicator, collectives through host memory over MPI (any number of
// ranks per GPU, no NCCL needed; every collective copies its buffer to the host and back), and
// nccl_over_mpi, the NCCL communicator whose unique id rank 0 makes and MPI broadcasts.
//
//   MPI_Init(&argc, &argv);  cudaSetDevice(local_rank % devices);
//   skinny::kmeans::MpiCommunicator comm(MPI_COMM_WORLD);          // or: auto comm = nccl_over_mpi(MPI_COMM_WORLD);
//   auto r = skinny::kmeans::fit_distributed<float>(ctx, comm, shard, n_local, n, offset, d, params);
#pragma once

#include <skinny/gemm/errors.hpp>
#include <skinny/kmeans/communicator.hpp>
#if defined(SKINNY_WITH_NCCL)
#include <skinny/kmeans/nccl_communicator.hpp>
#endif

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace skinny::kmeans {

/// Throws std::runtime_error naming the MPI call and MPI's error string.
inline void mpi_check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(std::string("MPI: ") + call + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

class MpiCommunicator final : public Communicator {
 public:
  /// Uses `comm` (not duplicated, not freed): every rank of it takes part in fit_distributed.
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    mpi_check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    mpi_check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void allreduce_sum(std::uint64_t* data, std::size_t count, cudaStream_t stream) override {
    allreduce(data, count, MPI_UINT64_T, MPI_SUM, stream);
  }
  void allreduce_sum(std::int32_t* data, std::size_t count, cudaStream_t stream) override {
    allreduce(data, count, MPI_INT32_T, MPI_SUM, stream);
  }
  void allreduce_sum(double* data, std::size_t count, cudaStream_t stream) override {
    allreduce(data, count, MPI_DOUBLE, MPI_SUM, stream);
  }
  void allreduce_max(std::uint64_t* data, std::size_t count, cudaStream_t stream) override {
    allreduce(data, count, MPI_UINT64_T, MPI_MAX, stream);
  }
  void broadcast(void* data, std::size_t bytes, int root, cudaStream_t stream) override {
    std::vector<unsigned char> host(bytes);
    if (rank_ == root) copy(host.data(), data, bytes, stream);
    for (std::size_t at = 0; at < bytes; at += kChunk)
      mpi_check(MPI_Bcast(host.data() + at, count_of(bytes - at), MPI_BYTE, root, comm_), "MPI_Bcast");
    if (rank_ != root) copy(data, host.data(), bytes, stream);
  }
  void allgather(const void* send, void* recv, std::size_t bytes, cudaStream_t stream) override {
    if (bytes > static_cast<std::size_t>(kChunk))
      throw std::invalid_argument("MpiCommunicator::allgather: " + std::to_string(bytes) + " bytes per rank is more than 1 GiB");
    std::vector<unsigned char> mine(bytes), all(bytes * static_cast<std::size_t>(size_));
    copy(mine.data(), send, bytes, stream);
    mpi_check(MPI_Allgather(mine.data(), static_cast<int>(bytes), MPI_BYTE, all.data(), static_cast<int>(bytes), MPI_BYTE,
                            comm_),
              "MPI_Allgather");
    copy(recv, all.data(), all.size(), stream);
  }

 private:
  static constexpr int kChunk = 1 << 30;  ///< MPI counts are int: large buffers go in pieces
  static int count_of(std::size_t left) { return static_cast<int>(left < std::size_t(kChunk) ? left : std::size_t(kChunk)); }

  /// Device or host memory (cudaMemcpyDefault), after the stream's earlier work; waits.
  static void copy(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return;
    SKINNY_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
    SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));
  }

  template <class U>
  void allreduce(U* data, std::size_t count, MPI_Datatype type, MPI_Op op, cudaStream_t stream) {
    std::vector<U> host(count);
    copy(host.data(), data, count * sizeof(U), stream);
    const std::size_t per = kChunk / sizeof(U);
    for (std::size_t at = 0; at < count; at += per) {
      const int n = static_cast<int>(count - at < per ? count - at : per);
      mpi_check(MPI_Allreduce(MPI_IN_PLACE, host.data() + at, n, type, op, comm_), "MPI_Allreduce");
    }
    copy(data, host.data(), count * sizeof(U), stream);
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

#if defined(SKINNY_WITH_NCCL)
/// An NCCL communicator over the ranks of `comm` on each rank's current device: rank 0 makes the
/// unique id, MPI_Bcast hands it to the others. One rank per GPU (NCCL refuses two on one device).
inline std::unique_ptr<NcclCommunicator> nccl_over_mpi(MPI_Comm comm) {
  int rank = 0, size = 1;
  mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  NcclCommunicator::Id id{};
  if (rank == 0) id = NcclCommunicator::unique_id();
  mpi_check(MPI_Bcast(id.data(), static_cast<int>(id.size()), MPI_BYTE, 0, comm), "MPI_Bcast");
  return std::make_unique<NcclCommunicator>(id, rank, size);
}
#endif

}  // namespace skinny::kmeans
