// The kmeans program's protection report and fault-injection campaign (kmeans_protect.hpp).
#include "kmeans_protect.hpp"

#include "common/timing.hpp"

#include <skinny/gemm/splitmix64.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace skinny::apps {

std::string fault_target_name(kmeans::FaultTarget t) {
  switch (t) {
    case kmeans::FaultTarget::none: return "none";
    case kmeans::FaultTarget::distances: return "distances";
    case kmeans::FaultTarget::sums: return "sums";
  }
  return "?";
}

kmeans::FaultTarget fault_target_from_name(const std::string& name) {
  if (name == "distances") return kmeans::FaultTarget::distances;
  if (name == "sums") return kmeans::FaultTarget::sums;
  if (name == "none") return kmeans::FaultTarget::none;
  throw std::invalid_argument("unknown fault target '" + name + "'; valid: distances, sums");
}

namespace {

/// The injected fault's error against its check's bound: above it (or not finite) it must be detected.
/// Sums are checked exactly: every flip is above.
bool above_bound(const kmeans::ProtectionReport& p) {
  if (p.target == kmeans::FaultTarget::sums) return true;
  const double error = std::fabs(p.after - p.before);
  return !(error <= p.bound);
}

}  // namespace

void print_protection(const kmeans::ProtectionReport& p) {
  if (!p.enabled) return;
  std::printf("protected: %lld point checks of the distances (%lld re-checked at float accuracy), %d chunk(s) "
              "recomputed, %d update(s) recomputed; largest clean |difference| / bound %.3g\n",
              static_cast<long long>(p.rows_verified), static_cast<long long>(p.rows_rechecked), p.distance_detections,
              p.sum_detections, p.max_clean_ratio);
  if (!p.injected) return;
  if (p.target == kmeans::FaultTarget::distances)
    std::printf("injected: bit %d of cross term (point %lld, column %lld; a column k is the checksum): %.9g -> %.9g, "
                "error %.3g = %.3g x its bound; %s\n",
                p.bit, static_cast<long long>(p.row), static_cast<long long>(p.col),
                p.before, p.after, std::fabs(p.after - p.before), std::fabs(p.after - p.before) / p.bound,
                p.detected ? "detected, chunk recomputed" : "not detected");
  else
    std::printf("injected: bit %d of centroid-sum word %lld; %s\n", p.bit, static_cast<long long>(p.row),
                p.detected ? "detected, sums recomputed" : "not detected");
}

void write_protection(JsonWriter& json, const kmeans::ProtectionReport& p) {
  json.key("protection").begin_object();
  json.field("enabled", p.enabled).field("rows_verified", p.rows_verified).field("rows_rechecked", p.rows_rechecked)
      .field("distance_detections", std::int64_t(p.distance_detections))
      .field("sum_detections", std::int64_t(p.sum_detections)).field("max_clean_ratio", p.max_clean_ratio)
      .field("injected", p.injected);
  if (p.injected)
    json.field("target", fault_target_name(p.target)).field("row", p.row).field("col", p.col)
        .field("bit", std::int64_t(p.bit)).field("before", p.before).field("after", p.after).field("bound", p.bound)
        .field("detected", p.detected);
  json.end_object();
}

