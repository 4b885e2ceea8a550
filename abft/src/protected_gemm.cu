// A GEMM that carries its own checksums: C = A B through any gemm backend, the checksums of C predicted
// from the encoded operands, recomputed from C (fused encoding) and compared within round-off thresholds.
#include "detail.hpp"

#include <skinny/gemm/errors.hpp>

#include <thrust/execution_policy.h>
#include <thrust/transform.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace skinny::abft {

template <class T>
struct ProtectedGemm<T>::Buffers {
  DeviceBuffer<T> abs_a, abs_b;      ///< |A|, |B| for the magnitudes
  DeviceBuffer<T> ka, rb;            ///< (e, w)^T A: 2 x k;  B (e, w): k x 2
  DeviceBuffer<T> carried_cols, carried_rows;  ///< (e, w)^T A B: 2 x n;  A B (e, w): m x 2
  DeviceBuffer<T> mag_cols, mag_rows;          ///< the same on |A| and |B|
  DeviceBuffer<T> computed_cols, computed_rows;  ///< from C
};

template <class T>
ProtectedGemm<T>::ProtectedGemm(Context& ctx, std::int64_t m, std::int64_t n, std::int64_t k, gemm::Algo backend,
                                Threshold threshold)
    : ctx_(ctx), m_(m), n_(n), k_(k), backend_(backend), threshold_(threshold), buf_(std::make_shared<Buffers>()) {
  if (m < 1 || n < 1 || k < 1)
    throw std::invalid_argument("ProtectedGemm: need m, n, k >= 1 (got " + std::to_string(m) + ", " + std::to_string(n) +
                                ", " + std::to_string(k) + ")");
  if (!(threshold.gamma > 0) || !(threshold.override_value >= 0))
    throw std::invalid_argument("ProtectedGemm: the threshold's gamma must be > 0 and its override >= 0");
  T* probe = reinterpret_cast<T*>(std::uintptr_t(256));  // can_implement checks shapes only
  const gemm::Support s = gemm::can_implement(backend, gemm::Arguments<T>{gemm::col_major<const T>(probe, m, k),
                                                                          gemm::col_major<const T>(probe, k, n),
                                                                          gemm::col_major(probe, m, n)});
  if (!s) throw std::invalid_argument("ProtectedGemm: " + s.reason);
  Buffers& b = *buf_;
  b.abs_a = DeviceBuffer<T>(static_cast<std::size_t>(m * k));
  b.abs_b = DeviceBuffer<T>(static_cast<std::size_t>(k * n));
  b.ka = DeviceBuffer<T>(static_cast<std::size_t>(2 * k));
  b.rb = DeviceBuffer<T>(static_cast<std::size_t>(2 * k));
  b.carried_cols = DeviceBuffer<T>(static_cast<std::size_t>(2 * n));
  b.carried_rows = DeviceBuffer<T>(static_cast<std::size_t>(2 * m));
  b.mag_cols = DeviceBuffer<T>(static_cast<std::size_t>(2 * n));
  b.mag_rows = DeviceBuffer<T>(static_cast<std::size_t>(2 * m));
  b.computed_cols = DeviceBuffer<T>(static_cast<std::size_t>(2 * n));
  b.computed_rows = DeviceBuffer<T>(static_cast<std::size_t>(2 * m));
}

template <class T>
void ProtectedGemm<T>::multiply_unprotected(const T* a, const T* b, T* c) {
  gemm::gemm(ctx_, {gemm::col_major<const T>(a, m_, k_), gemm::col_major<const T>(b, k_, n_), gemm::col_major(c, m_, n_)},
             backend_);
}

