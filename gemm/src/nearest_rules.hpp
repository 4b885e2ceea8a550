// Which way gemm::nearest reaches Math::exact for a shape: plain arithmetic on (point type, d, k, wgmma),
// from the measurements its comment gives. nearest.cu applies it with the Context's memory of the last
// re-check's share; the CPU tests check its edges.
#pragma once

#include <skinny/gemm/nearest.hpp>

#include <cstdint>

namespace skinny::gemm::detail {

/// Math::exact through three products per term (the kernel alone) or through one, certified, with the
/// rest re-checked. ExactMethod::automatic takes the second where the products dominate: float points from
/// 64 clusters and d = 16 with k d >= 16384; 16-bit points (read at half the bytes, their exact products at
/// a third of the rate) from d = 64 with k d >= 8192, any k, except that bfloat16 (centres rounded to 8
/// bits: more points left uncertified) also needs d >= 256 or k >= 1024. Below, the kernel
/// reads more than it multiplies, three products cost little more than one, and the re-check's own
/// passes (the second best, the certificate, a wait for the stream) do not pay. H100, 2^20 blobs, ms per
/// iteration three products / re-checked: float d = 128, k = 64 1.20 / 1.21, k = 128 0.94 / 0.85,
/// k = 1024 4.75 / 2.92; d = 16, k = 128 0.47 / 0.49, k = 1024 1.63 / 1.25; d = 2, k = 1024 1.61 / 1.45;
/// half d = 128, k = 64 0.66 / 0.60, k = 1024 2.89 / 1.74; d = 16, k = 1024 1.17 / 1.22; d = 512, k = 16
/// 1.78 / 1.42; bfloat16 d = 64, k = 128 0.48 / 0.56; d = 512, k = 16 1.79 / 1.43. On wgmma (Hopper) three
/// float products cost less next to one, and float points take the re-check from d = 48, or from d = 32
/// with k d >= 65536. H200, 2^20 app blobs, first pass on a half copy, ms per iteration three products /
/// re-checked (bench/results/h200/2026-11-29_exact-half-copy/three_vs_recheck.txt): d = 16, k = 256 0.297
/// / 0.387, k = 1024 0.724 / 0.829; d = 24, k = 1024 0.843 / 0.881; d = 32, k = 1024 0.866 / 0.902,
/// k = 4096 2.74 / 2.52; d = 48, k = 1024 1.24 / 1.04; d = 64, k = 1024 1.33 / 0.87. Row sums (they
/// add the exact kernel's terms) take three products unless the re-check's outputs are given.
/// SKINNY_NEAREST_EXACT=three_products or
/// fast_then_recheck overrides automatic (for benchmarks).
inline bool recheck_pays(const NearestArguments& a, bool wgmma) {
  const bool sixteen_bit = a.x_type != Element::f32;
  if (sixteen_bit)
    return a.d >= 64 && a.k * a.d >= 8192 && (a.x_type == Element::f16 || a.d >= 256 || a.k >= 1024);
  if (a.k < 64 || a.k * a.d < 16384) return false;
  return wgmma ? a.d >= 48 || (a.d >= 32 && a.k * a.d >= 65536) : a.d >= 16;
}

}  // namespace skinny::gemm::detail
