// The kmeans program across GPUs: --gpus N (one process, a thread per GPU, NCCL between them) and
// mpirun -n N kmeans ... (a process per GPU, on one host or several; NCCL, or MPI through host memory).
// The rows are split among the ranks (shard_rows); each rank makes or reads only its rows; rank 0
// prints and writes the outputs, the labels gathered to it.
#pragma once

#include "common/matrix_io.hpp"

#include <skinny/kmeans/kmeans.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace skinny::apps {

/// MPI for the program's lifetime when it was started by an MPI launcher (mpirun, mpiexec, srun with
/// PMI/PMIx: their environment variables tell) and the program was built with MPI; otherwise nothing,
/// so that a plain run never starts MPI.
class MpiSession {
 public:
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  bool active() const noexcept { return active_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

 private:
  bool active_ = false;
  int rank_ = 0, size_ = 1;
};

/// Whether this program can run across processes (built with MPI).
bool built_with_mpi();
/// Whether NcclCommunicator was built (SKINNY_WITH_NCCL).
bool built_with_nccl();

/// One distributed fit, as the options give it.
template <class T>
struct DistributedRun {
  std::int64_t n = 0, d = 0;
  kmeans::Params params;            ///< progress callbacks are set here, on rank 0
  bool synthetic = true;            ///< blobs from data_seed, each rank its rows
  std::uint64_t data_seed = 42;
  std::string input;                ///< the file (each MPI rank reads its rows)
  ReadOptions read;
  const HostData<T>* data = nullptr;  ///< the whole file read by this process (--gpus), or null
  std::vector<T> initial;             ///< given initial centroids, or empty
  std::vector<double> weights;        ///< all n weights, or empty
  int gpus = 1;                       ///< devices first_device .. first_device + gpus - 1 (one process)
  int ranks = 0;                      ///< threads of one process (0: one per GPU)
  int first_device = 0;
  std::string comm = "auto";          ///< auto, nccl, threads (one process) or mpi (MPI runs)
  bool progress = false;
  std::string output_labels, output_centroids, json, precision, backend, init_description, data_name;
  const MpiSession* mpi = nullptr;    ///< an active session: one rank of an MPI run
};

/// Runs it; rank 0 prints, writes --output-* and --json. Returns the exit code.
template <class T>
int run_kmeans_distributed(const DistributedRun<T>& run);

}  // namespace skinny::apps
