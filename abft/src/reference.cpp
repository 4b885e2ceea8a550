// CPU reference of the encodings (double), for the tests and the app's checks.
#include <skinny/abft/abft.hpp>

#include <stdexcept>

namespace skinny::abft {

void reference_encode(const std::vector<double>& a, std::int64_t m, std::int64_t n, std::int64_t density,
                      std::vector<double>& row_checksums, std::vector<double>& col_checksums) {
  if (m < 1 || n < 1 || static_cast<std::int64_t>(a.size()) < m * n)
    throw std::invalid_argument("reference_encode: A must hold m x n >= 1 x 1 values");
  const std::int64_t nbc = blocks(n, density), nbr = blocks(m, density);
  const std::int64_t bc = density > 0 && density < n ? density : n, br = density > 0 && density < m ? density : m;
  row_checksums.assign(static_cast<std::size_t>(m * 2 * nbc), 0.0);
  col_checksums.assign(static_cast<std::size_t>(2 * nbr * n), 0.0);
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i) {
      const double v = a[static_cast<std::size_t>(j * m + i)];
      const std::int64_t t = j / bc, s = i / br;
      row_checksums[static_cast<std::size_t>((2 * t) * m + i)] += v;
      row_checksums[static_cast<std::size_t>((2 * t + 1) * m + i)] += double(j - t * bc + 1) * v;
      col_checksums[static_cast<std::size_t>(j * 2 * nbr + 2 * s)] += v;
      col_checksums[static_cast<std::size_t>(j * 2 * nbr + 2 * s + 1)] += double(i - s * br + 1) * v;
    }
}

}  // namespace skinny::abft
