// How a streamed fit shares a device-memory budget out (pure arithmetic, tested on the CPU): what
// stays whatever the rows, whether the per-point arrays stay on the device, rows per chunk and the
// initialisation's sample; and fit's own estimate, which decides whether a problem needs streaming.
#pragma once

#include <skinny/kmeans/kmeans.hpp>
#include <skinny/kmeans/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace skinny::kmeans::detail {

/// Device bytes the plan sets aside for the libraries' own scratch (cuBLAS and TSM2 workspaces, thrust's
/// temporaries), which they allocate themselves.
constexpr std::size_t kLibraryScratchBytes = std::size_t(64) << 20;
/// Chunks of X larger than this gain nothing: a chunk's fixed costs (a few launches and events, some
/// microseconds) are already below 1 % of its copy at PCIe speeds.
constexpr std::size_t kTargetChunkBytes = std::size_t(256) << 20;
/// The k-means++ / k-means|| sample the planner keeps room for before it grows the chunks (or k rows
/// when the budget holds no more).
constexpr std::int64_t kMinInitSampleRows = 65536;

/// The facts of a problem the plan depends on.
struct StreamProblem {
  std::int64_t n = 0, d = 0, k = 0;
  int elem_bytes = 4;
  bool weighted = false;
  bool fused = false;                  ///< the assignment runs through gemm::nearest (else GEMM + argmin)
  Init init = Init::kmeans_plus_plus;  ///< resolved (resolve_init)
  double init_oversampling = 2.0;
  int init_rounds = 5;
};

/// The plan for `budget` device bytes: the chunk rows requested (0: as many as the budget allows, up to
/// kTargetChunkBytes of X, for the GEMM path a multiple of chunk_rows(n, k)); the per-point arrays on
/// the device when that leaves chunks at least a quarter of the size they would have otherwise. Throws
/// std::invalid_argument naming the budget and the least it would take when it cannot hold one chunk.
StreamPlan plan_stream(const StreamProblem& problem, std::size_t budget, std::int64_t chunk_rows = 0);

/// The rows of the initialisation's sample: s rows, one drawn from the seed in each of s equal ranges of
/// [0, n) (so the sample covers the file evenly and reads it in order), increasing; all n when s >= n.
std::vector<std::int64_t> stratified_rows(std::int64_t n, std::int64_t s, std::uint64_t seed);

/// fit's device memory for the problem (see fit_device_bytes in stream.hpp).
std::size_t fit_device_bytes(std::int64_t n, std::int64_t d, std::int64_t k, int elem_bytes, Init resolved_init);

/// "1.50 GiB", "12.0 MiB", "512 B": the sizes in the planner's messages.
std::string format_bytes(double bytes);

}  // namespace skinny::kmeans::detail
