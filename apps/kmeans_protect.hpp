// The kmeans program's fault tolerance: the protection report of a fit (--protect, --inject) and the
// fault-injection campaign (--campaign N): N fits, each with one fault in a random intermediate of a
// random iteration, against the fault-free fit.
#pragma once

#include "common/json_writer.hpp"

#include <skinny/gemm/context.hpp>
#include <skinny/kmeans/kmeans.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace skinny::apps {

/// "distances", "sums" or "none".
std::string fault_target_name(kmeans::FaultTarget t);
/// The inverse; "both" (a campaign alternates) is not a target. Throws std::invalid_argument.
kmeans::FaultTarget fault_target_from_name(const std::string& name);

/// One line per fit: what the checks saw, and the injected fault with its size against the bound.
void print_protection(const kmeans::ProtectionReport& p);
/// The report as the members of a JSON object "protection".
void write_protection(JsonWriter& json, const kmeans::ProtectionReport& p);

struct CampaignOptions {
  int trials = 0;
  std::string targets = "both";  ///< distances, sums, or both (alternating)
  std::uint64_t seed = 0;        ///< draws each trial's target, iteration and fault
};

/// The outcome of a campaign: each trial's fault falls in exactly one class.
struct CampaignResult {
  int trials = 0;
  int corrected = 0;            ///< detected, recomputed, and the final labels and centroids equal the clean fit's
  int detected_labels_differ = 0;  ///< detected, but the final labels differ (a failure of the correction)
  int missed = 0;               ///< an error above its bound that no check saw (a failure of detection)
  int below_bound = 0;          ///< rounding-sized errors, not detected by design
  int below_bound_labels_differ = 0;  ///< of those, fits that ended with other labels
  int not_injected = 0;         ///< the fit stopped before the fault's iteration
  int false_alarms = 0;         ///< detections with no fault: in the clean fit, or beside a trial's own fault
  double max_clean_ratio = 0;   ///< over all trials' passing checks
  double median_ms_clean = 0, median_ms_protected = 0;  ///< per iteration, clean fit unprotected / protected
  std::vector<std::string> failures;  ///< a line per trial in a failure class
};

/// Runs the clean fit (unprotected and protected, for the overhead and the reference) and the trials.
template <class T>
CampaignResult run_campaign(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const kmeans::Params& params,
                            const std::vector<kmeans::compute_t<T>>& initial, const std::vector<double>& weights,
                            const CampaignOptions& options);

void print_campaign(const CampaignResult& r);
void write_campaign(JsonWriter& json, const CampaignResult& r);

}  // namespace skinny::apps
