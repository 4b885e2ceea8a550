// Params::protect on the GPU: clean fits see no fault and give the unprotected result; an injected fault
// above its bound is detected and recomputed, and the fit ends exactly as the clean protected fit.
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/nearest.hpp>
#include <skinny/kmeans/kmeans.hpp>
#include <skinny/kmeans/stream.hpp>

#include "support/gpu_fixture.hpp"
#include "support/random_matrix.hpp"

#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace skinny::kmeans {
namespace {

using testing::shared_context;

class ProtectGpu : public testing::GpuTest {};

Params protected_params(int k, gemm::Algo backend = gemm::Algo::automatic) {
  Params p;
  p.k = k;
  p.seed = 11;
  p.max_iter = 20;
  p.backend = backend;
  p.protect = true;
  return p;
}

/// Blobs on the device (float or double).
template <class T>
DeviceBuffer<T> blobs(std::int64_t n, std::int64_t d, int k, std::vector<std::int32_t>* truth = nullptr) {
  DeviceBuffer<T> x(static_cast<std::size_t>(n * d));
  const Blobs<T> b = make_blobs<T>(shared_context(), x.data(), n, d, k, 5);
  if (truth) *truth = b.labels;
  return x;
}

/// `blob_count` blobs (0: k), fitted with k clusters; returns the protected fit's report.
template <class T>
ProtectionReport clean_fit_equals_unprotected(std::int64_t n, std::int64_t d, int k, gemm::Algo backend,
                                              gemm::Math math = gemm::Math::exact, int blob_count = 0) {
  const DeviceBuffer<T> x = blobs<T>(n, d, blob_count > 0 ? blob_count : k);
  Params p = protected_params(k, backend);
  p.math = math;
  const Result<T> guarded = fit<T>(shared_context(), x.data(), n, d, p);
  p.protect = false;
  const Result<T> plain = fit<T>(shared_context(), x.data(), n, d, p);
  const std::string shape = "n " + std::to_string(n) + " d " + std::to_string(d) + " k " + std::to_string(k) + " " +
                            std::string(gemm::to_string(backend)) + (math == gemm::Math::fast ? " fast" : "");
  EXPECT_TRUE(guarded.protection.enabled);
  EXPECT_FALSE(plain.protection.enabled);
  EXPECT_EQ(0, guarded.protection.distance_detections) << shape;
  EXPECT_EQ(0, guarded.protection.sum_detections) << shape;
  EXPECT_FALSE(guarded.protection.injected);
  EXPECT_GE(guarded.protection.rows_verified, n * (guarded.n_iter + 2)) << shape;  // setup + iterations + final
  if (k > 1) EXPECT_GT(guarded.protection.max_clean_ratio, 0) << shape;  // one centroid is its own checksum
  EXPECT_LT(guarded.protection.max_clean_ratio, 1) << shape;
  // Separated blobs (no point near a tie) or exact labels: the other GEMM shape (k + 1 columns) or the
  // re-check gives the same labels. Except for float in exact mode on Hopper: there the unprotected fit's
  // exact products run on wgmma, the protected fit's on mma.sync (their per-point check is calibrated for
  // its sums); both float-accurate, the two can part at a near tie, and the fits after it settle in nearby
  // optima (70001 x 128, k = 130: 952 labels apart, inertia 2.4e-6 apart).
  const bool same_exact_products = !(std::is_same_v<T, float> && math == gemm::Math::exact &&
                                     backend == gemm::Algo::automatic && gemm::nearest_uses_wgmma(shared_context()));
  if (same_exact_products) {
    EXPECT_EQ(plain.labels, guarded.labels) << shape;
    EXPECT_EQ(plain.n_iter, guarded.n_iter) << shape;
  }
  EXPECT_NEAR(plain.inertia, guarded.inertia, (same_exact_products ? 1e-6 : 1e-5) * plain.inertia) << shape;
  return guarded.protection;
}

TEST_F(ProtectGpu, CleanFitsSeeNoFaultAndMatchTheUnprotectedFit) {
  for (const gemm::Algo backend : {gemm::Algo::automatic, gemm::Algo::cublas}) {
    clean_fit_equals_unprotected<float>(1000, 17, 7, backend);
    clean_fit_equals_unprotected<float>(127, 3, 2, backend);
    clean_fit_equals_unprotected<float>(7, 1, 1, backend);
    clean_fit_equals_unprotected<float>(70001, 128, 130, backend);  // several chunks, many clusters
    clean_fit_equals_unprotected<double>(1000, 17, 7, backend);
    clean_fit_equals_unprotected<double>(4099, 2, 16, backend);
  }
  // The fused kernel: exact by one product per term, checked by blocks, and the uncertain points re-checked
  // and checked on their own (two clusters share each blob: points between them are left uncertain); fast
  // mode by blocks alone.
  EXPECT_GT(
      clean_fit_equals_unprotected<float>(70001, 128, 130, gemm::Algo::automatic, gemm::Math::exact, 65).rows_rechecked,
      0);
  EXPECT_EQ(
      clean_fit_equals_unprotected<float>(70001, 128, 130, gemm::Algo::automatic, gemm::Math::fast).rows_rechecked, 0);
  EXPECT_EQ(clean_fit_equals_unprotected<float>(70001, 128, 130, gemm::Algo::cublas).rows_rechecked, 0);
}

/// A clean protected fit of 16-bit data sees no fault and gives the unprotected fit's labels: few clusters
/// on rows widened to float, and many clusters through the fused kernel on the 16-bit rows themselves, whose
/// fast mode rounds the centres to the data's type (the check's bound follows).
template <class H>
void sixteen_bit_fit_is_protected(std::int64_t n, std::int64_t d, int k, gemm::Math math) {
  const DeviceBuffer<float> x = blobs<float>(n, d, k);
  const std::vector<float> host = x.to_host();
  std::vector<H> narrow(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) narrow[i] = H(host[i] / 16);
  const DeviceBuffer<H> xh(narrow);
  Params p = protected_params(k);
  p.math = math;
  const Result<float> guarded = fit<H>(shared_context(), xh.data(), n, d, p);
  p.protect = false;
  const Result<float> plain = fit<H>(shared_context(), xh.data(), n, d, p);
  const std::string shape = std::string(std::is_same_v<H, __half> ? "half" : "bf16") + " n=" + std::to_string(n) +
                            " d=" + std::to_string(d) + " k=" + std::to_string(k) +
                            (math == gemm::Math::fast ? " fast" : " exact");
  EXPECT_EQ(0, guarded.protection.distance_detections + guarded.protection.sum_detections) << shape;
  EXPECT_LT(guarded.protection.max_clean_ratio, 1) << shape;
  EXPECT_EQ(plain.labels, guarded.labels) << shape;
}

TEST_F(ProtectGpu, SixteenBitDataIsProtectedToo) {
  sixteen_bit_fit_is_protected<__half>(3001, 33, 5, gemm::Math::exact);
  for (const gemm::Math math : {gemm::Math::exact, gemm::Math::fast}) {
    sixteen_bit_fit_is_protected<__half>(4099, 64, 150, math);
    sixteen_bit_fit_is_protected<__nv_bfloat16>(4099, 64, 150, math);
  }
}

/// Injects `target` faults from several seeds: each fault above its bound must be detected, and the fit
/// must end exactly as the clean protected fit (labels, centroids, iterations). Returns how many were above.
template <class T>
int faults_are_corrected(FaultTarget target, std::int64_t n, std::int64_t d, int k, int seeds) {
  const DeviceBuffer<T> x = blobs<T>(n, d, k);
  Params p = protected_params(k);
  p.max_iter = 6;
  p.tol = 0;
  p.stop_when_stable = false;
  const Result<T> clean = fit<T>(shared_context(), x.data(), n, d, p);
  int above = 0;
  for (int s = 0; s < seeds; ++s) {
    p.inject = {target, 1 + s % p.max_iter, static_cast<std::uint64_t>(1000 + s)};
    const Result<T> r = fit<T>(shared_context(), x.data(), n, d, p);
    const ProtectionReport& f = r.protection;
    EXPECT_TRUE(f.injected) << "seed " << s;
    EXPECT_EQ(target, f.target);
    const double error = std::fabs(f.after - f.before);
    const bool must_detect = target == FaultTarget::sums || !(error <= f.bound);
    if (!must_detect) continue;  // rounding-sized: not seen by design
    ++above;
    EXPECT_TRUE(f.detected) << "seed " << s << " bit " << f.bit << ": " << f.before << " -> " << f.after
                            << ", bound " << f.bound;
    EXPECT_EQ(1, f.distance_detections + f.sum_detections) << "seed " << s;
    EXPECT_EQ(clean.labels, r.labels) << "seed " << s;
    EXPECT_EQ(clean.centroids, r.centroids) << "seed " << s;
  }
  return above;
}

TEST_F(ProtectGpu, DistanceFaultsAboveTheBoundAreDetectedAndCorrected) {
  // Bits drawn at random: about the upper half of a float's bits (exponent, high mantissa) lands above.
  EXPECT_GE(faults_are_corrected<float>(FaultTarget::distances, 5003, 19, 9, 40), 10);
  EXPECT_GE(faults_are_corrected<float>(FaultTarget::distances, 70001, 64, 130, 12), 3);
  EXPECT_GE(faults_are_corrected<double>(FaultTarget::distances, 2001, 7, 3, 30), 10);
}

TEST_F(ProtectGpu, EveryCentroidSumFaultIsDetectedAndCorrected) {
  EXPECT_EQ(faults_are_corrected<float>(FaultTarget::sums, 5003, 19, 9, 30), 30);
  EXPECT_EQ(faults_are_corrected<double>(FaultTarget::sums, 2001, 7, 300, 20), 20);
}

TEST_F(ProtectGpu, WeightedSumsAreCheckedToo) {
  const std::int64_t n = 2003, d = 5;
  const int k = 4;
  const DeviceBuffer<float> x = blobs<float>(n, d, k);
  std::vector<double> w(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.5 + double(i % 7);
  Params p = protected_params(k);
  const Result<float> clean = fit<float>(shared_context(), x.data(), n, d, p, {}, w);
  EXPECT_EQ(0, clean.protection.sum_detections);
  p.inject = {FaultTarget::sums, 1, 77};
  const Result<float> r = fit<float>(shared_context(), x.data(), n, d, p, {}, w);
  EXPECT_TRUE(r.protection.detected);
  EXPECT_EQ(clean.centroids, r.centroids);
}

TEST_F(ProtectGpu, InjectionNeedsProtectAndProtectNeedsOneGpuInMemory) {
  const std::int64_t n = 100, d = 4;
  const DeviceBuffer<float> x = blobs<float>(n, d, 3);
  Params p = protected_params(3);
  p.protect = false;
  p.inject = {FaultTarget::sums, 1, 1};
  EXPECT_THROW(fit<float>(shared_context(), x.data(), n, d, p), std::invalid_argument);
  p.protect = true;
  p.inject.iteration = 0;
  EXPECT_THROW(fit<float>(shared_context(), x.data(), n, d, p), std::invalid_argument);
  p.inject = {};
  const std::vector<float> host = x.to_host();
  EXPECT_THROW(fit_host<float>(shared_context(), host.data(), n, d, p), std::invalid_argument);
}

}  // namespace
}  // namespace skinny::kmeans
