// Host-side random test data: non-zero values of both signs, reproducible from a seed.
#pragma once

#include <skinny/gemm/splitmix64.hpp>

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace skinny::testing {

/// `count` values with |x| in [0.25, 1] and a random sign: never zero, so unwritten or mis-indexed
/// results cannot hide behind zeros. Element i is a hash of (seed, i) (splitmix64): cheap enough for
/// the 10^7-element operands of the tall-skinny tests.
template <class T>
std::vector<T> random_nonzero(std::size_t count, std::uint32_t seed) {
  std::vector<T> v(count);
  std::uint64_t state = 0x9E3779B97F4A7C15ull * (std::uint64_t(seed) + 1);
  for (auto& x : v) {
    const std::uint64_t z = splitmix64(state);
    state += 0x9E3779B97F4A7C15ull;
    const double magnitude = 0.25 + 0.75 * double(z >> 11) * 0x1.0p-53;
    const double value = (z & 1) ? -magnitude : magnitude;
    if constexpr (std::is_same_v<T, __half>)
      x = __double2half(value);
    else
      x = T(value);
  }
  return v;
}

}  // namespace skinny::testing
