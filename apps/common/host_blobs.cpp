#include "host_blobs.hpp"

#include <skinny/gemm/splitmix64.hpp>

#include <algorithm>
#include <cmath>
#include <thread>

namespace skinny::apps {
namespace {

/// Uniform in (0, 1]: never 0, so the logarithm of Box-Muller is finite (as blobs.cu).
double unit(std::uint64_t h) { return (double(h >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

template <class T>
std::vector<T> host_blobs(T* x, std::int64_t row0, std::int64_t rows, std::int64_t d, int k, std::uint64_t seed,
                          int threads, double stddev, double center_box) {
  // The keys and the centres as blobs.cu derives them.
  const std::uint64_t key_c = splitmix64(seed ^ 0x43454e54455253ull), key_x = splitmix64(seed ^ 0x504f494e5453ull);
  std::vector<T> centers(static_cast<std::size_t>(k) * static_cast<std::size_t>(d));
  for (std::size_t i = 0; i < centers.size(); ++i)
    centers[i] = T(center_box * (2.0 * unit(splitmix64(key_c ^ splitmix64(std::uint64_t(i)))) - 1.0));
  const double pi = std::acos(-1.0);
  const auto fill = [&](std::int64_t r_begin, std::int64_t r_end) {
    for (std::int64_t r = r_begin; r < r_end; ++r) {
      const std::int64_t row = row0 + r;
      const T* c = centers.data() + (row % k) * d;
      for (std::int64_t col = 0; col < d; ++col) {
        const std::uint64_t i = static_cast<std::uint64_t>(row * d + col);
        const std::uint64_t h = splitmix64(key_x ^ splitmix64(i));
        const double z = std::sqrt(-2.0 * std::log(unit(h))) * std::cos(pi * 2.0 * unit(splitmix64(h)));
        x[r * d + col] = T(double(c[col]) + stddev * z);
      }
    }
  };
  const std::int64_t parts = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, rows));
  std::vector<std::thread> pool;
  for (std::int64_t p = 1; p < parts; ++p) pool.emplace_back(fill, rows * p / parts, rows * (p + 1) / parts);
  fill(0, rows / parts);
  for (std::thread& t : pool) t.join();
  return centers;
}

template std::vector<float> host_blobs(float*, std::int64_t, std::int64_t, std::int64_t, int, std::uint64_t, int,
                                       double, double);
template std::vector<double> host_blobs(double*, std::int64_t, std::int64_t, std::int64_t, int, std::uint64_t, int,
                                        double, double);

}  // namespace skinny::apps
