// Float values as TF32 tensor cores take them, on the host (skinny/gemm/tf32.hpp on floats): truncated
// (the points: the tensor cores ignore the low 13 bits) or rounded to nearest, ties away from zero (the
// centres, as gemm::nearest rounds them).
#pragma once

#include <skinny/gemm/tf32.hpp>

#include <cstdint>
#include <cstring>

namespace skinny::testing {

inline float with_bits(std::uint32_t u) {
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}
inline std::uint32_t bits_of(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}
inline float tf32_truncated(float v) { return with_bits(gemm::tf32_truncated_bits(bits_of(v))); }
inline float tf32_rounded(float v) { return with_bits(gemm::tf32_rounded_bits(bits_of(v))); }

}  // namespace skinny::testing
