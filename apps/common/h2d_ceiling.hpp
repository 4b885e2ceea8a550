// The host-to-device ceiling: one large cudaMemcpyAsync from page-locked memory, timed with events,
// measured in the same run as a streamed computation it judges.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace skinny::apps {

struct H2dCeiling {
  double gbs = 0;          ///< median bandwidth of the timed copies, GB/s (1e9 bytes/s)
  std::size_t bytes = 0;   ///< size of each copy
  int repetitions = 0;
};

/// Copies `bytes` (default 1 GiB, less when the GPU has less than four times that free) from page-locked
/// memory to the device on `stream`: a warm-up, then the median of timed repetitions.
H2dCeiling measure_h2d_ceiling(cudaStream_t stream, std::size_t bytes = std::size_t(1) << 30);

}  // namespace skinny::apps
