#include "h2d_ceiling.hpp"

#include "timing.hpp"

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/pinned_buffer.hpp>

#include <algorithm>
#include <cstring>

namespace skinny::apps {

H2dCeiling measure_h2d_ceiling(cudaStream_t stream, std::size_t bytes) {
  std::size_t free = 0, total = 0;
  SKINNY_CUDA_TRY(cudaMemGetInfo(&free, &total));
  bytes = std::max<std::size_t>(std::size_t(1) << 20, std::min(bytes, free / 4));
  PinnedBuffer<unsigned char> host(bytes);
  std::memset(host.data(), 1, bytes);  // touched, as the data a real copy reads
  DeviceBuffer<unsigned char> device(bytes);
  const Timing t = time_on_stream(stream, [&] {
    SKINNY_CUDA_TRY(cudaMemcpyAsync(device.data(), host.data(), bytes, cudaMemcpyHostToDevice, stream));
  });
  H2dCeiling c;
  c.bytes = bytes;
  c.repetitions = t.repetitions;
  c.gbs = t.median_ms > 0 ? double(bytes) / (t.median_ms * 1e6) : 0;
  return c;
}

}  // namespace skinny::apps
