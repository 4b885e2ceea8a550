// Tensor-core pieces shared by the kernels that use mma.sync directly (TSM2's row-major kernel,
// the fused nearest-centre kernel): float split into two TF32 halves for 3xTF32 products, and the
// m16n8k8 TF32 and m8n8k4 double instructions.
#pragma once

#include <cstdint>

namespace skinny::gemm::detail {

/// x rounded to the nearest TF32 (ties away from zero), as the bits the tensor cores read: integer
/// operations, no conversion instruction.
__host__ __device__ __forceinline__ std::uint32_t tf32_bits(std::uint32_t x) { return (x + 0x1000u) & 0xffffe000u; }

/// x = hi + lo + O(2^-22 |x|), both TF32.
struct Tf32Pair {
  std::uint32_t hi, lo;
};
__device__ __forceinline__ Tf32Pair split_tf32(float x) {
  const std::uint32_t hi = tf32_bits(__float_as_uint(x));
  return {hi, tf32_bits(__float_as_uint(x - __uint_as_float(hi)))};
}

/// d += A (16 x 8, TF32) * B (8 x 8, TF32).
__device__ __forceinline__ void mma_tf32(float (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                         std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // callers run these only on compute capability >= 8.0
#else
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

/// d += A (8 x 4) * B (4 x 8), double.
__device__ __forceinline__ void mma_f64(double (&d)[2], double a, double b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
      : "+d"(d[0]), "+d"(d[1])
      : "d"(a), "d"(b));
#endif
}

}  // namespace skinny::gemm::detail
