// The arithmetic of gemm::nearest's certificate (ExactMethod::fast_then_recheck), on the host and in its
// kernels: whether one-product distances settle a point's label, and, turned around, which centres a point
// they leave must have re-checked (its candidates). The CPU tests check that the two agree.
#pragma once

#include <skinny/gemm/host_device.hpp>
#include <skinny/gemm/nearest.hpp>

#include <cmath>
#include <cstdint>

namespace skinny::gemm::detail {

/// The one-product kernel's distance to centre j, with ||x||^2 added, is V_j = ||x^ - c^_j||^2 + s + e_j:
/// the exact distance between the point and centre as the tensor cores take them (x^: float points
/// truncated to TF32 or their half copy, 16-bit points as they are; c^: centres rounded to TF32, half or
/// bfloat16), shifted by s = ||x||^2 - ||x^||^2 (the same for every centre) and off by e_j (float sums).
/// Per point:
///  - r  >= ||x^ - x|| + ||c^_j - c||: u_x ||x|| (or, re-certifying float points, ||x^ - x|| itself) + the
///    largest ||c^_j - c_j|| (centre_parts_kernel) + lin sqrt(d), lin a slack for subnormal elements
///    (half's: 2^-25 each);
///  - E  >= |e_j|: the tensor cores' truncating float sums ((d + 16) 2^-23 sum |x^_i c^_i| <= .. ||x|| M^,
///    Cauchy-Schwarz), ||c^||^2's rounding and the epilogue's FMA;
///  - S  >= |s|: 2 u_x ||x||^2 and the given norm's rounding.
/// By the triangle inequality ||x - c_j|| lies within r of sqrt(V_j - s -+ E); since sqrt(V2 - t) -
/// sqrt(V1 - t) grows with t for V2 > V1, centre j is farther than the best (value V1) for certain when
/// sqrt(V_j + S - E) - sqrt(V1 + S + E) > 2 r, and the best centre is the exact argmin when that holds for
/// the second smallest value. The margin is a difference of distances, not of squared norms: points far
/// from the origin keep it.
struct CertificateBound {
  double u_x = 0, u_c = 0, lin = 0, sums = 0;
};

/// The bound for one-product passes over points of `type` (float: TF32 products) and d dimensions.
inline CertificateBound certificate_bound(Element type, std::int64_t d) {
  CertificateBound bound;
  bound.u_x = type == Element::f32 ? 0x1p-10 : 0.0;
  bound.u_c = type == Element::bf16 ? 0x1p-8 : 0x1p-11;
  bound.lin = type == Element::f16 ? 0x1p-25 : 0x1p-120;
  bound.sums = static_cast<double>(d + 16) * 0x1p-23;
  return bound;
}

/// What the certificate needs besides a point's own values: the bound, sqrt(d), the largest ||c|| and the
/// largest ||c^ - c|| over the centres.
struct CertificateTerms {
  CertificateBound bound;
  double sqrt_d = 0, c_norm = 0, c_error = 0;
};

/// The certificate's terms for a point with squared norm x_sq and best one-product value `best`
/// (||c^||^2 - 2 x^.c^): a centre with value v is farther than the best for certain when
/// sqrt(max(x_sq + v + shift - e, 0)) - near > margin (never for a NaN best: near is NaN). x_error: ||x^ - x||
/// rounded up, or negative for its bound u_x ||x||.
struct Reach {
  double near, margin, shift, e;
};
SKINNY_HOST_DEVICE inline Reach reach_of(const CertificateTerms& t, double x_sq, float best, double x_error) {
  const CertificateBound& b = t.bound;
  const double x_norm = sqrt(fmax(x_sq, 0.0));
  const double c_rounded = t.c_norm * (1 + b.u_c) + b.lin * t.sqrt_d;  // >= every ||c^||
  const double r = (x_error >= 0 ? x_error : b.u_x * x_norm) + t.c_error + b.lin * t.sqrt_d;
  Reach q;
  q.e = 0x1p-22 * c_rounded * c_rounded + (2 * b.sums + 0x1p-21) * x_norm * c_rounded;
  q.shift = (2 * b.u_x + 0x1p-20) * x_sq;
  q.near = best == best ? sqrt(fmax(x_sq + best + q.shift + q.e, 0.0)) : NAN;  // fmax would drop a NaN
  q.margin = 2 * r * (1 + 0x1p-10) + 0x1p-100;
  return q;
}

/// Whether a point with squared norm x_sq, best and second best one-product values `best` and `second`
/// certainly has the exact argmin's label. NaNs certify nothing.
SKINNY_HOST_DEVICE inline bool certified(const CertificateTerms& t, double x_sq, float best, float second,
                                         double x_error = -1) {
  const Reach q = reach_of(t, x_sq, best, x_error);
  const double far = sqrt(fmax(x_sq + static_cast<double>(second) + q.shift - q.e, 0.0));
  return far - q.near > q.margin;
}

/// The largest one-product value a centre may have and still be the exact argmin of a point the
/// certificate leaves (Reach turned around: a value above it would certify as a second best), rounded up
/// with room to spare, since a superset of the candidates costs only their exact products. NaN (no best)
/// collects none.
SKINNY_HOST_DEVICE inline float collect_bound(const CertificateTerms& t, double x_sq, float best, double x_error = -1) {
  const Reach q = reach_of(t, x_sq, best, x_error);
  const double reach = q.near + q.margin;
  const double v = reach * reach - x_sq - q.shift + q.e;
  const double roomy = v + 0x1p-20 * (fabs(v) + x_sq);
#if defined(__CUDA_ARCH__)
  return __double2float_ru(roomy);
#else
  const float f = static_cast<float>(roomy);
  return static_cast<double>(f) < roomy ? std::nextafter(f, INFINITY) : f;
#endif
}

}  // namespace skinny::gemm::detail
