// Float values as TF32 tensor cores take them, on the host: truncated (the points: the tensor cores ignore
// the low 13 bits) or rounded to nearest, ties away from zero (the centres, as gemm::nearest rounds them).
#pragma once

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
inline float tf32_truncated(float v) { return with_bits(bits_of(v) & 0xffffe000u); }
inline float tf32_rounded(float v) { return with_bits((bits_of(v) + 0x1000u) & 0xffffe000u); }

}  // namespace skinny::testing
