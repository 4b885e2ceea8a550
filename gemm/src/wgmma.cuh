// Hopper's warpgroup matrix multiply (wgmma, sm_90a) for the fused nearest-centre kernel: a warpgroup
// (4 consecutive warps, 128 threads) multiplies a 64-row tile of A by the first 32, 64 or 128 rows of a
// 128-row tile of B, both read from shared memory through descriptors (or A from registers, TF32), into up
// to 64 float accumulators per thread.
//
// The tiles are K-major with 128-byte rows swizzled as the hardware's 128-byte mode expects: 16-byte chunk
// c of row r is stored at chunk c ^ (r % 8), and each group of 8 rows (1024 bytes) starts 1024-byte aligned
// (the layout of nearest.cu's ring). A k-step (8 TF32 or 16 16-bit elements, 32 bytes) further along the
// rows is the same descriptor with its start address 32 bytes on.
//
// The instructions exist only for the sm_90a target (__CUDA_ARCH_FEAT_SM90_ALL); other targets compile
// these helpers to a trap, and the host asks wgmma_compiled (a kernel of the same module) before using them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace skinny::gemm::detail {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SKINNY_WGMMA 1
#endif

/// The descriptor of a K-major tile with kRowBytes-byte swizzled rows (128: the 128-byte mode; 64: the
/// 64-byte mode, chunk c of row r at c ^ (r / 2 % 4)) at shared address `addr`: rows 8 apart are 8
/// kRowBytes apart (stride byte offset), the leading byte offset is unused in these modes.
template <int kRowBytes = 128>
__device__ __forceinline__ std::uint64_t wgmma_descriptor(std::uint32_t addr) {
  static_assert(kRowBytes == 128 || kRowBytes == 64, "128- or 64-byte swizzled rows");
  constexpr std::uint64_t mode = kRowBytes == 128 ? 1 : 2;
  return static_cast<std::uint64_t>((addr & 0x3ffffu) >> 4) | (std::uint64_t{1} << 16) |
         (std::uint64_t{8 * kRowBytes >> 4} << 32) | (mode << 62);
}

/// The descriptor `desc` moved on by `bytes` (a multiple of 16): shared addresses stay under 2^18, so the
/// address field (bits 4-17 of the address, in the low word) takes bytes / 16 without a carry out of it.
__device__ __forceinline__ std::uint64_t wgmma_descriptor_plus(std::uint64_t desc, std::uint32_t bytes) {
  return (desc & 0xffffffff00000000ull) | (static_cast<std::uint32_t>(desc) + (bytes >> 4));
}

/// Orders this thread's earlier accesses to the accumulators (and shared memory written by cp.async)
/// before the warpgroup's next wgmma.
__device__ __forceinline__ void wgmma_fence() {
#ifdef SKINNY_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

/// Makes this thread's generic-proxy writes to shared memory (cp.async) visible to the tensor cores'
/// reads, which go through the async proxy; before the barrier that hands the tile over.
__device__ __forceinline__ void fence_proxy_async_shared() {
#ifdef SKINNY_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/// Closes the wgmmas issued so far into a group.
__device__ __forceinline__ void wgmma_commit() {
#ifdef SKINNY_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

/// Waits until at most N of the warpgroup's committed groups are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef SKINNY_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

/// After wgmma_wait: the accumulators' registers are read from here on, not earlier (the compiler sees
/// the wgmma's outputs where it is issued, not where it completes).
__device__ __forceinline__ void wgmma_settled(float (&d)[16][4]) {
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[j][e])::"memory");
}

/// The tensor memory accelerator (TMA) fills a stage: one thread queues the copy of a 2D box of a tensor
/// (tensor map in kernel parameter space) into shared memory, written in the 128-byte swizzle above, and
/// the stage's mbarrier completes when its bytes have landed; zeros where the box leaves the tensor.
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, unsigned count) {
#ifdef SKINNY_WGMMA
  const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(a), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

/// The next phase of `bar` completes once `bytes` have arrived (this thread's arrival counts as the one).
__device__ __forceinline__ void mbarrier_expect_bytes(std::uint64_t* bar, unsigned bytes) {
#ifdef SKINNY_WGMMA
  const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(a), "r"(bytes) : "memory");
#endif
}

/// Waits until the phase of `bar` with this parity has completed.
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, unsigned parity) {
#ifdef SKINNY_WGMMA
  const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait;\n"
      "}\n" ::"r"(a),
      "r"(parity)
      : "memory");
#endif
}

/// Queues the box at (inner, row) of the 2D tensor `map` into `dst` (1024-byte aligned), completing on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const void* map, int inner, int row, std::uint64_t* bar) {
#ifdef SKINNY_WGMMA
  const auto d = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  const auto b = static_cast<std::uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
          "r"(d),
      "l"(map), "r"(inner), "r"(row), "r"(b)
      : "memory");
#endif
}

#define SKINNY_WGMMA_D                                                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "  \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define SKINNY_WGMMA_D_OPERANDS(d)                                                                             \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),     \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), \
      "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), \
      "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), \
      "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), \
      "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]),               \
      "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]),           \
      "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]),           \
      "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]),           \
      "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])

#define SKINNY_WGMMA_D16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define SKINNY_WGMMA_D32                                                                                     \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define SKINNY_WGMMA_D16_OPERANDS(d) \
      "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), \
      "+f"(d[3][2]), "+f"(d[3][3])
#define SKINNY_WGMMA_D32_OPERANDS(d) \
      "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), \
      "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), \
      "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), \
      "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])