template <class T>
CampaignResult run_campaign(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const kmeans::Params& params,
                            const std::vector<kmeans::compute_t<T>>& initial, const std::vector<double>& weights,
                            const CampaignOptions& options) {
  if (options.trials < 1) throw std::invalid_argument("--campaign needs at least one trial");
  kmeans::Params p = params;
  p.progress = nullptr;
  p.init_progress = nullptr;
  p.inject = {};
  CampaignResult out;
  p.protect = false;
  out.median_ms_clean = median(kmeans::fit<T>(ctx, x, n, d, p, initial, weights).timing.iteration_ms);
  p.protect = true;
  const kmeans::Result<kmeans::compute_t<T>> clean = kmeans::fit<T>(ctx, x, n, d, p, initial, weights);
  out.median_ms_protected = median(clean.timing.iteration_ms);
  out.max_clean_ratio = clean.protection.max_clean_ratio;
  out.false_alarms = clean.protection.distance_detections + clean.protection.sum_detections;
  std::uint64_t state = splitmix64(options.seed ^ 0x43414d50ull);
  for (int t = 0; t < options.trials; ++t) {
    p.inject.target = options.targets == "both" ? (t % 2 == 0 ? kmeans::FaultTarget::distances : kmeans::FaultTarget::sums)
                                                : fault_target_from_name(options.targets);
    p.inject.iteration = 1 + static_cast<int>(splitmix64(state++) % static_cast<std::uint64_t>(clean.n_iter));
    p.inject.seed = splitmix64(state++);
    const kmeans::Result<kmeans::compute_t<T>> r = kmeans::fit<T>(ctx, x, n, d, p, initial, weights);
    const kmeans::ProtectionReport& f = r.protection;
    ++out.trials;
    // A passing check of an injected point below its bound measured the fault, not rounding.
    if (!(f.injected && f.target == kmeans::FaultTarget::distances && !f.detected))
      out.max_clean_ratio = std::max(out.max_clean_ratio, f.max_clean_ratio);
    out.false_alarms += f.distance_detections + f.sum_detections - (f.detected ? 1 : 0);
    if (!f.injected) {
      ++out.not_injected;
      continue;
    }
    const bool same = r.labels == clean.labels && r.centroids == clean.centroids;
    const std::string what = "trial " + std::to_string(t) + ": " + fault_target_name(f.target) + " iteration " +
                             std::to_string(p.inject.iteration) + " seed " + std::to_string(p.inject.seed);
    if (f.detected) {
      if (same) {
        ++out.corrected;
      } else {
        ++out.detected_labels_differ;
        out.failures.push_back(what + ": detected, but the final labels or centroids differ from the clean fit's");
      }
    } else if (above_bound(f)) {
      ++out.missed;
      out.failures.push_back(what + ": error " + std::to_string(std::fabs(f.after - f.before)) + " above its bound " +
                             std::to_string(f.bound) + " not detected");
    } else {
      ++out.below_bound;
      if (!same) ++out.below_bound_labels_differ;
    }
  }
  return out;
}

void print_campaign(const CampaignResult& r) {
  std::printf("fault campaign: %d trials, one fault each\n", r.trials);
  std::printf("  %-44s %6d\n", "detected and corrected (labels equal clean)", r.corrected);
  std::printf("  %-44s %6d\n", "detected, final labels differ", r.detected_labels_differ);
  std::printf("  %-44s %6d\n", "missed (error above the bound, undetected)", r.missed);
  std::printf("  %-44s %6d  (final labels differ in %d)\n", "below the bound (rounding-sized, by design)",
              r.below_bound, r.below_bound_labels_differ);
  std::printf("  %-44s %6d\n", "not injected (fit ended before)", r.not_injected);
  std::printf("  %-44s %6d\n", "false alarms (detections without a fault)", r.false_alarms);
  std::printf("  largest clean |difference| / bound %.3g; per iteration %.3f ms unprotected, %.3f ms protected (%+.1f %%)\n",
              r.max_clean_ratio, r.median_ms_clean, r.median_ms_protected,
              100 * (r.median_ms_protected / r.median_ms_clean - 1));
  for (const std::string& f : r.failures) std::printf("  FAILED %s\n", f.c_str());
}

void write_campaign(JsonWriter& json, const CampaignResult& r) {
  json.key("campaign").begin_object();
  json.field("trials", std::int64_t(r.trials)).field("corrected", std::int64_t(r.corrected))
      .field("detected_labels_differ", std::int64_t(r.detected_labels_differ)).field("missed", std::int64_t(r.missed))
      .field("below_bound", std::int64_t(r.below_bound))
      .field("below_bound_labels_differ", std::int64_t(r.below_bound_labels_differ))
      .field("not_injected", std::int64_t(r.not_injected)).field("false_alarms", std::int64_t(r.false_alarms))
      .field("max_clean_ratio", r.max_clean_ratio).field("median_ms_unprotected", r.median_ms_clean)
      .field("median_ms_protected", r.median_ms_protected)
      .field("overhead_percent", 100 * (r.median_ms_protected / r.median_ms_clean - 1));
  json.key("failures").begin_array();
  for (const std::string& f : r.failures) json.value(f);
  json.end_array();
  json.end_object();
}

template CampaignResult run_campaign(Context&, const float*, std::int64_t, std::int64_t, const kmeans::Params&,
                                     const std::vector<float>&, const std::vector<double>&, const CampaignOptions&);
template CampaignResult run_campaign(Context&, const double*, std::int64_t, std::int64_t, const kmeans::Params&,
                                     const std::vector<double>&, const std::vector<double>&, const CampaignOptions&);
template CampaignResult run_campaign(Context&, const __half*, std::int64_t, std::int64_t, const kmeans::Params&,
                                     const std::vector<float>&, const std::vector<double>&, const CampaignOptions&);
template CampaignResult run_campaign(Context&, const __nv_bfloat16*, std::int64_t, std::int64_t, const kmeans::Params&,
                                     const std::vector<float>&, const std::vector<double>&, const CampaignOptions&);

}  // namespace skinny::apps
