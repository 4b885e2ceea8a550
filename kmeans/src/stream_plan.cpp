#include "stream_plan.hpp"

#include "detail.hpp"

#include <skinny/gemm/splitmix64.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace skinny::kmeans::detail {
namespace {

/// Byte counts in double: exact to 2^53, far beyond any device.
struct Costs {
  double fixed = 0;        ///< whatever the rows
  double init_fixed = 0;   ///< the initialisation's buffers that do not grow with its sample
  double sample_row = 0;   ///< per row of the initialisation's sample
  double per_point = 0;    ///< per point when the per-point arrays stay on the device
  double chunk_row_resident = 0, chunk_row_chunked = 0;  ///< per chunk row, both slots included
};

Costs costs_of(const StreamProblem& p) {
  const double n = double(p.n), d = double(p.d), k = double(p.k), t = double(p.elem_bytes);
  const double kd = k * d;
  Costs c;
  // Centroids (two sets), their norms, counts; the update's sums (high and low words), weight sums,
  // scales, shift parts and counts; reductions' scratch; the moments of a chunk.
  c.fixed = 2 * kd * t + k * t + 4 * k + 16 * kd + 16 * k + 16 * d + 8 * kd + 4 * k + 4 * 257 * 8 +
            double(kMomentScratchRows) * d * 8 + 2 * d * 8 + double(kLibraryScratchBytes);
  if (p.fused)
    c.fixed += 2 * k * std::ceil(d / 4) * 4 * 4;  // nearest's split centres
  else
    c.fixed += double(std::min<std::int64_t>(p.n, chunk_rows(p.n, p.k, p.elem_bytes))) * k * t;  // cross terms
  const double trials = 2 + std::floor(std::log(std::max(1.0, k)));
  switch (p.init) {
    case Init::kmeans_plus_plus:
      // The sample, its norms, D^2 and its prefix sums, the candidates' cross terms.
      c.sample_row = d * t + t + 16 + trials * t;
      c.init_fixed = trials * (d * t + 16);
      break;
    case Init::kmeans_parallel:
    case Init::automatic: {
      // The sample, its norms, two distances and two labels per point, a flag, a candidate index and
      // nearest's keys; the candidates (twice the expected count) and the reduction's buffers.
      const double l = p.init_oversampling * k;
      const double m = std::min(n, 1 + 2 * std::ceil(l) * std::max(1, p.init_rounds));
      c.sample_row = d * t + 3 * t + 8 + 1 + 8 + 8;
      c.init_fixed = m * (d * t + t + 13) + m * (trials + 5) * 8 + double(std::size_t(32) << 20);
      break;
    }
    case Init::random:
    case Init::given: break;
  }
  c.per_point = 2 * t + 8 + (p.weighted ? 8 : 0);
  // Per chunk row: X in both slots; the nearest kernel's keys or nothing for the GEMM path; the sorted
  // update's keys and permutation; per chunk also the weights and previous labels in both slots, and
  // the norms, distances and labels.
  const double common = 2 * d * t + (p.fused ? 8 : 0) + 32;
  c.chunk_row_resident = common;
  c.chunk_row_chunked = common + 2 * (4 + (p.weighted ? 8 : 0)) + 2 * t + 4;
  return c;
}

}  // namespace

