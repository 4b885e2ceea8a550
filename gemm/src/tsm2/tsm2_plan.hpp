// The launch plan of the fast TSM2 kernel (tsm2.cu): which kernel, how many threads per block, how
// far the inner dimension is split across blocks, and the figures the choice was made from. Tests
// call plan_tsm2 to check that their shapes reach both split == 1 and split > 1; benchmarks print it.
#pragma once

#include "../problem.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace skinny::gemm::detail {

struct Tsm2Plan {
  int t1 = 0;     ///< threads per block
  int t2 = 0;     ///< columns of C per pass (the instantiated kernel's accumulator width)
  int t3 = 0;     ///< 16-byte (or element, scalar path) loads of A in flight per thread (cp.async stages)
  int split = 1;  ///< blocks sharing a row group along the inner dimension; 1: C is written directly
  int passes = 1;              ///< ceil(cols / t2): passes over A (run as neighbouring blocks)
  int vec = 1;                 ///< elements of A per load: 16 / sizeof(T), or 1 on the scalar fallback
  bool a_row_major = false;    ///< a row-major kernel, else a column-major one
  /// The kernel: "ffma" (tsm2.cu), "stream" (row-major, row at a time, <= 8 columns), or the tensor
  /// cores: "3xtf32" (float) or "dmma" (row-major double; column-major float converted to double).
  const char* kernel = "ffma";
  int rows_per_block = 0;      ///< rows of A (and C) one block covers
  std::int64_t inner_per_split = 0;  ///< inner elements each split covers (a multiple of the B tile)
  std::int64_t grid_x = 0;     ///< blocks along x: row groups x passes; grid y = split
  int blocks_per_sm = 0;       ///< occupancy of the kernel at t1 (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
  std::size_t smem_bytes = 0;  ///< dynamic shared memory per block
  double bytes_in_flight = 0;         ///< A bytes the resident part of the grid keeps in flight
  double bytes_in_flight_needed = 0;  ///< Little's law (model) x safety factor, whole GPU
  double partial_fraction = 0;        ///< split * rows * cols * bytes * 2 / bytes(A); 0 when split == 1
  int model_t2 = 0, model_t3 = 0;     ///< the paper's model (choose_t2_t3); 0 when it could not run
  bool from_trial = false;            ///< t1 was chosen by timing the candidates on the device

  std::string describe() const;
};

/// The plan tsm2_launch uses for this problem on ctx's device: the cached trial winner when the
/// problem's key was already launched, else the first t1 candidate (no device work is done).
/// Precondition: tsm2_can_implement(p).
Tsm2Plan plan_tsm2(const Problem& p, Context& ctx);

}  // namespace skinny::gemm::detail
