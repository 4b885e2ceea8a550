// Device pieces the fast TSM2 kernels share (tsm2.cu, rm_mma_kernel.cuh, rm_stream_kernel.cuh,
// cm_mma_kernel.cuh): vector types, vector copies into shared memory (cp.async), the kernel arguments,
// the staged pipeline, the alpha/beta store, the B-tile fill.
// Included by tsm2.cu and the kernel headers it includes.
#pragma once

#include <skinny/gemm/cp_async.cuh>

#include <cstdint>

namespace skinny::gemm::detail::tsm2_device {

template <class T, int N>
struct VecOf;
template <> struct VecOf<float, 1> { using type = float; };
template <> struct VecOf<float, 2> { using type = float2; };
template <> struct VecOf<float, 4> { using type = float4; };
template <> struct VecOf<double, 1> { using type = double; };
template <> struct VecOf<double, 2> { using type = double2; };

/// Element e of a vector register (e is a compile-time constant after unrolling).
template <class T, class V>
__device__ __forceinline__ T elem(const V& v, int e) {
  return reinterpret_cast<const T*>(&v)[e];
}

/// Copies one vector V of T from global to shared memory. A whole vector goes as one 16-byte cp.async;
/// a partial one (src_bytes < sizeof(V), at the matrix edge) element by element, each element past
/// src_bytes zero-filled from `any_valid` (a readable address): a 16-byte copy there would address
/// bytes past the allocation even though it reads only src_bytes of them.
template <class T, class V>
__device__ __forceinline__ void copy_vector(V* dst, const T* src, int src_bytes, const T* any_valid) {
  if constexpr (sizeof(V) == sizeof(T)) {
    cp_async<sizeof(T)>(dst, src_bytes > 0 ? src : any_valid, src_bytes);
  } else if (src_bytes == int(sizeof(V))) {
    cp_async<sizeof(V)>(dst, src, src_bytes);
  } else {
#pragma unroll
    for (int e = 0; e < int(sizeof(V) / sizeof(T)); ++e) {
      const bool ok = (e + 1) * int(sizeof(T)) <= src_bytes;
      cp_async<sizeof(T)>(reinterpret_cast<T*>(dst) + e, ok ? src + e : any_valid, ok ? int(sizeof(T)) : 0);
    }
  }
}
/// x as computed once: an empty asm the compiler cannot see through keeps it in a register, where the
/// compiler would otherwise recompute it (from the thread index and the kernel arguments) in every
/// stage of a pipeline loop (seen in the SASS of cm_mma_kernel.cuh: ~50 extra instructions per stage).
__device__ __forceinline__ int kept(int x) {
  asm volatile("" : "+r"(x));
  return x;
}

/// Drops the 128-byte line at p (128-byte aligned) from L2 without writing it back; its contents become
/// undefined. For scratch read for the last time: a dirty line would otherwise go back to DRAM when
/// the next stream of A evicts it, which costs bandwidth the stream needs.
__device__ __forceinline__ void discard_l2_line(const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("discard.global.L2 [%0], 128;" ::"l"(p) : "memory");
#endif
}

template <class T>
struct Args {
  const T* a;
  std::int64_t lda;
  const T* b;
  std::int64_t b_rs, b_cs;
  T* c;
  std::int64_t c_rs, c_cs;
  T* ws;  ///< partial sums [split][rows][cols] (split > 1 only)
  const T* b_image;  ///< B laid out as the tensor-core kernel's shared-memory buffers (rm_mma_kernel.cuh)
  std::int64_t rows, inner, cols;
  std::int64_t chunk;  ///< inner elements per split
  int passes, split;
  T alpha, beta;
};

/// The split of the inner dimension (0 .. split - 1) a row-major kernel's block covers. Blocks that run at
/// the same time are neighbours along x (row groups); with the split given by blockIdx.y alone they
/// would all read the same columns of rows a fixed pitch apart, which on the H100 held float at 89 % of
/// the read ceiling for a 20480-column A (80 KB pitch) against 96 % for 30720. Rotating the split by the
/// row group spreads them over the row. A bijection per row group: every (row group, split) pair is
/// still covered once, and the partial sums keep their split order.
__device__ __forceinline__ int rotated_split(int split, std::int64_t row_group) {
  return static_cast<int>((blockIdx.y + row_group) % split);
}

/// Who reads the copies of a stage, and so the sync each stage needs before it is read (which also
/// frees the slot refilled next): a thread only its own (none), a warp its lanes' (a __syncwarp), the
/// block all of them (a __syncthreads).
enum class StageSync { own, warp, block };

/// The pipeline the ring-buffered TSM2 kernels share. Stage `step` of A sits in ring slot step % S while
/// stages step + 1 .. step + S - 1 are in flight; `issue(step, slot)` queues a stage's cp.async copies.
/// B comes in chunks of SPC stages, double buffered: `fill_chunk(c)` queues chunk c (or nothing past the
/// end) together with the stage that starts chunk c - 1, so one block barrier per chunk makes a chunk
/// visible and frees the other buffer. Between barriers, per stage, kSync says who reads whose copies
/// (StageSync). `compute(slot, kstep, chunk)` uses the stage in `slot`, stage kstep of its B chunk.
/// The caller queues chunk 0 of B before, so it lands with stage 0. `chunk_start(c)` runs at the start of
/// chunk c before its barrier, once this thread's copies of the chunk's first stage have landed (3xTF32
/// splits its raw B there; the other kernels pass nothing).
template <int S, int SPC, StageSync kSync, class Issue, class ChunkStart, class FillChunk, class Compute>
__device__ __forceinline__ void run_stages(std::int64_t nsteps, Issue&& issue, ChunkStart&& chunk_start,
                                           FillChunk&& fill_chunk, Compute&& compute) {
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    issue(s, s);
    cp_async_commit();
  }
  int slot = 0, islot = S - 1;
  // Stage `step` is stage kstep of chunk `chunk`: counted, not divided (a 64-bit division by SPC = 3
  // cost ~15 instructions per stage in the SASS of rm_mma_kernel.cuh).
  int kstep = 0;
  std::int64_t chunk = 0;
  for (std::int64_t step = 0; step < nsteps; ++step) {
    cp_async_wait<S - 2>();  // this thread's copies of stage `step` (and the B chunk queued with it)
    if (kstep == 0) {
      chunk_start(chunk);
      __syncthreads();
      fill_chunk(chunk + 1);
    } else if constexpr (kSync == StageSync::warp) {
      __syncwarp();
    } else if constexpr (kSync == StageSync::block) {
      __syncthreads();
    }
    issue(step + S - 1, islot);
    cp_async_commit();
    islot = islot + 1 == S ? 0 : islot + 1;
    compute(slot, kstep, chunk);
    slot = slot + 1 == S ? 0 : slot + 1;
    if (++kstep == SPC) {
      kstep = 0;
      ++chunk;
    }
  }
  cp_async_wait<0>();
}
template <int S, int SPC, StageSync kSync, class Issue, class FillChunk, class Compute>
__device__ __forceinline__ void run_stages(std::int64_t nsteps, Issue&& issue, FillChunk&& fill_chunk,
                                           Compute&& compute) {
  run_stages<S, SPC, kSync>(nsteps, issue, [](std::int64_t) {}, fill_chunk, compute);
}

