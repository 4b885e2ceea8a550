#include "read_ceiling.hpp"

#include "device_data.hpp"
#include "timing.hpp"

#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>

namespace skinny::apps {
namespace {

constexpr int kThreads = 512;

// Each thread sums what it reads and writes one value per block, so the loads cannot be optimised
// away; four independent loads per iteration keep enough bytes in flight.
__global__ void read_and_reduce(const float4* __restrict__ x, std::size_t count, float* __restrict__ out) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  float4 s0{0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const float4 a = __ldcs(x + i), b = __ldcs(x + i + stride), c = __ldcs(x + i + 2 * stride),
                 d = __ldcs(x + i + 3 * stride);
    s0.x += a.x; s0.y += a.y; s0.z += a.z; s0.w += a.w;
    s1.x += b.x; s1.y += b.y; s1.z += b.z; s1.w += b.w;
    s2.x += c.x; s2.y += c.y; s2.z += c.z; s2.w += c.w;
    s3.x += d.x; s3.y += d.y; s3.z += d.z; s3.w += d.w;
  }
  for (; i < count; i += stride) {
    const float4 a = __ldcs(x + i);
    s0.x += a.x; s0.y += a.y; s0.z += a.z; s0.w += a.w;
  }
  float sum = s0.x + s0.y + s0.z + s0.w + s1.x + s1.y + s1.z + s1.w + s2.x + s2.y + s2.z + s2.w + s3.x + s3.y +
              s3.z + s3.w;
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) atomicAdd(out + blockIdx.x, sum);
}

}  // namespace

ReadCeiling measure_read_ceiling(cudaStream_t stream, std::size_t bytes) {
  int device = 0, sms = 0;
  SKINNY_CUDA_TRY(cudaGetDevice(&device));
  SKINNY_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::size_t count = bytes / sizeof(float4);
  DeviceBuffer<float> data(count * 4);
  fill_uniform(data.data(), count * 4, 7, 0.0, 1.0, stream);
  ReadCeiling best;
  best.bytes = count * sizeof(float4);
  best.threads_per_block = kThreads;
  for (const int blocks_per_sm : {2, 4, 8, 16}) {
    const int blocks = sms * blocks_per_sm;
    DeviceBuffer<float> sums{std::size_t(blocks)};
    const Timing t = time_on_stream(stream, [&] {
      read_and_reduce<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const float4*>(data.data()), count,
                                                       sums.data());
      SKINNY_CHECK_LAUNCH();
    });
    const double gbs = double(best.bytes) / (t.median_ms * 1e6);
    if (gbs > best.gbs) {
      best.gbs = gbs;
      best.best_blocks = blocks;
    }
  }
  return best;
}

}  // namespace skinny::apps
