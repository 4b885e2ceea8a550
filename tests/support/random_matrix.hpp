// Host-side random test data: non-zero values of both signs, reproducible from a seed.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <random>
#include <vector>

namespace skinny::testing {

/// `count` values with |x| in [0.25, 1] and a random sign: never zero, so unwritten or mis-indexed
/// results cannot hide behind zeros.
template <class T>
std::vector<T> random_nonzero(std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mag(0.25, 1.0);
  std::bernoulli_distribution negative(0.5);
  std::vector<T> v(count);
  for (auto& x : v) {
    const double value = negative(rng) ? -mag(rng) : mag(rng);
    if constexpr (std::is_same_v<T, __half>)
      x = __double2half(value);
    else
      x = T(value);
  }
  return v;
}

}  // namespace skinny::testing