template <class T>
__device__ __forceinline__ void store_c(const Args<T>& g, std::int64_t i, std::int64_t j, T acc) {
  T* out = g.c + i * g.c_rs + j * g.c_cs;
  *out = g.beta == T(0) ? g.alpha * acc : g.alpha * acc + g.beta * *out;
}

/// Result (i, j) of the kernel's split `split`: C itself (alpha, beta) when the inner dimension is not
/// split, else its partial sum in the workspace [split][rows][cols], added up by tsm2_reduce_kernel.
template <class T>
__device__ __forceinline__ void store_result(const Args<T>& g, int split, std::int64_t i, std::int64_t j, T v) {
  if (g.split == 1)
    store_c(g, i, j, v);
  else
    g.ws[(static_cast<std::int64_t>(split) * g.rows + i) * g.cols + j] = v;
}

/// Element idx (0 .. KC x T2 - 1) of a chunk of B as (column j, inner offset pp), ordered so that
/// consecutive idx are consecutive addresses of B: j fastest when B is row-major (b_cs == 1), else pp
/// (a 4-byte gather across B's rows would fetch a 32-byte sector per element).
template <int KC, int T2>
__device__ __forceinline__ void b_chunk_element(int idx, bool j_fast, int& j, int& pp) {
  pp = j_fast ? idx / T2 : idx % KC;
  j = j_fast ? idx % T2 : idx / KC;
}

