// One bit of a value's binary representation flipped: the fault that injection campaigns plant (ABFT's
// inject_bit_flip, protected K-means' --inject). Host code; any 32- or 64-bit type.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace skinny {

/// v with bit `bit` (0 = lowest, 8 sizeof(T) - 1 = highest: a float's sign) flipped. Precondition: bit in range.
template <class T>
T with_bit_flipped(T v, int bit) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "32- or 64-bit values");
  using Bits = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  Bits u;
  std::memcpy(&u, &v, sizeof u);
  u ^= Bits(1) << bit;
  std::memcpy(&v, &u, sizeof u);
  return v;
}

}  // namespace skinny
