// CPU reference Lloyd in double, with fit()'s rules: ties to the lowest index, scikit-learn's empty-cluster
// relocation and tol, a final assignment. For the tests: from the same initial centroids, the same labels.
#include <skinny/kmeans/kmeans.hpp>

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace skinny::kmeans {
namespace {

/// Labels and squared distances of every point to its nearest centroid.
template <class T>
void assign(const std::vector<T>& x, std::int64_t n, std::int64_t d, const std::vector<double>& c, std::int64_t k,
            std::vector<std::int32_t>& labels, std::vector<double>& dist) {
  for (std::int64_t i = 0; i < n; ++i) {
    double best = std::numeric_limits<double>::infinity();
    std::int32_t best_j = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < d; ++p) {
        const double diff = double(x[std::size_t(i * d + p)]) - c[std::size_t(j * d + p)];
        s += diff * diff;
      }
      if (s < best) {
        best = s;
        best_j = static_cast<std::int32_t>(j);
      }
    }
    labels[std::size_t(i)] = best_j;
    dist[std::size_t(i)] = best;
  }
}

double feature_variance(const std::vector<double>& x, std::int64_t n, std::int64_t d) {
  double total = 0;
  for (std::int64_t p = 0; p < d; ++p) {
    double mean = 0, var = 0;
    for (std::int64_t i = 0; i < n; ++i) mean += x[std::size_t(i * d + p)];
    mean /= double(n);
    for (std::int64_t i = 0; i < n; ++i) var += (x[std::size_t(i * d + p)] - mean) * (x[std::size_t(i * d + p)] - mean);
    total += var / double(n);
  }
  return total / double(d);
}

}  // namespace

template <class T>
Result<T> reference_fit(const std::vector<T>& x, std::int64_t n, std::int64_t d, const Params& params,
                        const std::vector<T>& initial_centroids, const std::vector<double>& sample_weight) {
  const std::int64_t k = params.k;
  if (n < 1 || d < 1 || k < 1 || k > n || static_cast<std::int64_t>(x.size()) != n * d ||
      static_cast<std::int64_t>(initial_centroids.size()) != k * d || params.max_iter < 1 || !(params.tol >= 0) ||
      !(sample_weight.empty() || static_cast<std::int64_t>(sample_weight.size()) == n))
    throw std::invalid_argument("reference_fit: inconsistent arguments (n = " + std::to_string(n) + ", d = " +
                                std::to_string(d) + ", k = " + std::to_string(k) + ")");
  const std::vector<double> xd(x.begin(), x.end());
  // Centroids are rounded to T after each update, as the GPU stores them.
  std::vector<double> c(initial_centroids.begin(), initial_centroids.end());
  const double tol_scaled = params.tol > 0 ? params.tol * feature_variance(xd, n, d) : 0.0;
  Result<T> r;
  r.k = k;
  r.d = d;
  const auto weight = [&](std::int64_t i) { return sample_weight.empty() ? 1.0 : sample_weight[std::size_t(i)]; };
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n)), previous;
  std::vector<double> dist(static_cast<std::size_t>(n));
  for (int it = 1; it <= params.max_iter; ++it) {
    assign(x, n, d, c, k, labels, dist);
    const bool stable = labels == previous;  // strict convergence: no label changed (never at iteration 1)
    std::vector<double> sums(std::size_t(k * d), 0.0), weight_sums(std::size_t(k), 0.0);
    std::vector<std::int64_t> counts(std::size_t(k), 0);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t j = labels[std::size_t(i)];
      ++counts[std::size_t(j)];
      weight_sums[std::size_t(j)] += weight(i);
      for (std::int64_t p = 0; p < d; ++p) sums[std::size_t(j * d + p)] += weight(i) * xd[std::size_t(i * d + p)];
    }
    std::vector<std::int64_t> empty;
    for (std::int64_t j = 0; j < k; ++j)
      if (counts[std::size_t(j)] == 0) empty.push_back(j);
    if (!empty.empty()) {
      std::vector<std::int64_t> order(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      const std::size_t m = std::min(empty.size(), order.size());
      std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(m), order.end(), [&](std::int64_t a, std::int64_t b) {
        const double da = double(T(dist[std::size_t(a)])), db = double(T(dist[std::size_t(b)]));
        return da > db || (da == db && a < b);
      });
      for (std::size_t e = 0; e < m; ++e) {
        const std::int64_t point = order[e], to = empty[e], from = labels[std::size_t(point)];
        for (std::int64_t p = 0; p < d; ++p) {
          sums[std::size_t(from * d + p)] -= weight(point) * xd[std::size_t(point * d + p)];
          sums[std::size_t(to * d + p)] = weight(point) * xd[std::size_t(point * d + p)];
        }
        --counts[std::size_t(from)];
        counts[std::size_t(to)] = 1;
        weight_sums[std::size_t(from)] -= weight(point);
        weight_sums[std::size_t(to)] = weight(point);
        labels[std::size_t(point)] = static_cast<std::int32_t>(to);
      }
    }
    double shift = 0;
    for (std::int64_t j = 0; j < k; ++j)
      for (std::int64_t p = 0; p < d; ++p) {
        const std::size_t idx = std::size_t(j * d + p);
        const double updated = counts[std::size_t(j)] > 0 ? double(T(sums[idx] / weight_sums[std::size_t(j)])) : c[idx];
        shift += (updated - c[idx]) * (updated - c[idx]);
        c[idx] = updated;
      }
    r.n_iter = it;
    if ((params.stop_when_stable && stable) || (params.tol > 0 && shift <= tol_scaled)) {
      r.converged = true;
      break;
    }
    previous = labels;
  }
  assign(x, n, d, c, k, labels, dist);
  r.labels = labels;
  r.inertia = 0;
  for (std::int64_t i = 0; i < n; ++i) r.inertia += weight(i) * dist[std::size_t(i)];
  r.centroids.assign(c.begin(), c.end());
  return r;
}

template Result<float> reference_fit(const std::vector<float>&, std::int64_t, std::int64_t, const Params&,
                                     const std::vector<float>&, const std::vector<double>&);
template Result<double> reference_fit(const std::vector<double>&, std::int64_t, std::int64_t, const Params&,
                                      const std::vector<double>&, const std::vector<double>&);

}  // namespace skinny::kmeans