/// Queues the copy of the chunk of B (b, element (p, j) at b[p * b_rs + j * b_cs], cols columns)
/// starting at inner index p0 into a shared tile, zero outside inner x cols: tile[pp * T2 + j]
/// (column-major kernel) or tile[j * LDT + pp] (row-major kernels, B^T). Consecutive threads take
/// consecutive addresses of B (along j when B is row-major).
template <class T, int KC, int T2, bool kTransposed, int LDT>
__device__ __forceinline__ void fill_b(T* tile, const T* b, std::int64_t b_rs, std::int64_t b_cs, std::int64_t cols,
                                       std::int64_t p0, std::int64_t p_end, std::int64_t j0, int tid, int nthreads) {
  if constexpr (kTransposed) {
    // B^T rows are runs of B's columns: with B column-major and aligned, 16-byte copies (a quarter or
    // half of the instructions; a block of the row-at-a-time kernel copies 16 KB of B^T per 512 KB of A).
    constexpr int VEC = 16 / int(sizeof(T));
    using V = typename VecOf<T, VEC>::type;
    if (b_rs == 1 && b_cs % VEC == 0 && p0 % VEC == 0 && reinterpret_cast<std::uintptr_t>(b) % 16 == 0 &&
        KC % VEC == 0 && LDT % VEC == 0) {
      for (int idx = tid; idx < T2 * (KC / VEC); idx += nthreads) {
        const int j = idx / (KC / VEC), pp = idx % (KC / VEC) * VEC;
        const std::int64_t p = p0 + pp, jc = j0 + j, left = p_end - p;
        const int nb = jc >= cols || left <= 0 ? 0 : (left >= VEC ? VEC : static_cast<int>(left)) * int(sizeof(T));
        copy_vector(reinterpret_cast<V*>(tile + j * LDT + pp), nb > 0 ? b + p + jc * b_cs : b, nb, b);
      }
      return;
    }
  }
  const bool j_fast = b_cs == 1;
  for (int idx = tid; idx < KC * T2; idx += nthreads) {
    int j, pp;
    b_chunk_element<KC, T2>(idx, j_fast, j, pp);
    const std::int64_t p = p0 + pp, jc = j0 + j;
    const bool ok = p < p_end && jc < cols;
    const T* src = ok ? b + p * b_rs + jc * b_cs : b;
    T* dst = kTransposed ? tile + j * LDT + pp : tile + pp * T2 + j;
    cp_async<sizeof(T)>(dst, src, ok ? int(sizeof(T)) : 0);
  }
}
template <class T, int KC, int T2, bool kTransposed, int LDT>
__device__ __forceinline__ void fill_b(T* tile, const Args<T>& g, std::int64_t p0, std::int64_t p_end,
                                       std::int64_t j0, int tid, int nthreads) {
  fill_b<T, KC, T2, kTransposed, LDT>(tile, g.b, g.b_rs, g.b_cs, g.cols, p0, p_end, j0, tid, nthreads);
}

}  // namespace skinny::gemm::detail::tsm2_device
