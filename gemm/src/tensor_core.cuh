// Tensor-core pieces shared by the kernels that use mma.sync directly (TSM2's tensor-core kernels,
// the fused nearest-centre kernel): float split into two TF32 halves for 3xTF32 products, and the
// m16n8k8 TF32, m16n8k16 half / bfloat16 and m8n8k4 double instructions.
#pragma once

#include <skinny/gemm/tf32.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace skinny::gemm::detail {


/// x = hi + lo + O(2^-22 |x|), both TF32.
struct Tf32Pair {
  std::uint32_t hi, lo;
};
__device__ __forceinline__ Tf32Pair split_tf32(float x) {
  const std::uint32_t hi = tf32_rounded_bits(__float_as_uint(x));
  return {hi, tf32_rounded_bits(__float_as_uint(x - __uint_as_float(hi)))};
}

/// The four elements of v split into TF32 halves.
__device__ __forceinline__ void split_tf32(const float4& v, Tf32Pair (&out)[4]) {
  out[0] = split_tf32(v.x);
  out[1] = split_tf32(v.y);
  out[2] = split_tf32(v.z);
  out[3] = split_tf32(v.w);
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

/// Product `p` of a 3xTF32 k8 step: d += a_lo b_hi (p = 0), a_hi b_lo (1) or a_hi b_hi (2). a0..a3 are
/// the split halves of the fragment registers of A (rows g and g + 8 at inner indices t and t + 4), bh
/// and bl the TF32 halves of B's two registers. The dropped a_lo * b_lo is below float round-off; the
/// small products go first. `p` is a constant after unrolling.
__device__ __forceinline__ void mma_3xtf32_product(int p, float (&d)[4], const Tf32Pair& a0, const Tf32Pair& a1,
                                                   const Tf32Pair& a2, const Tf32Pair& a3, std::uint32_t bh0,
                                                   std::uint32_t bh1, std::uint32_t bl0, std::uint32_t bl1) {
  if (p == 0)
    mma_tf32(d, a0.lo, a1.lo, a2.lo, a3.lo, bh0, bh1);
  else if (p == 1)
    mma_tf32(d, a0.hi, a1.hi, a2.hi, a3.hi, bl0, bl1);
  else
    mma_tf32(d, a0.hi, a1.hi, a2.hi, a3.hi, bh0, bh1);
}

/// The 3xTF32 products of one k-group of 16 inner elements (two k8 steps) form a chain of six mma
/// instructions into one accumulator, each waiting for the one before. Step `i` (0..5) is k8 step i / 3,
/// product i % 3: callers with several independent chains write step i of all of them before step
/// i + 1, so that the chains can overlap (the same sums, in the same order per chain). Whether they do
/// is ptxas's choice: it serialises them when registers are short (rm_mma_kernel.cuh, launch bounds).
/// ag and ag8 hold the split halves of this lane's 4 elements of rows g and g + 8, bh and bl the TF32
/// halves of its 4 elements of B's column g; element e is inner index t (e even) or t + 4 (e odd) of k8
/// step e / 2, the same order for A and B.
constexpr int kKGroupSteps = 6;
__device__ __forceinline__ void k_group_3xtf32_step(int i, float (&d)[4], const Tf32Pair (&ag)[4],
                                                    const Tf32Pair (&ag8)[4], const float4& bh, const float4& bl) {
  const int e0 = 2 * (i / 3), e1 = e0 + 1;
  const float h[4] = {bh.x, bh.y, bh.z, bh.w}, l[4] = {bl.x, bl.y, bl.z, bl.w};
  mma_3xtf32_product(i % 3, d, ag[e0], ag8[e0], ag[e1], ag8[e1], __float_as_uint(h[e0]), __float_as_uint(h[e1]),
                     __float_as_uint(l[e0]), __float_as_uint(l[e1]));
}

/// d = A B over one k-group in 3xTF32, in a fresh accumulator: the tensor cores add by truncation, so
/// callers add d to their running sums with round-to-nearest adds.
__device__ __forceinline__ void k_group_3xtf32(float (&d)[4], const Tf32Pair (&ag)[4], const Tf32Pair (&ag8)[4],
                                               const float4& bh, const float4& bl) {
  d[0] = d[1] = d[2] = d[3] = 0.f;
#pragma unroll
  for (int i = 0; i < kKGroupSteps; ++i) k_group_3xtf32_step(i, d, ag, ag8, bh, bl);
}

/// d += A B over one k-group in one TF32 product per k8 step (A's TF32 high halves, B already TF32),
/// accumulated in the tensor cores: Math::fast. Same element order as k_group_3xtf32.
__device__ __forceinline__ void k_group_tf32(float (&d)[4], const Tf32Pair (&ag)[4], const Tf32Pair (&ag8)[4],
                                             const float4& bh) {
  mma_tf32(d, ag[0].hi, ag8[0].hi, ag[1].hi, ag8[1].hi, __float_as_uint(bh.x), __float_as_uint(bh.y));
  mma_tf32(d, ag[2].hi, ag8[2].hi, ag[3].hi, ag8[3].hi, __float_as_uint(bh.z), __float_as_uint(bh.w));
}

/// d += A (16 x 16) * B (16 x 8) in T (half or bfloat16), float accumulation. Each register holds two
/// elements: a0 rows g, inner 2t and 2t + 1; a1 the same of row g + 8; a2, a3 inner 2t + 8 and 2t + 9; b0, b1
/// the same inner indices of column g.
template <class T>
__device__ __forceinline__ void mma_16bit(float (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                          std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, "half or bfloat16");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  if constexpr (std::is_same_v<T, __half>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

/// d += A B over two k16 steps in T: a0 and a1 the A fragments (a0..a3 of m16n8k16) of the two steps, b their
/// B fragments (b0, b1 of the first step, then of the second), as ldmatrix.x4 leaves them.
template <class T>
__device__ __forceinline__ void k_group_16bit(float (&d)[4], const uint4& a0, const uint4& a1, const uint4& b) {
  mma_16bit<T>(d, a0.x, a0.y, a0.z, a0.w, b.x, b.y);
  mma_16bit<T>(d, a1.x, a1.y, a1.z, a1.w, b.z, b.w);
}

/// Four 8 x 8 matrices of 16-bit elements (or 8 x 4 of 32-bit ones) from shared memory: lane l gives the
/// address of row l % 8 of matrix l / 8 and receives, per matrix, the 4 bytes at row l / 4, bytes
/// 4 (l % 4)..: the mma fragments' layout.
__device__ __forceinline__ uint4 ldmatrix_x4(std::uint32_t shared_address) {
  uint4 r{};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // callers run these only on compute capability >= 8.0
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "r"(shared_address)
               : "memory");
#endif
  return r;
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
