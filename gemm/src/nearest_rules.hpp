// gemm::nearest's choices that are plain arithmetic on the shape, from the measurements their comments
// give: which way it reaches Math::exact (nearest.cu applies it with the Context's memory of the last
// re-check's share), and how the point blocks share out the centre tiles. The CPU tests check their edges.
#pragma once

#include <skinny/gemm/nearest.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>

namespace skinny::gemm::detail {

/// Math::exact through three products per term (the kernel alone) or through one, certified, with the
/// rest re-checked. ExactMethod::automatic takes the second where the products dominate: float points from
/// 64 clusters and d = 16 with k d >= 16384; 16-bit points (read at half the bytes, their exact products at
/// a third of the rate) from d = 64 with k d >= 8192, any k, except that bfloat16 (centres rounded to 8
/// bits: more points left uncertified) also needs d >= 256 or k >= 1024 unless its first pass reads a half
/// copy (NearestArguments::x_half: centres rounded to half's 11 bits). Below, the kernel
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
    return a.d >= 64 && a.k * a.d >= 8192 &&
           (a.x_type == Element::f16 || a.x_half != nullptr || a.d >= 256 || a.k >= 1024);
  if (a.k < 64 || a.k * a.d < 16384) return false;
  return wgmma ? a.d >= 48 || (a.d >= 32 && a.k * a.d >= 65536) : a.d >= 16;
}

/// How a re-check's first pass took its one product per term: 16-bit points as they are, float points in
/// TF32, or float points on their half copy (their three products then 3xTF32 against half products).
enum class FirstPass { sixteen_bit, tf32, half_copy };

/// Re-checking a point on its candidates costs about one product per term against k + kCollectExtraCentres
/// centres: the collecting pass, and per point its gathered row and candidates_kernel's sums in double over
/// its candidates. H100, the K-means benchmark's bfloat16 blobs, 2^20 points, k = 1024: the first pass over
/// all points 0.78 ms, the candidates' re-check of the 80 % it left 2.22 ms at d = 128 (three products for
/// them: 1.75 ms); 2.07 and 6.40 ms (91 %) at d = 512 (bench/results/h100/2026-12-07_candidates). Measured
/// with candidates_kernel taking one candidate after another; it now sums them all at once (to measure).
constexpr double kCollectExtraCentres = 2600;

/// The cost of re-checking a point on its candidates as a share of re-checking it with three products
/// (ExactMethod::automatic's weight of such points in Context::NearestRecheck::cost_share; below 1 the
/// candidates pay). Three products cost about three one-product passes over a point with 16-bit points,
/// two where float points' first pass is TF32 and four where it is their half copy (a whole iteration at
/// 2^20 x 512, k = 8192: 77 ms three products against 19 ms fast): the candidates pay from about k = 1300,
/// 2600 and 870 centres.
inline double candidate_weight(FirstPass first, std::int64_t k) {
  const double three = first == FirstPass::half_copy ? 4.0 : first == FirstPass::tf32 ? 2.0 : 3.0;
  return (1 + kCollectExtraCentres / static_cast<double>(k)) / three;
}

/// Shares of the centre tiles per block of `block_rows` points (m points, `tiles` tiles of `tile_cols`
/// centres, `sms` SMs of two resident blocks each). First, enough that the blocks fill two waves where the
/// point blocks alone fill less. Second, where rows of row_bytes >= 4 KB would make the points of the
/// blocks resident at once outgrow L2 (every block reads its points again for each centre tile; 1M x 4096
/// half: 264 blocks of 1 MB, the reads went to memory at 300 TFLOPS against 460 at d = 512): enough that
/// those points take at most kResidentPointBytes, if the tiles the shares read at once (centre_row_bytes a
/// centre) take at most kResidentCentreBytes (three-part centres of 4096 16-bit values, 3 MB a tile,
/// thrashed L2 with 16 shares: 1M x 4096, k = 8192, exact 432 -> 817 ms) and the keys (12 bytes a point a
/// share) at most kSharedKeysBytes. H100, 512K x 4096 unless said, fast, ms per iteration without / with
/// (bench/results/h100/2026-12-07_l2-shares): half k = 1024 12.8 / 9.6, k = 8192 108 / 79; float on its
/// half copy 13.8 / 10.6, 110 / 81; 1M x 2048 half, k = 1024 11.9 / 9.0. Whole shares of equal tile
/// counts: ceil(tiles / ceil(tiles / wanted)).
constexpr std::int64_t kL2SharesMinRowBytes = 4096;
constexpr std::int64_t kResidentPointBytes = std::int64_t(16) << 20;
constexpr std::int64_t kResidentCentreBytes = std::int64_t(16) << 20;
constexpr std::int64_t kSharedKeysBytes = std::int64_t(1) << 30;

inline std::int64_t centre_shares(std::int64_t m, std::int64_t tiles, int sms, std::int64_t block_rows,
                                  std::int64_t tile_cols, std::int64_t row_bytes, std::int64_t centre_row_bytes) {
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  const auto whole = [&](std::int64_t wanted) { return ceil_div(tiles, ceil_div(tiles, wanted)); };
  const std::int64_t blocks = ceil_div(m, block_rows);
  std::int64_t wanted = ceil_div(4LL * sms, blocks);
  if (row_bytes >= kL2SharesMinRowBytes) {
    const std::int64_t resident_bytes = 2LL * sms * block_rows * row_bytes;
    const std::int64_t by_memory = kSharedKeysBytes / (m * 12);
    const std::int64_t most = std::max<std::int64_t>(1, std::min(by_memory, tiles));
    const std::int64_t l2 = std::clamp<std::int64_t>(ceil_div(resident_bytes, kResidentPointBytes), 1, most);
    if (whole(l2) * tile_cols * centre_row_bytes <= kResidentCentreBytes) wanted = std::max(wanted, l2);
  }
  wanted = std::min<std::int64_t>({tiles, std::max<std::int64_t>(1, wanted), 65535, INT_MAX / blocks});
  return whole(wanted);
}

}  // namespace skinny::gemm::detail
