// The simulation of checksum comparisons (simulated_checks.hpp). Compiled with -ffp-contract=off: the
// sequential order must round every product, and only std::fma may fuse.
#include "simulated_checks.hpp"

#include <skinny/gemm/splitmix64.hpp>

#include <cmath>
#include <stdexcept>

namespace skinny::abft::simulation {

std::string_view to_string(Order o) {
  switch (o) {
    case Order::sequential: return "sequential";
    case Order::fma: return "fma";
    case Order::blocked: return "blocked";
  }
  return "?";
}

std::string_view to_string(Data d) {
  switch (d) {
    case Data::uniform_signed: return "uniform[-1,1]";
    case Data::uniform_positive: return "uniform[0,1]";
    case Data::normal: return "normal";
    case Data::mixed_magnitudes: return "mixed magnitudes";
    case Data::offset_rows: return "offset rows";
    case Data::positive_times_signed: return "[0,1] x [-1,1]";
  }
  return "?";
}

namespace {

/// Sum of x(l) * y(l), l < len, in T's arithmetic and the given order.
template <class T, class X, class Y>
T dot(Order order, std::int64_t len, X x, Y y) {
  if (order == Order::sequential) {
    T s = 0;
    for (std::int64_t l = 0; l < len; ++l) {
      const T p = x(l) * y(l);
      s = s + p;
    }
    return s;
  }
  if (order == Order::fma) {
    T s = 0;
    for (std::int64_t l = 0; l < len; ++l) s = std::fma(x(l), y(l), s);
    return s;
  }
  constexpr int kLanes = 32;
  T lane[kLanes] = {};
  for (std::int64_t l = 0; l < len; ++l) lane[l % kLanes] = std::fma(x(l), y(l), lane[l % kLanes]);
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int q = 0; q < width; ++q) lane[q] = lane[q] + lane[q + width];
  return lane[0];
}

/// A uniform double in [0, 1) from element `index` of stream `key`.
double uniform(std::uint64_t key, std::uint64_t index) { return double(splitmix64(key ^ splitmix64(index)) >> 11) * 0x1p-53; }

/// Element `index` of matrix `which` (0: A, 1: B) for a data kind; `row` is the element's row.
double draw(Data data, std::uint64_t seed, int which, std::uint64_t index, std::int64_t row) {
  const std::uint64_t key = splitmix64(seed * 2 + std::uint64_t(which));
  const double u = uniform(key, 2 * index), v = uniform(key, 2 * index + 1);
  switch (data) {
    case Data::uniform_signed: return 2 * u - 1;
    case Data::uniform_positive: return u;
    case Data::normal: return std::sqrt(-2 * std::log1p(-u)) * std::cos(6.283185307179586 * v);  // Box-Muller
    case Data::mixed_magnitudes: return (2 * u - 1) * std::ldexp(1.0, int(std::floor(33 * v)) - 16);
    case Data::positive_times_signed: return which == 0 ? u : 2 * u - 1;
    case Data::offset_rows:
      if (which == 1) return u;
      return (uniform(key, ~std::uint64_t(row)) < 0.5 ? 1.0 : -1.0) + 0.5 * (2 * u - 1);
  }
  return 0;
}

/// An m x n column-major matrix of a data kind, rounded to T.
template <class T>
std::vector<T> matrix(Data data, std::uint64_t seed, int which, std::int64_t m, std::int64_t n) {
  std::vector<T> x(std::size_t(m * n));
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i)
      x[std::size_t(j * m + i)] = T(draw(data, seed, which, std::uint64_t(j * m + i), i));
  return x;
}

/// `count` positions spread over [0, extent): the first and the last included.
std::vector<std::int64_t> spread(std::int64_t extent, int count) {
  std::vector<std::int64_t> at;
  const std::int64_t c = std::min<std::int64_t>(count, extent);
  for (std::int64_t t = 0; t < c; ++t) at.push_back(c == 1 ? 0 : t * (extent - 1) / (c - 1));
  return at;
}

