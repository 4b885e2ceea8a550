// The communicator over NCCL: each collective one NCCL call on the caller's stream (in place where
// NCCL allows it), groups as ncclGroupStart / ncclGroupEnd.
#include <skinny/gemm/errors.hpp>
#include <skinny/kmeans/nccl_communicator.hpp>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace skinny::kmeans {
namespace {

/// Throws std::runtime_error with the call, NCCL's error string and its last message.
void nccl_check(ncclResult_t r, const char* call, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  std::string msg = std::string("NCCL: ") + call + " failed: " + ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last && *last) msg += std::string(" (") + last + ")";
  throw std::runtime_error(msg);
}
#define SKINNY_NCCL_TRY(call) nccl_check((call), #call, comm_)
#define SKINNY_NCCL_TRY_NO_COMM(call) nccl_check((call), #call)

/// Multicast (NVLink SHARP) off unless the caller chose: it needs multicast objects, which some of the
/// machines this runs on forbid. Before the first communicator, which reads the environment.
void keep_multicast_off() { setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); }

}  // namespace

NcclCommunicator::Id NcclCommunicator::unique_id() {
  keep_multicast_off();
  ncclUniqueId id;
  SKINNY_NCCL_TRY_NO_COMM(ncclGetUniqueId(&id));
  Id out;
  std::memcpy(out.data(), id.internal, out.size());
  return out;
}

NcclCommunicator::NcclCommunicator(const Id& id, int rank, int size) : owned_(true), rank_(rank), size_(size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("NcclCommunicator: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                                " ranks is not valid");
  keep_multicast_off();
  ncclUniqueId uid;
  std::memcpy(uid.internal, id.data(), id.size());
  SKINNY_NCCL_TRY_NO_COMM(ncclCommInitRank(&comm_, size, uid, rank));
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, bool owned) : comm_(comm), owned_(owned) {
  if (!comm) throw std::invalid_argument("NcclCommunicator: the communicator is null");
  SKINNY_NCCL_TRY(ncclCommUserRank(comm_, &rank_));
  SKINNY_NCCL_TRY(ncclCommCount(comm_, &size_));
}

std::vector<std::unique_ptr<NcclCommunicator>> NcclCommunicator::for_devices(const std::vector<int>& devices) {
  if (devices.empty()) throw std::invalid_argument("NcclCommunicator::for_devices: no devices");
  keep_multicast_off();
  std::vector<ncclComm_t> comms(devices.size());
  SKINNY_NCCL_TRY_NO_COMM(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()));
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  for (ncclComm_t c : comms) out.push_back(std::make_unique<NcclCommunicator>(c, true));
  return out;
}

NcclCommunicator::~NcclCommunicator() {
  if (owned_ && comm_) ncclCommDestroy(comm_);  // never throw from a destructor
}

void NcclCommunicator::abort() noexcept {
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
}

void NcclCommunicator::allreduce_sum(std::uint64_t* data, std::size_t count, cudaStream_t stream) {
  SKINNY_NCCL_TRY(ncclAllReduce(data, data, count, ncclUint64, ncclSum, comm_, stream));
}
void NcclCommunicator::allreduce_sum(std::int32_t* data, std::size_t count, cudaStream_t stream) {
  SKINNY_NCCL_TRY(ncclAllReduce(data, data, count, ncclInt32, ncclSum, comm_, stream));
}
void NcclCommunicator::allreduce_sum(double* data, std::size_t count, cudaStream_t stream) {
  SKINNY_NCCL_TRY(ncclAllReduce(data, data, count, ncclFloat64, ncclSum, comm_, stream));
}
void NcclCommunicator::allreduce_max(std::uint64_t* data, std::size_t count, cudaStream_t stream) {
  SKINNY_NCCL_TRY(ncclAllReduce(data, data, count, ncclUint64, ncclMax, comm_, stream));
}
void NcclCommunicator::broadcast(void* data, std::size_t bytes, int root, cudaStream_t stream) {
  SKINNY_NCCL_TRY(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream));
}
void NcclCommunicator::allgather(const void* send, void* recv, std::size_t bytes, cudaStream_t stream) {
  SKINNY_NCCL_TRY(ncclAllGather(send, recv, bytes, ncclUint8, comm_, stream));
}
void NcclCommunicator::group_begin() { SKINNY_NCCL_TRY(ncclGroupStart()); }
void NcclCommunicator::group_end() { SKINNY_NCCL_TRY(ncclGroupEnd()); }

}  // namespace skinny::kmeans
