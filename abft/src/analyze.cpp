// Verification's decision from the checksum differences: clean, one element to correct, or errors that
// cannot be located.
#include "detail.hpp"

#include <cmath>
#include <vector>

namespace skinny::abft::detail {
namespace {

/// Indices whose carried and computed checksums differ by more than their thresholds (NaN counts).
std::vector<std::int64_t> inconsistent(const Checks& c, double& max_ratio) {
  std::vector<std::int64_t> bad;
  for (std::size_t i = 0; i < c.carried_e.size(); ++i) {
    const double de = std::abs(c.computed_e[i] - c.carried_e[i]), dw = std::abs(c.computed_w[i] - c.carried_w[i]);
    const double ratio = std::max(de / c.tau_e[i], dw / c.tau_w[i]);
    if (!(ratio <= 1)) bad.push_back(static_cast<std::int64_t>(i));
    if (std::isfinite(ratio)) max_ratio = std::max(max_ratio, ratio);
  }
  return bad;
}

/// The position an error of one check points at: (weighted difference / plain difference) - 1, or -1.
std::int64_t position(const Checks& c, std::int64_t i, std::int64_t extent) {
  const double de = c.computed_e[std::size_t(i)] - c.carried_e[std::size_t(i)];
  const double dw = c.computed_w[std::size_t(i)] - c.carried_w[std::size_t(i)];
  const double p = std::round(dw / de) - 1;
  return std::isfinite(p) && p >= 0 && p < double(extent) ? static_cast<std::int64_t>(p) : -1;
}

}  // namespace

Report analyze(const Checks& cols, const Checks& rows) {
  Report r;
  const std::vector<std::int64_t> bad_cols = inconsistent(cols, r.max_ratio), bad_rows = inconsistent(rows, r.max_ratio);
  r.inconsistent_cols = static_cast<std::int64_t>(bad_cols.size());
  r.inconsistent_rows = static_cast<std::int64_t>(bad_rows.size());
  const auto m = static_cast<std::int64_t>(rows.carried_e.size()), n = static_cast<std::int64_t>(cols.carried_e.size());
  if (bad_cols.empty() && bad_rows.empty()) return r;
  r.finding = Finding::detected_unlocated;
  if (bad_cols.size() == 1 && bad_rows.size() == 1) {
    r.row = bad_rows[0];
    r.col = bad_cols[0];
  } else if (bad_cols.size() == 1 && bad_rows.empty()) {  // the row checks missed it: the weights locate the row
    r.col = bad_cols[0];
    r.row = position(cols, r.col, m);
  } else if (bad_rows.size() == 1 && bad_cols.empty()) {
    r.row = bad_rows[0];
    r.col = position(rows, r.row, n);
  }
  if (r.row >= 0 && r.col >= 0) {
    r.finding = Finding::corrected;
  } else {
    r.row = r.col = -1;
  }
  return r;
}

}  // namespace skinny::abft::detail