/// The wgmma's scale-d predicate from `accumulate` (operand N): false makes d = A B^T, which saves
/// clearing the accumulators' registers before a new sum.
#define SKINNY_WGMMA_SCALE_D(N) "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %" #N ", 0;\n"

/// One wgmma of N columns, both operands from shared memory: TF32 for float (k8), half or bfloat16 (k16).
#define SKINNY_WGMMA_SS(N, DLIST, DOPS, A, B, S)                                                              \
  if constexpr (std::is_same_v<T, float>) {                                                                   \
    asm volatile(SKINNY_WGMMA_SCALE_D(S) "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 " DLIST      \
                                         ", %" #A ", %" #B ", accumulate, 1, 1;\n}\n"                          \
                 : DOPS(d)                                                                                     \
                 : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));                                         \
  } else if constexpr (std::is_same_v<T, __half>) {                                                           \
    asm volatile(SKINNY_WGMMA_SCALE_D(S) "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.f16.f16 " DLIST       \
                                         ", %" #A ", %" #B ", accumulate, 1, 1, 0, 0;\n}\n"                    \
                 : DOPS(d)                                                                                     \
                 : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));                                         \
  } else {                                                                                                    \
    asm volatile(SKINNY_WGMMA_SCALE_D(S) "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 " DLIST     \
                                         ", %" #A ", %" #B ", accumulate, 1, 1, 0, 0;\n}\n"                    \
                 : DOPS(d)                                                                                     \
                 : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));                                         \
  }

/// One TF32 wgmma of N columns with A from registers (AREGS: their four operands, then B's).
#define SKINNY_WGMMA_RS_TF32(N, DLIST, DOPS, AREGS, S)                                                        \
  asm volatile(SKINNY_WGMMA_SCALE_D(S) "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 " DLIST        \
                                       ", " AREGS ", accumulate, 1, 1;\n}\n"                                   \
               : DOPS(d)                                                                                       \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(static_cast<int>(accumulate)));

/// d += A B^T over the first N (32, 64 or 128) of B's 128 rows, one product per term: TF32 for float
/// elements (the tensor cores read their top 19 bits), or half / bfloat16. A is the warpgroup's 64 rows, one
/// k-step. This thread's d[j][e]: n8 tile j, rows g and g + 8, columns 2t and 2t + 1, as mma.sync's m16n8
/// fragments of the warp's 16 rows; a narrower N writes the first N / 8 tiles and leaves the others (tiles
/// with fewer live centres: a half or a quarter of the tensor-core work). accumulate false: d = A B^T (d's
/// old values are not read).
template <class T, int N>
__device__ __forceinline__ void wgmma_m64n(float (&d)[16][4], std::uint64_t a, std::uint64_t b,
                                           bool accumulate = true) {
  static_assert(N == 32 || N == 64 || N == 128, "32, 64 or 128 columns");
#ifdef SKINNY_WGMMA
  if constexpr (N == 128) {
    SKINNY_WGMMA_SS(128, SKINNY_WGMMA_D, SKINNY_WGMMA_D_OPERANDS, 64, 65, 66)
  } else if constexpr (N == 64) {
    SKINNY_WGMMA_SS(64, SKINNY_WGMMA_D32, SKINNY_WGMMA_D32_OPERANDS, 32, 33, 34)
  } else {
    SKINNY_WGMMA_SS(32, SKINNY_WGMMA_D16, SKINNY_WGMMA_D16_OPERANDS, 16, 17, 18)
  }
#else
  __trap();  // the host runs these only where wgmma_compiled says so
#endif
}

/// d += A B^T as wgmma_m64n<float, N>, with this warp's 16 rows of A (one k-step of 8 TF32 elements) from
/// registers: a[0] row g, inner t; a[1] row g + 8, inner t; a[2], a[3] the same at inner t + 4 (mma.sync's
/// m16n8k8 A fragment). The registers must stay unchanged until the wgmma completes.
template <int N>
__device__ __forceinline__ void wgmma_m64n_tf32_regs(float (&d)[16][4], const std::uint32_t (&a)[4], std::uint64_t b,
                                                     bool accumulate = true) {
  static_assert(N == 32 || N == 64 || N == 128, "32, 64 or 128 columns");
#ifdef SKINNY_WGMMA
  if constexpr (N == 128) {
    SKINNY_WGMMA_RS_TF32(128, SKINNY_WGMMA_D, SKINNY_WGMMA_D_OPERANDS, "{%64, %65, %66, %67}, %68", 69)
  } else if constexpr (N == 64) {
    SKINNY_WGMMA_RS_TF32(64, SKINNY_WGMMA_D32, SKINNY_WGMMA_D32_OPERANDS, "{%32, %33, %34, %35}, %36", 37)
  } else {
    SKINNY_WGMMA_RS_TF32(32, SKINNY_WGMMA_D16, SKINNY_WGMMA_D16_OPERANDS, "{%16, %17, %18, %19}, %20", 21)
  }
#else
  __trap();
#endif
}

#undef SKINNY_WGMMA_SCALE_D
#undef SKINNY_WGMMA_D
#undef SKINNY_WGMMA_D_OPERANDS
#undef SKINNY_WGMMA_D16
#undef SKINNY_WGMMA_D32
#undef SKINNY_WGMMA_D16_OPERANDS
#undef SKINNY_WGMMA_D32_OPERANDS
#undef SKINNY_WGMMA_SS
#undef SKINNY_WGMMA_RS_TF32

}  // namespace skinny::gemm::detail