double sq(double x) { return x * x; }

}  // namespace

template <class T>
std::vector<Check> simulate(const Shape& s, Data data, Order order, std::uint64_t seed, int columns, int rows) {
  const std::int64_t m = s.m, k = s.k, n = s.n;
  if (m < 1 || k < 1 || n < 1) throw std::invalid_argument("simulate: need m, k, n >= 1");
  const std::vector<T> a = matrix<T>(data, seed, 0, m, k), b = matrix<T>(data, seed, 1, k, n);
  std::vector<T> at(a.size());  // A row-major: the rows of C's dot products are contiguous
  for (std::int64_t l = 0; l < k; ++l)
    for (std::int64_t i = 0; i < m; ++i) at[std::size_t(i * k + l)] = a[std::size_t(l * m + i)];
  const auto A = [&](std::int64_t i, std::int64_t l) { return a[std::size_t(l * m + i)]; };
  const auto B = [&](std::int64_t l, std::int64_t j) { return b[std::size_t(j * k + l)]; };
  const auto one = [](std::int64_t) { return T(1); };
  const auto weight = [](std::int64_t i) { return T(i + 1); };
  const auto c = [&](std::int64_t i, std::int64_t j) {  // one element of C
    return dot<T>(order, k, [&](std::int64_t l) { return at[std::size_t(i * k + l)]; }, [&](std::int64_t l) { return B(l, j); });
  };

  // Encoded operands (carried in T) and, in double, the per-l sums the magnitudes are made of.
  const auto kk = std::size_t(k);
  std::vector<T> ka_e(kk), ka_w(kk), rb_e(kk), rb_w(kk);
  std::vector<double> a_sq_e(kk), a_sq_w(kk), a_abs_e(kk), a_abs_w(kk), b_sq_e(kk), b_sq_w(kk), b_abs_e(kk), b_abs_w(kk);
  for (std::int64_t l = 0; l < k; ++l) {
    const auto col = [&](std::int64_t i) { return A(i, l); };
    const auto row = [&](std::int64_t j) { return B(l, j); };
    ka_e[std::size_t(l)] = dot<T>(order, m, col, one);
    ka_w[std::size_t(l)] = dot<T>(order, m, col, weight);
    rb_e[std::size_t(l)] = dot<T>(order, n, row, one);
    rb_w[std::size_t(l)] = dot<T>(order, n, row, weight);
    for (std::int64_t i = 0; i < m; ++i) {
      const double x = A(i, l);
      a_sq_e[std::size_t(l)] += x * x;
      a_sq_w[std::size_t(l)] += double(i + 1) * x * x;
      a_abs_e[std::size_t(l)] += std::abs(x);
      a_abs_w[std::size_t(l)] += double(i + 1) * std::abs(x);
    }
    for (std::int64_t j = 0; j < n; ++j) {
      const double x = B(l, j);
      b_sq_e[std::size_t(l)] += x * x;
      b_sq_w[std::size_t(l)] += double(j + 1) * x * x;
      b_abs_e[std::size_t(l)] += std::abs(x);
      b_abs_w[std::size_t(l)] += double(j + 1) * std::abs(x);
    }
  }

  std::vector<Check> checks;
  const auto add = [&](bool is_row, bool weighted, std::int64_t h, double computed, double carried,
                       const detail::CheckMagnitudes& mags) {
    Check ch;
    ch.difference = computed - carried;
    ch.k = k;
    ch.h = h;
    ch.magnitudes = mags;
    ch.weighted = weighted;
    ch.row = is_row;
    checks.push_back(ch);
  };

  for (const std::int64_t j : spread(n, columns)) {  // column checksums: sums over the m rows of C
    std::vector<T> cj(static_cast<std::size_t>(m));
    for (std::int64_t i = 0; i < m; ++i) cj[std::size_t(i)] = c(i, j);
    const auto col = [&](std::int64_t i) { return cj[std::size_t(i)]; };
    const auto bj = [&](std::int64_t l) { return B(l, j); };
    const T computed_e = dot<T>(order, m, col, one), computed_w = dot<T>(order, m, col, weight);
    const T carried_e = dot<T>(order, k, [&](std::int64_t l) { return ka_e[std::size_t(l)]; }, bj);
    const T carried_w = dot<T>(order, k, [&](std::int64_t l) { return ka_w[std::size_t(l)]; }, bj);
    detail::CheckMagnitudes e, w;
    for (std::int64_t l = 0; l < k; ++l) {
      const double b2 = sq(B(l, j)), babs = std::abs(double(B(l, j)));
      e.squares += a_sq_e[std::size_t(l)] * b2;
      w.squares += a_sq_w[std::size_t(l)] * b2;
      e.carried_squares += sq(ka_e[std::size_t(l)]) * b2;
      w.carried_squares += sq(ka_w[std::size_t(l)]) * b2;
      e.l1 += a_abs_e[std::size_t(l)] * babs;
      w.l1 += a_abs_w[std::size_t(l)] * babs;
    }
    for (std::int64_t i = 0; i < m; ++i) {
      e.result_squares += sq(cj[std::size_t(i)]);
      w.result_squares += double(i + 1) * sq(cj[std::size_t(i)]);
    }
    // The squared weights w_i^2 <= h w_i: the weighted checksums of the squares times h bound them.
    w.squares *= double(m);
    w.result_squares *= double(m);
    e.checksum = carried_e;
    w.checksum = carried_w;
    add(false, false, m, computed_e, carried_e, e);
    add(false, true, m, computed_w, carried_w, w);
  }

  for (const std::int64_t i : spread(m, rows)) {  // row checksums: sums over the n columns of C
    std::vector<T> ci(static_cast<std::size_t>(n));
    for (std::int64_t j = 0; j < n; ++j) ci[std::size_t(j)] = c(i, j);
    const auto row = [&](std::int64_t j) { return ci[std::size_t(j)]; };
    const auto ai = [&](std::int64_t l) { return A(i, l); };
    const T computed_e = dot<T>(order, n, row, one), computed_w = dot<T>(order, n, row, weight);
    const T carried_e = dot<T>(order, k, ai, [&](std::int64_t l) { return rb_e[std::size_t(l)]; });
    const T carried_w = dot<T>(order, k, ai, [&](std::int64_t l) { return rb_w[std::size_t(l)]; });
    detail::CheckMagnitudes e, w;
    for (std::int64_t l = 0; l < k; ++l) {
      const double a2 = sq(A(i, l)), aabs = std::abs(double(A(i, l)));
      e.squares += a2 * b_sq_e[std::size_t(l)];
      w.squares += a2 * b_sq_w[std::size_t(l)];
      e.carried_squares += a2 * sq(rb_e[std::size_t(l)]);
      w.carried_squares += a2 * sq(rb_w[std::size_t(l)]);
      e.l1 += aabs * b_abs_e[std::size_t(l)];
      w.l1 += aabs * b_abs_w[std::size_t(l)];
    }
    for (std::int64_t j = 0; j < n; ++j) {
      e.result_squares += sq(ci[std::size_t(j)]);
      w.result_squares += double(j + 1) * sq(ci[std::size_t(j)]);
    }
    w.squares *= double(n);
    w.result_squares *= double(n);
    e.checksum = carried_e;
    w.checksum = carried_w;
    add(true, false, n, computed_e, carried_e, e);
    add(true, true, n, computed_w, carried_w, w);
  }
  return checks;
}

template std::vector<Check> simulate<float>(const Shape&, Data, Order, std::uint64_t, int, int);
template std::vector<Check> simulate<double>(const Shape&, Data, Order, std::uint64_t, int, int);

}  // namespace skinny::abft::simulation
