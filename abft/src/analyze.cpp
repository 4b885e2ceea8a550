// Verification's decision from the checksum differences: clean, one element to correct, or errors that
// cannot be located.
#include "detail.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace skinny::abft::detail {
namespace {

/// Indices whose carried and computed checksums differ by more than their thresholds (NaN counts), and
/// the largest finite ratio and plain difference seen.
std::vector<std::int64_t> inconsistent(const Checks& c, Report& r) {
  std::vector<std::int64_t> bad;
  for (std::size_t i = 0; i < c.carried_e.size(); ++i) {
    const double de = c.computed_e[i] - c.carried_e[i], dw = c.computed_w[i] - c.carried_w[i];
    const double worst = worst_ratio(check_ratio(de, c.tau_e[i]), check_ratio(dw, c.tau_w[i]));
    if (!(worst <= 1)) bad.push_back(static_cast<std::int64_t>(i));
    if (std::isfinite(worst)) r.max_ratio = std::max(r.max_ratio, worst);
    if (std::isfinite(de)) r.max_difference = std::max(r.max_difference, std::abs(de));
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

/// The check of `c` closest to failing: the largest finite |plain difference| / threshold (-1: none).
std::int64_t strongest(const Checks& c) {
  std::int64_t best = -1;
  double best_ratio = -1;
  for (std::size_t i = 0; i < c.carried_e.size(); ++i) {
    const double q = check_ratio(c.computed_e[i] - c.carried_e[i], c.tau_e[i]);
    if (std::isfinite(q) && q > best_ratio) {
      best_ratio = q;
      best = static_cast<std::int64_t>(i);
    }
  }
  return best;
}

/// Whether one error at position p, of the size of check i's plain difference, explains its weighted
/// difference within the weighted threshold.
bool weights_agree(const Checks& c, std::int64_t i, std::int64_t p) {
  const double de = c.computed_e[std::size_t(i)] - c.carried_e[std::size_t(i)];
  const double dw = c.computed_w[std::size_t(i)] - c.carried_w[std::size_t(i)];
  return std::abs(dw - double(p + 1) * de) <= c.tau_w[std::size_t(i)];
}

/// Where along the other direction the error of the lone inconsistent check i of `c` is. An error just
/// above c's threshold stays below the other direction's, and there the weights' ratio is blurred by
/// the weighted check's rounding (h times the plain one's): the other direction's check closest to
/// failing is the better witness, taken when the weights agree with it.
std::int64_t locate(const Checks& c, std::int64_t i, const Checks& other) {
  const std::int64_t s = strongest(other);
  if (s >= 0 && weights_agree(c, i, s)) return s;
  return position(c, i, static_cast<std::int64_t>(other.carried_e.size()));
}

}  // namespace

Report analyze(const Checks& cols, const Checks& rows) {
  Report r;
  const std::vector<std::int64_t> bad_cols = inconsistent(cols, r), bad_rows = inconsistent(rows, r);
  r.inconsistent_cols = static_cast<std::int64_t>(bad_cols.size());
  r.inconsistent_rows = static_cast<std::int64_t>(bad_rows.size());
  if (bad_cols.empty() && bad_rows.empty()) return r;
  r.finding = Finding::detected_unlocated;
  if (bad_cols.size() == 1 && bad_rows.size() == 1) {
    r.row = bad_rows[0];
    r.col = bad_cols[0];
  } else if (bad_cols.size() == 1 && bad_rows.empty()) {  // the row checks missed it
    r.col = bad_cols[0];
    r.row = locate(cols, r.col, rows);
  } else if (bad_rows.size() == 1 && bad_cols.empty()) {
    r.row = bad_rows[0];
    r.col = locate(rows, r.row, cols);
  }
  if (r.row >= 0 && r.col >= 0) {
    r.finding = Finding::corrected;
  } else {
    r.row = r.col = -1;
  }
  return r;
}

}  // namespace skinny::abft::detail
