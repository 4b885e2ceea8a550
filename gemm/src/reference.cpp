// CPU reference GEMM: everything in double, rows split across the host's cores.
#include <skinny/gemm/reference.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <thread>

namespace skinny::gemm {
namespace {

double to_double(float x) { return x; }
double to_double(double x) { return x; }
double to_double(__half x) { return double(__half2float(x)); }

template <class T>
std::vector<double> dense_row_major(const HostMatrix& s, const std::vector<T>& data, const char* name) {
  if (s.rows < 1 || s.cols < 1 || std::int64_t(data.size()) < s.span())
    throw std::invalid_argument(std::string("reference_gemm: ") + name + " (" + std::to_string(s.rows) + "x" +
                                std::to_string(s.cols) + ", ld " + std::to_string(s.ld) + ") needs " +
                                std::to_string(s.span()) + " elements, has " + std::to_string(data.size()));
  std::vector<double> out(std::size_t(s.rows * s.cols));
  for (std::int64_t i = 0; i < s.rows; ++i)
    for (std::int64_t j = 0; j < s.cols; ++j) out[std::size_t(i * s.cols + j)] = to_double(data[s.offset(i, j)]);
  return out;
}

template <class F>
void parallel_rows(std::int64_t rows, F&& f) {
  const std::int64_t workers = std::max<std::int64_t>(1, std::min<std::int64_t>(rows, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (std::int64_t w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (std::int64_t i = w; i < rows; i += workers) f(i);
    });
  for (auto& t : pool) t.join();
}

}  // namespace

template <class TIn, class TOut>
std::vector<double> reference_gemm(const HostMatrix& a_shape, const std::vector<TIn>& a, const HostMatrix& b_shape,
                                   const std::vector<TIn>& b, const HostMatrix& c_shape, std::vector<TOut>& c,
                                   double alpha, double beta) {
  if (a_shape.cols != b_shape.rows || a_shape.rows != c_shape.rows || b_shape.cols != c_shape.cols)
    throw std::invalid_argument("reference_gemm: shape mismatch");
  const std::vector<double> A = dense_row_major(a_shape, a, "A");
  const std::vector<double> B = dense_row_major(b_shape, b, "B");
  const std::int64_t m = c_shape.rows, n = c_shape.cols, k = a_shape.cols;
  if (std::int64_t(c.size()) < c_shape.span()) throw std::invalid_argument("reference_gemm: C storage too small");
  std::vector<double> result(std::size_t(m * n));
  parallel_rows(m, [&](std::int64_t i) {
    double* row = &result[std::size_t(i * n)];
    for (std::int64_t p = 0; p < k; ++p) {
      const double aip = A[std::size_t(i * k + p)];
      const double* brow = &B[std::size_t(p * n)];
      for (std::int64_t j = 0; j < n; ++j) row[j] += aip * brow[j];
    }
    for (std::int64_t j = 0; j < n; ++j) {
      TOut& out = c[std::size_t(c_shape.offset(i, j))];
      row[j] = alpha * row[j] + (beta == 0 ? 0.0 : beta * to_double(out));
      out = TOut(row[j]);
    }
  });
  return result;
}

template <class TOut>
ErrorReport compare(const HostMatrix& s, const std::vector<TOut>& c, const std::vector<double>& reference) {
  ErrorReport r;
  double diff2 = 0, ref2 = 0;
  for (std::int64_t i = 0; i < s.rows; ++i)
    for (std::int64_t j = 0; j < s.cols; ++j) {
      const double got = to_double(c[std::size_t(s.offset(i, j))]);
      const double want = reference[std::size_t(i * s.cols + j)];
      if (!std::isfinite(got)) {
        ++r.non_finite;
        continue;
      }
      const double d = std::abs(got - want);
      diff2 += d * d;
      ref2 += want * want;
      if (d > r.worst_abs || r.worst_row < 0) {
        r.worst_abs = d;
        r.worst_row = i;
        r.worst_col = j;
        r.worst_value = got;
        r.worst_reference = want;
      }
    }
  r.relative_error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  if (r.non_finite > 0) r.relative_error = INFINITY;
  return r;
}

double error_bound(std::int64_t k, double unit_roundoff) {
  return 8.0 * unit_roundoff * (std::sqrt(double(std::max<std::int64_t>(k, 1))) + 1.0);
}

template std::vector<double> reference_gemm(const HostMatrix&, const std::vector<float>&, const HostMatrix&,
                                            const std::vector<float>&, const HostMatrix&, std::vector<float>&, double,
                                            double);
template std::vector<double> reference_gemm(const HostMatrix&, const std::vector<double>&, const HostMatrix&,
                                            const std::vector<double>&, const HostMatrix&, std::vector<double>&,
                                            double, double);
template std::vector<double> reference_gemm(const HostMatrix&, const std::vector<__half>&, const HostMatrix&,
                                            const std::vector<__half>&, const HostMatrix&, std::vector<float>&,
                                            double, double);
template ErrorReport compare(const HostMatrix&, const std::vector<float>&, const std::vector<double>&);
template ErrorReport compare(const HostMatrix&, const std::vector<double>&, const std::vector<double>&);

}  // namespace skinny::gemm