std::string format_bytes(double bytes) {
  char buf[32];
  if (bytes >= double(1 << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1 << 30));
  else if (bytes >= double(1 << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / double(1 << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024);
  else
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

StreamPlan plan_stream(const StreamProblem& p, std::size_t budget, std::int64_t requested_rows) {
  if (p.n < 1 || p.d < 1 || p.k < 1 || p.k > p.n)
    throw std::invalid_argument("plan_stream: need n, d >= 1 and 1 <= k <= n (got n = " + std::to_string(p.n) +
                                ", d = " + std::to_string(p.d) + ", k = " + std::to_string(p.k) + ")");
  if (requested_rows < 0)
    throw std::invalid_argument("kmeans: chunk_rows = " + std::to_string(requested_rows) + " must be >= 0 (0: from the budget)");
  const Costs c = costs_of(p);
  const double n = double(p.n), b = double(budget);
  const bool sampled = c.sample_row > 0;
  const std::int64_t hard_sample = sampled ? p.k : 0;
  const std::int64_t preferred_sample = sampled ? std::min(p.n, std::max(p.k, kMinInitSampleRows)) : 0;
  const auto base = [&](bool resident, std::int64_t sample) {
    return c.fixed + c.init_fixed + (resident ? n * c.per_point : 0) + double(sample) * c.sample_row;
  };
  const auto row_bytes = [&](bool resident) { return resident ? c.chunk_row_resident : c.chunk_row_chunked; };
  // Rows the budget leaves for chunks, at most n.
  const auto rows_left = [&](bool resident, std::int64_t sample) -> std::int64_t {
    const double left = b - base(resident, sample);
    return left <= 0 ? 0 : static_cast<std::int64_t>(std::min(n, std::floor(left / row_bytes(resident))));
  };

  StreamPlan plan;
  plan.budget = budget;
  plan.fixed_bytes = static_cast<std::size_t>(c.fixed);
  std::int64_t sample_min = preferred_sample;
  if (rows_left(false, sample_min) < 1) sample_min = hard_sample;
  if (requested_rows > 0) {
    const std::int64_t rows = std::min(requested_rows, p.n);
    if (rows_left(false, sample_min) < rows) sample_min = hard_sample;
    if (rows_left(true, sample_min) >= rows) {
      plan.per_point_on_device = true;
    } else if (rows_left(false, sample_min) < rows) {
      const double least = base(false, hard_sample) + double(rows) * row_bytes(false);
      throw std::invalid_argument("kmeans: chunk_rows = " + std::to_string(rows) + " needs at least " +
                                  format_bytes(least) + " of device memory, more than the budget of " +
                                  format_bytes(b) + " (max_gpu_memory, or the free memory less headroom)");
    }
    plan.chunk_rows = rows;
  } else {
    const std::int64_t chunked = rows_left(false, sample_min);
    if (chunked < 1) {
      const double least = base(false, hard_sample) + row_bytes(false);
      throw std::invalid_argument(
          "kmeans: a device-memory budget of " + format_bytes(b) +
          " (max_gpu_memory, or the free memory less headroom) cannot hold one chunk of X: streaming this problem "
          "takes at least " + format_bytes(least) + " (centroids, cluster sums and library scratch " +
          format_bytes(c.fixed) + (sampled ? ", the initialisation's buffers and a sample of k rows " +
                                                 format_bytes(c.init_fixed + double(hard_sample) * c.sample_row)
                                           : std::string()) +
          ", then " + format_bytes(row_bytes(false)) + " per row of a chunk)");
    }
    const std::int64_t cap = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(kTargetChunkBytes / (static_cast<std::size_t>(p.d) * static_cast<std::size_t>(p.elem_bytes))));
    const std::int64_t best = std::min(cap, chunked);
    const std::int64_t resident = std::min(cap, rows_left(true, sample_min));
    plan.per_point_on_device = resident >= std::max<std::int64_t>(1, best / 4);
    std::int64_t rows = plan.per_point_on_device ? resident : best;
    // The GEMM path: whole row chunks of fit's, so the GEMMs see fit's shapes (see stream.hpp).
    const std::int64_t gemm_rows = chunk_rows(p.n, p.k, p.elem_bytes);
    if (!p.fused && rows > gemm_rows) rows = rows / gemm_rows * gemm_rows;
    plan.chunk_rows = rows;
  }
  plan.chunks = (p.n + plan.chunk_rows - 1) / plan.chunk_rows;
  const double used = base(plan.per_point_on_device, 0) + double(plan.chunk_rows) * row_bytes(plan.per_point_on_device);
  if (sampled) {
    const double left = std::max(0.0, b - used);
    plan.init_sample_rows = std::max(sample_min, static_cast<std::int64_t>(std::min(n, std::floor(left / c.sample_row))));
  }
  plan.planned_bytes = static_cast<std::size_t>(used + double(plan.init_sample_rows) * c.sample_row);
  return plan;
}

std::vector<std::int64_t> stratified_rows(std::int64_t n, std::int64_t s, std::uint64_t seed) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(std::max<std::int64_t>(0, std::min(n, s))));
  if (s >= n) {
    std::iota(rows.begin(), rows.end(), std::int64_t(0));
    return rows;
  }
  const std::uint64_t key = splitmix64(seed ^ 0x53414d504c45ull);
  for (std::int64_t j = 0; j < s; ++j) {
    // Range j is [j n / s, (j + 1) n / s): s ranges of floor(n / s) or one more rows (j n < 2^62).
    const std::int64_t lo = j * n / s, hi = (j + 1) * n / s;
    rows[static_cast<std::size_t>(j)] =
        lo + static_cast<std::int64_t>(splitmix64(key ^ splitmix64(std::uint64_t(j))) % std::uint64_t(hi - lo));
  }
  return rows;
}

std::size_t fit_device_bytes(std::int64_t n_, std::int64_t d_, std::int64_t k_, int elem_bytes, Init init) {
  const double n = double(n_), d = double(d_), k = double(k_), t = double(elem_bytes);
  const double chunk = double(chunk_rows(n_, k_, elem_bytes));
  double bytes = n * d * t                      // X
                 + n * (3 * t + 4 * 5)          // norms, distances, g for k-means++, labels, sort keys and indices
                 + (n / 256 + k + 1) * d * 8    // partial sums of the update
                 + k * d * (2 * t + 16)         // centroids and their sums
                 + chunk * k * t + double(kLibraryScratchBytes);  // cross terms of a chunk, library scratch
  // k-means||: per point two distances, two labels, a flag and a candidate index; the candidates' rows
  // (about 10k of them with the default 5 rounds of 2k) and the reduction's distances.
  if (init == Init::kmeans_parallel || init == Init::automatic)
    bytes += n * (2 * t + 17) + std::min(n, 1 + 10 * k) * (d * t + 16 * 8);
  return static_cast<std::size_t>(bytes);
}

}  // namespace skinny::kmeans::detail