template <class T>
void ProtectedGemm<T>::multiply(const T* a, const T* b, T* c) {
  Buffers& bf = *buf_;
  const cudaStream_t stream = ctx_.stream();
  multiply_unprotected(a, b, c);
  // Carried checksums: ((e, w)^T A) B and A (B (e, w)), the operands encoded with one read each.
  const EncodeParams cols{Side::cols, Backend::fused, 0}, rows{Side::rows, Backend::fused, 0};
  const auto carry = [&](const T* pa, const T* pb, T* ka, T* rb, T* out_cols, T* out_rows) {
    Encoder<T>(ctx_, m_, k_, m_, cols).run(pa, nullptr, ka);
    Encoder<T>(ctx_, k_, n_, k_, rows).run(pb, rb, nullptr);
    gemm::gemm(ctx_, {gemm::col_major<const T>(ka, 2, k_), gemm::col_major<const T>(pb, k_, n_),
                      gemm::col_major(out_cols, 2, n_)});
    gemm::gemm(ctx_, {gemm::col_major<const T>(pa, m_, k_), gemm::col_major<const T>(rb, k_, 2),
                      gemm::col_major(out_rows, m_, 2)});
  };
  carry(a, b, bf.ka.data(), bf.rb.data(), bf.carried_cols.data(), bf.carried_rows.data());
  // Magnitudes: the same checksums of |A| |B|, from which the round-off thresholds follow.
  thrust::transform(thrust::cuda::par_nosync.on(stream), a, a + m_ * k_, bf.abs_a.data(),
                    [] __device__(T v) -> T { return v < T(0) ? -v : v; });
  thrust::transform(thrust::cuda::par_nosync.on(stream), b, b + k_ * n_, bf.abs_b.data(),
                    [] __device__(T v) -> T { return v < T(0) ? -v : v; });
  SKINNY_CHECK_LAUNCH();
  carry(bf.abs_a.data(), bf.abs_b.data(), bf.ka.data(), bf.rb.data(), bf.mag_cols.data(), bf.mag_rows.data());
  const std::vector<T> mag_cols = bf.mag_cols.to_host(), mag_rows = bf.mag_rows.to_host();
  const double u = sizeof(T) == 8 ? 0x1p-53 : 0x1p-24;
  const auto tau = [&](double magnitude, std::int64_t terms) {
    return threshold_.override_value > 0 ? threshold_.override_value
                                         : threshold_.gamma * u * std::sqrt(double(k_ + terms)) * magnitude;
  };
  col_tau_.assign(static_cast<std::size_t>(2 * n_), 0);
  row_tau_.assign(static_cast<std::size_t>(2 * m_), 0);
  min_threshold_ = std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < 2 * n_; ++j)
    min_threshold_ = std::min(min_threshold_, col_tau_[std::size_t(j)] = tau(mag_cols[std::size_t(j)], m_));
  for (std::int64_t i = 0; i < 2 * m_; ++i)
    min_threshold_ = std::min(min_threshold_, row_tau_[std::size_t(i)] = tau(mag_rows[std::size_t(i)], n_));
}

template <class T>
Report ProtectedGemm<T>::verify_and_correct(T* c) {
  Buffers& bf = *buf_;
  Encoder<T>(ctx_, m_, n_, m_, EncodeParams{Side::both, Backend::fused, 0})
      .run(c, bf.computed_rows.data(), bf.computed_cols.data());
  const std::vector<T> kc = bf.carried_cols.to_host(), kx = bf.computed_cols.to_host();
  const std::vector<T> rc = bf.carried_rows.to_host(), rx = bf.computed_rows.to_host();
  detail::Checks cols, rows;
  for (std::int64_t j = 0; j < n_; ++j) {  // column checksums: 2 x n, column-major
    cols.carried_e.push_back(kc[std::size_t(2 * j)]);
    cols.carried_w.push_back(kc[std::size_t(2 * j + 1)]);
    cols.computed_e.push_back(kx[std::size_t(2 * j)]);
    cols.computed_w.push_back(kx[std::size_t(2 * j + 1)]);
    cols.tau_e.push_back(col_tau_[std::size_t(2 * j)]);
    cols.tau_w.push_back(col_tau_[std::size_t(2 * j + 1)]);
  }
  for (std::int64_t i = 0; i < m_; ++i) {  // row checksums: m x 2, column-major
    rows.carried_e.push_back(rc[std::size_t(i)]);
    rows.carried_w.push_back(rc[std::size_t(m_ + i)]);
    rows.computed_e.push_back(rx[std::size_t(i)]);
    rows.computed_w.push_back(rx[std::size_t(m_ + i)]);
    rows.tau_e.push_back(row_tau_[std::size_t(i)]);
    rows.tau_w.push_back(row_tau_[std::size_t(m_ + i)]);
  }
  Report r = detail::analyze(cols, rows);
  if (r.finding != Finding::corrected) return r;
  // The element from its column's carried checksum and the other elements of the column: exact for an
  // error of any size (also Inf or NaN), unlike subtracting the difference.
  scratch_host_.resize(static_cast<std::size_t>(m_));
  T* column = c + r.col * m_;
  SKINNY_CUDA_TRY(cudaMemcpyAsync(scratch_host_.data(), column, std::size_t(m_) * sizeof(T), cudaMemcpyDeviceToHost,
                                  ctx_.stream()));
  ctx_.synchronize();
  double others = 0;
  for (std::int64_t i = 0; i < m_; ++i)
    if (i != r.row) others += double(scratch_host_[std::size_t(i)]);
  const T fixed = T(cols.carried_e[std::size_t(r.col)] - others);
  r.error = double(scratch_host_[std::size_t(r.row)]) - double(fixed);
  SKINNY_CUDA_TRY(cudaMemcpyAsync(column + r.row, &fixed, sizeof(T), cudaMemcpyHostToDevice, ctx_.stream()));
  ctx_.synchronize();
  return r;
}

template class ProtectedGemm<float>;
template class ProtectedGemm<double>;

}  // namespace skinny::abft
