// Thresholds of checksum comparisons: the rounding model (the expected spread of rounding, from the
// squares of the actual values) and the older L1 bound; their calibrated safety factors and names (the
// formula itself is in threshold.hpp). The derivation and the calibration are in docs/abft-threshold.md.
#include "threshold.hpp"

#include <stdexcept>
#include <string>

namespace skinny::abft {

std::string_view to_string(ThresholdModel m) {
  switch (m) {
    case ThresholdModel::rounding: return "rounding";
    case ThresholdModel::l1_bound: return "l1";
  }
  return "?";
}

ThresholdModel threshold_model_from_name(std::string_view name) {
  if (name == "rounding") return ThresholdModel::rounding;
  if (name == "l1") return ThresholdModel::l1_bound;
  throw std::invalid_argument("unknown threshold model '" + std::string(name) + "' (valid: rounding, l1)");
}

template <class T>
double default_gamma(ThresholdModel model) {
  if (model == ThresholdModel::l1_bound) return 16;
  // The rounding model, calibrated on the CPU simulations (docs/abft-threshold.md): the largest
  // |difference| / sigma of 1.1 million comparisons per precision (every summation order and data kind)
  // was 1.73 in float and 1.23 in double; sums of many terms of one size and random signs have the
  // heaviest tail (their partial sums' excursions), below 1e-13 per comparison at 5. Float and double
  // behave alike (the model scales with u) and were given the same constant.
  constexpr double kFloat = 5, kDouble = 5;
  return sizeof(T) == 8 ? kDouble : kFloat;
}

namespace detail {

template <class T>
double check_threshold(const Threshold& threshold, std::int64_t k, std::int64_t h, const CheckMagnitudes& m) {
  Threshold resolved = threshold;
  if (resolved.gamma <= 0) resolved.gamma = default_gamma<T>(threshold.model);
  return resolved_threshold<T>(resolved, k, h, m);
}

template double check_threshold<float>(const Threshold&, std::int64_t, std::int64_t, const CheckMagnitudes&);
template double check_threshold<double>(const Threshold&, std::int64_t, std::int64_t, const CheckMagnitudes&);

}  // namespace detail

template double default_gamma<float>(ThresholdModel);
template double default_gamma<double>(ThresholdModel);

}  // namespace skinny::abft
