// The assignment's routes that are plain arithmetic on the shape, each from the measurements its comment
// gives: where float points take the fused nearest kernel, where fast mode takes cuBLAS's TF32 GEMM
// instead, where one pass over X pays, and where 16-bit data takes the few-clusters kernels. lloyd.cu asks
// the device what it has (wgmma, free memory), reads the benchmarks' environment switches and applies
// these; the CPU tests check them.
#pragma once

#include <skinny/gemm/nearest.hpp>

#include <cstdint>

namespace skinny::kmeans::detail {

/// From this many float clusters on, Algo::automatic computes distances and argmin in one fused tensor-core
/// kernel (gemm::nearest): the cross term is then compute bound, and the n x k distances need not be
/// written and read back. Exact products pay from 32 clusters where they run on wgmma (Hopper), from 128 on
/// mma.sync; rows under 8 floats from 16 clusters in either mode, where the GEMM's distances are slow. H200,
/// 2^20 blobs, ms per iteration, fused / GEMM and argmin (bench/results/h200/2026-11-28_exact-wgmma):
/// exact d = 16, k = 16 0.295 / 0.234, k = 32 0.290 / 0.388, k = 64 0.301 / 0.648; d = 128, k = 16 0.854 /
/// 0.571, k = 32 0.670 / 0.797; d = 512, k = 32 1.89 / 1.83, k = 64 1.87 / 2.77; fast d = 2, k = 8 0.225 /
/// 0.238, k = 16 0.216 / 0.403; d = 4, k = 8 0.232 / 0.153, k = 16 0.245 / 0.410; d = 16, k = 16 0.250 /
/// 0.229. Since the fused kernel's ring of few centres (stages of 32 centre rows), on wgmma from 16 clusters
/// where rows have 128 floats or more (H200, 1M points unless said, exact / fast; bench/results/h200/
/// 2026-11-28_few-centres-ring): k = 16, d = 128 0.51 / 0.48 against 0.55 / 0.55; d = 512 1.24 / 1.22
/// against 1.35 / 1.34; d = 1024 exact 2.20 against 2.39; 262144 x 4096 2.15 / 2.13 against 2.27 / 2.26.
/// Not below: 262144 x 4096, k = 8 fast 2.13 against 2.10, k = 2 2.31 against 2.12; d = 16, k = 8 0.23
/// against 0.18. Protected fits keep 32 there: their fused kernel (with row sums) keeps the wide ring, and
/// the protected GEMM below 32 clusters is what Params::protect's cost was measured on.
/// Since the update moves only the points whose label changed (its read of X gone once labels settle),
/// rows of 128 floats or more on wgmma take the fused kernel for any k in fast mode (on its half copy;
/// where the one pass does not take the shape first), and in exact mode from 9 clusters up to 512
/// dimensions (262144 x 4096, k = 12 on an H100: TSM2 1.773, fused 1.808). H200, mean ms of
/// 20 iterations from random starts, app's blobs, TSM2 and the update / fused and the update
/// (bench/results/h200/2026-12-07_few-clusters/ab_ad6de38.txt): exact 1M x 128, k = 8 0.272 / 0.297,
/// k = 12 0.430 / 0.311; 1M x 512, k = 8 0.712 / 0.734, k = 12 1.248 / 0.797; 262144 x 4096, k = 8
/// 1.221 / 1.329; fast 1M x 128, k = 4 0.260 / 0.228, k = 12 0.430 / 0.241; 1M x 512, k = 4 0.722 / 0.486;
/// 262144 x 4096, k = 2 2.048 / 1.622 (3 iterations), k = 8 1.223 / 0.788.
constexpr std::int64_t kFusedMinClusters = 32;
constexpr std::int64_t kFusedWideRowsMinClusters = 16;
constexpr std::int64_t kFusedWideRowsExactMinClusters = 9;
constexpr std::int64_t kFusedWideRowsExactMaxDims = 512;
constexpr std::int64_t kFusedWideRowsMinDims = 128;
constexpr std::int64_t kFusedMmaSyncExactMinClusters = 128;
constexpr std::int64_t kFusedNarrowMinClusters = 16;
constexpr std::int64_t kFusedNarrowMaxDims = 7;

/// The fewest float clusters from which the fused kernel takes the distances (the rule above): `wgmma`,
/// whether it runs on Hopper's wgmma; `protect`, a fit with Params::protect.
inline std::int64_t fused_min_float_clusters(std::int64_t d, gemm::Math math, bool wgmma, bool protect) {
  if (d <= kFusedNarrowMaxDims) return kFusedNarrowMinClusters;
  if (wgmma && d >= kFusedWideRowsMinDims && !protect) {
    if (math == gemm::Math::fast) return 1;
    return d <= kFusedWideRowsExactMaxDims ? kFusedWideRowsExactMinClusters : kFusedWideRowsMinClusters;
  }
  return wgmma || math == gemm::Math::fast ? kFusedMinClusters : kFusedMmaSyncExactMinClusters;
}

/// Float points in fast mode with many clusters of many dimensions: cuBLAS's TF32 GEMM (Hopper's wgmma) and
/// then the argmin beat the fused kernel (mma.sync), though they write and read the n x k cross terms. Their
/// chunks hold 512 MiB of cross terms: with the argmin's usual 32 MiB (L2-resident) the GEMMs were too short
/// at d = 512 (103 against 64.7 ms at k = 8192). H100, 2^20 points, fast float, ms per iteration, this route
/// / the fused kernel, one run each (bench/results/h100/2026-11-27_tf32-chunks): d = 512, k = 2048 11.6 /
/// 16.0, k = 8192 51.0 / 63.5; d = 1024, k = 8192 78.9 / 123.0; d = 4096, k = 1024 31.2 / 67.7 (grid at
/// 82e8b0e). A PyTorch Lloyd on TF32 (H200, bench/results/h200/2026-11-27_tf32-gemm): 12.8, 47.1, 73.9, 56.0.
/// The fused kernel stays ahead with fewer clusters or dimensions: d = 512, k = 1024 7.5 against PyTorch's
/// 8.4; d = 4096, k = 128 12.7 against 29.5; d = 128, k = 8192 15.5 against 31.0. Where fast mode reads a
/// half copy of X (lloyd.cu: half_copy_candidate), the fused kernel's half products beat this route: H200,
/// 2^20 points, d = 512, k = 8192, 16-bit products 14.1 ms of distances against 44.9 ms per iteration here
/// (bench/results/h200/2026-11-29_fast-half-copy).
constexpr std::int64_t kTf32GemmMinDims = 512;
constexpr std::int64_t kTf32GemmMinClusters = 1024;
constexpr std::int64_t kTf32GemmMinTerms = std::int64_t(1) << 20;  // k d

/// Whether fast mode takes the TF32 GEMM and the argmin instead of the fused kernel (the rule above).
inline bool tf32_gemm_beats_fused(bool float_points, std::int64_t d, std::int64_t k, gemm::Math math) {
  return float_points && math == gemm::Math::fast && d >= kTf32GemmMinDims && k >= kTf32GemmMinClusters &&
         k * d >= kTf32GemmMinTerms;
}

/// Where fit takes the one-pass kernel (detail::assign_and_sum): float up to kOnePassFloatMaxClusters
/// clusters and kOnePassFloatMaxDims dimensions (one block per row's columns), 16-bit data wherever the
/// kernel applies; both from kOnePassMinDims dimensions (below, its blocks' 128 columns are mostly
/// padding). There it beats TSM2's distances plus the update's own read of X. H100, one run, one pass /
/// two passes through TSM2, ms per iteration: 1048576 x 128, k = 2 0.41 / 0.69, k = 4 0.39 / 0.69, k = 8
/// 0.44 / 0.70, k = 16 0.83 / 0.63; 1048576 x 512, k = 4 1.11 / 1.57; 262144 x 4096, k = 4 2.91 / 2.94,
/// k = 8 3.66 / 2.95, k = 16 4.6 / 3.0. 16-bit data: 262144 x 4096, k = 16, half 4.47 / 6.95 (7.4 with
/// few_nearest); 1048576 x 512 half, k = 8 1.03 / 3.65; 1048576 x 16 half, k = 16 0.79 against 0.65 with
/// few_nearest and the update (bench/results/h100/2026-11-25_one-pass). Since the update moves only changed
/// points, float on wgmma keeps the one pass for at most 2 clusters, where fits end in a few iterations
/// that move many points (H200, the measurements of the fused rule above, one pass / TSM2 / fused: exact
/// 1M x 128, k = 2 0.338 / 0.388 / 0.444 (3 iterations), k = 4 0.344 / 0.255 / 0.299; 1M x 512, k = 2 0.920
/// / 1.212 / 1.454, k = 4 0.972 / 0.716 / 0.951; fast 1M x 512, k = 2 0.915 / 1.217 / 1.012).
constexpr std::int64_t kOnePassFloatMaxClusters = 8;
constexpr std::int64_t kOnePassFloatWgmmaMaxClusters = 2;
constexpr std::int64_t kOnePassFloatMaxDims = 512;
constexpr std::int64_t kOnePassMinDims = 128;

/// Whether the one pass is faster than the two for this shape (the rule above; whether the kernel can run
/// it is assign_and_sum_applies); `wgmma`: whether gemm::nearest runs on Hopper's wgmma.
inline bool one_pass_beats_two(bool sixteen_bit, std::int64_t d, std::int64_t k, bool wgmma) {
  if (d < kOnePassMinDims) return false;
  const std::int64_t float_max = wgmma ? kOnePassFloatWgmmaMaxClusters : kOnePassFloatMaxClusters;
  return sixteen_bit || (k <= float_max && d <= kOnePassFloatMaxDims);
}

/// Rows of at most this many values take detail::narrow_nearest in exact mode for any number of clusters
/// (squared differences summed on the FMA units: an exact argmin's labels), and in fast mode up to
/// kNarrowFastAnyClustersMaxDims dimensions for any number, or with up to kNarrowFastMaxClusters: there the
/// fused kernel's compare per padded distance bounds it, and its one-product distances lose the labels'
/// last digits to cancellation. Fast mode from kNarrowExpandedMinDims dimensions takes the kernel's
/// expanded form, ||c||^2 - 2 x.c, d multiply-adds a distance instead of a subtraction and a multiply-add
/// per dimension; below it the differences, whose exact labels cost 1-2 % there. At d = 4 with 8192
/// clusters the fused kernel's one half product per term is still faster. H100, 2^20 float points, ms per
/// iteration (bench/results/h100/2026-12-07_narrow-rows, ..._moves): exact d = 2, k = 1024 fused 0.769 ->
/// narrow 0.382, k = 8192 4.84 -> 2.56; d = 4, k = 8192 4.87 -> 3.85; fast, fused / differences /
/// expanded: d = 2, k = 8192 3.00 / 2.59 / 2.54; d = 3, k = 1024 0.617 / 0.485 / 0.392, k = 8192 3.02 /
/// 3.31 / 2.58; d = 4, k = 1024 0.620 / 0.560 / 0.461, k = 8192 3.05 / 3.85 / 3.18 (fused / expanded:
/// k = 2048 0.966 / 0.921, k = 4096 1.657 / 1.664; the bound stays at the 1024 measured first).
constexpr std::int64_t kNarrowRowsMaxDims = 4;
constexpr std::int64_t kNarrowFastAnyClustersMaxDims = 3;
constexpr std::int64_t kNarrowFastMaxClusters = 1024;
constexpr std::int64_t kNarrowExpandedMinDims = 3;

/// Whether fast mode on rows of d values takes narrow_nearest's expanded form (the rule above).
inline bool narrow_expanded_pays(std::int64_t d) { return d >= kNarrowExpandedMinDims; }

/// Whether rows of d values with k clusters take detail::narrow_nearest in `math` (the rule above).
inline bool narrow_rows_pay(std::int64_t d, std::int64_t k, gemm::Math math) {
  if (d > kNarrowRowsMaxDims) return false;
  return math == gemm::Math::exact || d <= kNarrowFastAnyClustersMaxDims || k <= kNarrowFastMaxClusters;
}

/// Most clusters for which 16-bit data takes the few-clusters kernels, and from how many dimensions: below,
/// or with more clusters, gemm::nearest on the 16-bit rows is faster (H100, 2^20 points, ms per iteration,
/// few-clusters kernels at k = 16 against gemm::nearest at k = 128, half: d = 2 0.56 / 0.33, d = 16 0.65 /
/// 0.38, d = 128 0.82 / 0.46, d = 512 1.74 / 1.04; at k = 2: d = 16 0.64 / 0.38 (nearest at k = 128), d = 128
/// 0.47 / 0.46, d = 512 0.85 / 1.04; bench/results/h100/2026-11-27_kmeans-16bit).
constexpr std::int64_t kFewClusters16BitMax = 8;
constexpr std::int64_t kFewClusters16BitMinDims = 128;

/// Where, on wgmma, gemm::nearest's ring of few centres and the update's own read of X beat the one pass
/// for 16-bit data within the rule above, since the update moves only changed points: from 3 clusters
/// (exact mode: from 5 where rows have 256 values or more), and in fast mode from 1024 dimensions for any
/// k. H200, mean ms of 20 iterations from random starts, app's blobs, one pass / fused and the update
/// (bench/results/h200/2026-12-07_few-clusters/ab_ad6de38.txt): half exact 1M x 128, k = 2 0.321 / 0.444
/// (3 iterations), k = 4 0.335 / 0.305, k = 8 0.395 / 0.295; 1M x 512, k = 2 0.586 / 1.014, k = 4 0.644 /
/// 0.725, k = 8 0.907 / 0.692; 262144 x 4096, k = 2 1.385 / 1.663; half fast 1M x 128, k = 2 0.324 / 0.527,
/// k = 4 0.334 / 0.244; 1M x 512, k = 2 0.589 / 0.829, k = 4 0.657 / 0.496. Before (bench/results/h200/
/// 2026-11-28_few-centres-ring), fast 262144 x 4096 with any k and 1M x 1024, k = 4 took the fused kernel.
constexpr std::int64_t kFusedFast16BitMinDims = 1024;
constexpr std::int64_t kOnePass16BitWgmmaMaxClusters = 2;
constexpr std::int64_t kOnePass16BitExactWideMaxClusters = 4;
constexpr std::int64_t kOnePass16BitExactWideMinDims = 256;

/// Whether 16-bit data whose rows gemm::nearest reads takes the few-clusters kernels (the rules above).
inline bool few_clusters_16bit(std::int64_t d, std::int64_t k, gemm::Math math, bool wgmma) {
  if (k > kFewClusters16BitMax || d < kFewClusters16BitMinDims) return false;
  if (!wgmma) return true;
  if (math == gemm::Math::fast) return d < kFusedFast16BitMinDims && k <= kOnePass16BitWgmmaMaxClusters;
  return k <= kOnePass16BitWgmmaMaxClusters ||
         (k <= kOnePass16BitExactWideMaxClusters && d >= kOnePass16BitExactWideMinDims);
}

}  // namespace skinny::kmeans::detail
