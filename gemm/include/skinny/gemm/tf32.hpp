// Float operands as the TF32 tensor cores take them (11 significant bits): rounded, as gemm::nearest rounds
// the centres and the 3xTF32 splits round their halves, or truncated, as the tensor cores read float bits
// that were not rounded (gemm::nearest's points in one product per term). One definition for the kernels
// and for the checks that must reproduce their operands (K-means' protect).
#pragma once

#include <skinny/gemm/host_device.hpp>

#include <cstdint>

namespace skinny::gemm {

/// A float's bits rounded to the nearest TF32, ties away from zero (integer operations only).
SKINNY_HOST_DEVICE constexpr std::uint32_t tf32_rounded_bits(std::uint32_t bits) {
  return (bits + 0x1000u) & 0xffffe000u;
}

/// A float's bits truncated to TF32: its low 13 bits dropped.
SKINNY_HOST_DEVICE constexpr std::uint32_t tf32_truncated_bits(std::uint32_t bits) { return bits & 0xffffe000u; }

}  // namespace skinny::gemm
