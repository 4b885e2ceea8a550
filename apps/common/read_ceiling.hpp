// The streaming-read ceiling: the bandwidth at which this GPU reads a large buffer once, measured in
// the same run as the kernels it judges (tall-skinny GEMM's floor is one read of A).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace skinny::apps {

struct ReadCeiling {
  double gbs = 0;            ///< best median bandwidth over the grid sizes tried, GB/s (1e9 bytes/s)
  std::size_t bytes = 0;     ///< buffer size read
  int best_blocks = 0;       ///< grid size that achieved it
  int threads_per_block = 0;
};

/// float4 loads, a grid-stride read-and-reduce over `bytes` (default 4 GiB), several grid sizes,
/// median of timed repetitions each.
ReadCeiling measure_read_ceiling(cudaStream_t stream, std::size_t bytes = std::size_t(4) << 30);

}  // namespace skinny::apps
