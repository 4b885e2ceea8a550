// A protected GEMM's checksum comparisons simulated on the CPU in float or double: C = A B, the carried
// checksums and the ones recomputed from C, each sum taken in a chosen order, on data of a chosen kind.
// Gives the clean differences and the magnitudes the threshold models read, so that the models can be
// calibrated and tested without a GPU (docs/abft-threshold.md).
#pragma once

#include "../../abft/src/threshold.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace skinny::abft::simulation {

/// How every sum (products over the inner dimension, checksums over rows or columns) is taken.
enum class Order {
  sequential,  ///< one term after the other, the product and the addition each rounded
  fma,         ///< one term after the other through fused multiply-adds (a GPU thread's accumulator)
  blocked,     ///< 32 lanes each summing every 32nd term (fma), then a tree over the lanes (a GPU tile, split-K)
};
/// The kinds of data: A and B drawn independently unless said otherwise.
enum class Data {
  uniform_signed,    ///< uniform in [-1, 1]
  uniform_positive,  ///< uniform in [0, 1]: a non-zero mean, partial sums that drift
  normal,            ///< standard normal
  mixed_magnitudes,  ///< uniform in [-1, 1] times 2^e, e uniform in [-16, 16]
  offset_rows,       ///< A's rows have means +1 or -1 at random (they cancel in its column sums), B in [0, 1]
  positive_times_signed,  ///< A in [0, 1], B in [-1, 1]: the carried checksums of A drift, C does not
};
std::string_view to_string(Order o);
std::string_view to_string(Data d);
inline constexpr Order kOrders[] = {Order::sequential, Order::fma, Order::blocked};
inline constexpr Data kData[] = {Data::uniform_signed, Data::uniform_positive, Data::normal, Data::mixed_magnitudes,
                                 Data::offset_rows, Data::positive_times_signed};

/// C (m x n) = A (m x k) B (k x n).
struct Shape {
  std::int64_t m = 0, k = 0, n = 0;
};

/// One comparison: computed - carried, and what its threshold is computed from.
struct Check {
  double difference = 0;
  std::int64_t k = 0, h = 0;  ///< inner dimension; terms the checksum adds
  detail::CheckMagnitudes magnitudes;
  bool weighted = false;  ///< the (1, 2, ..., h) checksum rather than the plain one
  bool row = false;       ///< a row checksum (adds over the columns of C) rather than a column one
};

/// The plain and weighted checks of `columns` columns and `rows` rows of C spread over it (the first and
/// the last included), for one A and B drawn from `seed`, every sum taken in `order` in T's arithmetic.
template <class T>
std::vector<Check> simulate(const Shape& shape, Data data, Order order, std::uint64_t seed, int columns, int rows);

}  // namespace skinny::abft::simulation
