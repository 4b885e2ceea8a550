// Names of backends, findings and bit ranges; checksum block counts; what a backend cannot do.
#include "detail.hpp"

#include <stdexcept>
#include <string>

namespace skinny::abft {

std::string_view to_string(Backend b) {
  switch (b) {
    case Backend::cublas: return "cublas";
    case Backend::tsm2: return "tsm2";
    case Backend::fused: return "fused";
  }
  return "?";
}

std::vector<std::string> backend_names() { return {"cublas", "tsm2", "fused"}; }

Backend backend_from_name(std::string_view name) {
  for (Backend b : {Backend::cublas, Backend::tsm2, Backend::fused})
    if (to_string(b) == name) return b;
  throw std::invalid_argument("unknown ABFT backend '" + std::string(name) + "' (valid: cublas, tsm2, fused)");
}

std::string_view to_string(Finding f) {
  switch (f) {
    case Finding::clean: return "clean";
    case Finding::corrected: return "corrected";
    case Finding::detected_unlocated: return "detected, not located";
  }
  return "?";
}

BitRange bit_range_from_name(std::string_view name) {
  if (name == "all" || name == "any") return BitRange::any;
  if (name == "sign") return BitRange::sign;
  if (name == "exponent") return BitRange::exponent;
  if (name == "high") return BitRange::high_mantissa;
  if (name == "low") return BitRange::low_mantissa;
  throw std::invalid_argument("unknown bit range '" + std::string(name) + "' (valid: all, sign, exponent, high, low)");
}

std::string_view to_string(BitRange r) {
  switch (r) {
    case BitRange::any: return "all";
    case BitRange::sign: return "sign";
    case BitRange::exponent: return "exponent";
    case BitRange::high_mantissa: return "high";
    case BitRange::low_mantissa: return "low";
  }
  return "?";
}

std::int64_t blocks(std::int64_t extent, std::int64_t density) {
  if (density <= 0 || density >= extent) return 1;
  return (extent + density - 1) / density;
}

std::string cannot_encode(Backend backend, std::int64_t m, std::int64_t n, std::int64_t density) {
  if (m < 1 || n < 1) return "the matrix is " + std::to_string(m) + " x " + std::to_string(n) + ": need m, n >= 1";
  if (density < 0) return "density " + std::to_string(density) + " must be >= 0 (0: whole dimensions)";
  const std::int64_t widest = 2 * std::max(blocks(m, density), blocks(n, density));
  if (backend == Backend::tsm2 && widest > 64)
    return "tsm2 encodes at most 32 checksum blocks per dimension (density " + std::to_string(density) + " gives " +
           std::to_string(widest / 2) + "); use cublas or fused";
  if (backend == Backend::fused && density > 0 && density < std::max(m, n) && density % detail::kFusedBand != 0)
    return "fused needs the density to be a multiple of " + std::to_string(detail::kFusedBand) + " (got " +
           std::to_string(density) + "); use cublas";
  return "";
}

}  // namespace skinny::abft
