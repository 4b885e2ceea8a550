// splitmix64: a counter-based generator. Element i of a random stream is splitmix64(key ^ splitmix64(i)),
// so data is a pure function of (seed, index) whatever thread or launch shape produces it.
#pragma once

#include <cstdint>

#include <skinny/gemm/host_device.hpp>

namespace skinny {

SKINNY_HOST_DEVICE inline std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace skinny

