// Adjusted Rand index (Hubert & Arabie): agreement of two labelings, corrected for chance.
#include <skinny/kmeans/kmeans.hpp>

#include <stdexcept>
#include <string>
#include <unordered_map>

namespace skinny::kmeans {
namespace {
double pairs(double m) { return m * (m - 1) / 2; }
}  // namespace

double adjusted_rand_index(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  if (a.size() != b.size())
    throw std::invalid_argument("adjusted_rand_index: labelings of different lengths (" + std::to_string(a.size()) +
                                " and " + std::to_string(b.size()) + ")");
  if (a.size() < 2) return 1.0;
  std::unordered_map<std::int64_t, double> cells;
  std::unordered_map<std::int32_t, double> rows, cols;
  for (std::size_t i = 0; i < a.size(); ++i) {
    cells[(std::int64_t(a[i]) << 32) ^ std::uint32_t(b[i])] += 1;
    rows[a[i]] += 1;
    cols[b[i]] += 1;
  }
  double index = 0, sum_rows = 0, sum_cols = 0;
  for (const auto& [cell, m] : cells) index += pairs(m);
  for (const auto& [r, m] : rows) sum_rows += pairs(m);
  for (const auto& [c, m] : cols) sum_cols += pairs(m);
  const double expected = sum_rows * sum_cols / pairs(double(a.size()));
  const double maximum = (sum_rows + sum_cols) / 2;
  if (maximum == expected) return 1.0;  // both labelings put everything in one cluster, or each point alone
  return (index - expected) / (maximum - expected);
}

}  // namespace skinny::kmeans
