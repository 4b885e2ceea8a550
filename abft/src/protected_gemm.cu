// A GEMM that carries its own checksums: C = A B through any gemm backend, the checksums of C predicted
// from the encoded operands, recomputed from C (fused encoding) and compared within round-off thresholds
// computed from the magnitudes of the same product (threshold.hpp, docs/abft-threshold.md).
#include "detail.hpp"
#include "threshold.hpp"

#include <skinny/gemm/errors.hpp>

#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace skinny::abft {

template <class T>
struct ProtectedGemm<T>::Buffers {
  DeviceBuffer<T> ka, rb;                        ///< (e, w)^T A: 2 x k;  B (e, w): k x 2
  DeviceBuffer<T> carried_cols, carried_rows;    ///< (e, w)^T A B: 2 x n;  A B (e, w): m x 2
  DeviceBuffer<T> computed_cols, computed_rows;  ///< from C
  // The magnitudes of the thresholds. Rounding model: A o A, B o B; their encodings stacked with the
  // squares of the carried ones ([(e, w)^T (A o A); ka o ka]: 4 x k, [(B o B)(e, w), rb o rb]: k x 4);
  // their products (4 x n, m x 4); the checksums of C o C (2 x n, m x 2). L1 bound: |A|, |B|, their
  // encodings (2 x k, k x 2) and products (2 x n, m x 2).
  DeviceBuffer<T> mag_a, mag_b;
  DeviceBuffer<T> squares_ka;  ///< rounding: (e, w)^T (A o A), 2 x k, before it is stacked into mag_ka
  DeviceBuffer<T> mag_ka, mag_rb;
  DeviceBuffer<T> mag_cols, mag_rows;
  DeviceBuffer<T> square_cols, square_rows;
};

template <class T>
ProtectedGemm<T>::ProtectedGemm(Context& ctx, std::int64_t m, std::int64_t n, std::int64_t k, gemm::Algo backend,
                                Threshold threshold)
    : ctx_(ctx), m_(m), n_(n), k_(k), backend_(backend), threshold_(threshold), buf_(std::make_shared<Buffers>()) {
  if (m < 1 || n < 1 || k < 1)
    throw std::invalid_argument("ProtectedGemm: need m, n, k >= 1 (got " + std::to_string(m) + ", " + std::to_string(n) +
                                ", " + std::to_string(k) + ")");
  if (!(threshold.gamma >= 0) || !std::isfinite(threshold.gamma) || !(threshold.override_value >= 0))
    throw std::invalid_argument("ProtectedGemm: the threshold's gamma must be >= 0 (0: calibrated) and its override >= 0");
  if (threshold_.gamma == 0) threshold_.gamma = default_gamma<T>(threshold.model);
  T* probe = reinterpret_cast<T*>(std::uintptr_t(256));  // can_implement checks shapes only
  const gemm::Support s = gemm::can_implement(backend, gemm::Arguments<T>{gemm::col_major<const T>(probe, m, k),
                                                                          gemm::col_major<const T>(probe, k, n),
                                                                          gemm::col_major(probe, m, n)});
  if (!s) throw std::invalid_argument("ProtectedGemm: " + s.reason);
  const auto size = [](std::int64_t count) { return static_cast<std::size_t>(count); };
  const bool rounding = threshold_.model == ThresholdModel::rounding;
  const std::int64_t pairs = rounding ? 4 : 2;  // magnitudes per row or column
  Buffers& b = *buf_;
  b.ka = DeviceBuffer<T>(size(2 * k));
  b.rb = DeviceBuffer<T>(size(2 * k));
  b.carried_cols = DeviceBuffer<T>(size(2 * n));
  b.carried_rows = DeviceBuffer<T>(size(2 * m));
  b.computed_cols = DeviceBuffer<T>(size(2 * n));
  b.computed_rows = DeviceBuffer<T>(size(2 * m));
  b.mag_a = DeviceBuffer<T>(size(m * k));
  b.mag_b = DeviceBuffer<T>(size(k * n));
  b.mag_ka = DeviceBuffer<T>(size(pairs * k));
  b.mag_rb = DeviceBuffer<T>(size(pairs * k));
  b.mag_cols = DeviceBuffer<T>(size(pairs * n));
  b.mag_rows = DeviceBuffer<T>(size(pairs * m));
  if (rounding) {
    b.squares_ka = DeviceBuffer<T>(size(2 * k));
    b.square_cols = DeviceBuffer<T>(size(2 * n));
    b.square_rows = DeviceBuffer<T>(size(2 * m));
  }
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
  const auto policy = thrust::cuda::par_nosync.on(stream);
  multiply_unprotected(a, b, c);
  // Carried checksums: ((e, w)^T A) B and A (B (e, w)), the operands encoded with one read each.
  const EncodeParams cols{Side::cols, Backend::fused, 0}, rows{Side::rows, Backend::fused, 0};
  const auto encode_operands = [&](const T* pa, const T* pb, T* ka, T* rb) {
    Encoder<T>(ctx_, m_, k_, m_, cols).run(pa, nullptr, ka);
    Encoder<T>(ctx_, k_, n_, k_, rows).run(pb, rb, nullptr);
  };
  // ka (r x k, ld r) B -> r x n;  A rb (k x r) -> m x r.
  const auto carry = [&](const T* pa, const T* pb, const T* ka, const T* rb, std::int64_t r, T* out_cols, T* out_rows) {
    gemm::gemm(ctx_, {gemm::col_major<const T>(ka, r, k_), gemm::col_major<const T>(pb, k_, n_),
                      gemm::col_major(out_cols, r, n_)});
    gemm::gemm(ctx_, {gemm::col_major<const T>(pa, m_, k_), gemm::col_major<const T>(rb, k_, r),
                      gemm::col_major(out_rows, m_, r)});
  };
  encode_operands(a, b, bf.ka.data(), bf.rb.data());
  carry(a, b, bf.ka.data(), bf.rb.data(), 2, bf.carried_cols.data(), bf.carried_rows.data());

  T* mag_a = bf.mag_a.data();
  T* mag_b = bf.mag_b.data();
  T* mag_ka = bf.mag_ka.data();
  T* mag_rb = bf.mag_rb.data();
  if (threshold_.model == ThresholdModel::l1_bound) {  // the checksums of |A| |B|
    thrust::transform(policy, a, a + m_ * k_, mag_a, [] __device__(T v) -> T { return v < T(0) ? -v : v; });
    thrust::transform(policy, b, b + k_ * n_, mag_b, [] __device__(T v) -> T { return v < T(0) ? -v : v; });
    SKINNY_CHECK_LAUNCH();
    encode_operands(mag_a, mag_b, mag_ka, mag_rb);
    carry(mag_a, mag_b, mag_ka, mag_rb, 2, bf.mag_cols.data(), bf.mag_rows.data());
  } else {
    // Q from (A o A)(B o B), Q_K from the squared carried checksums, both through one product per side:
    // the encodings of the squares (2 x k, k x 2) go to rows/columns 0-1 of mag_ka/mag_rb, the squares of
    // ka and rb to 2-3.
    thrust::transform(policy, a, a + m_ * k_, mag_a, [] __device__(T v) -> T { return v * v; });
    thrust::transform(policy, b, b + k_ * n_, mag_b, [] __device__(T v) -> T { return v * v; });
    SKINNY_CHECK_LAUNCH();
    encode_operands(mag_a, mag_b, bf.squares_ka.data(), mag_rb);
    const std::int64_t k = k_;
    const T* ka = bf.ka.data();
    const T* rb = bf.rb.data();
    const T* ka_squares = bf.squares_ka.data();
    thrust::for_each(policy, thrust::counting_iterator<std::int64_t>(0), thrust::counting_iterator<std::int64_t>(2 * k),
                     [=] __device__(std::int64_t i) {
                       const std::int64_t l = i / 2, t = i % 2;
                       mag_ka[4 * l + t] = ka_squares[2 * l + t];
                       mag_ka[4 * l + 2 + t] = ka[2 * l + t] * ka[2 * l + t];
                       mag_rb[2 * k + i] = rb[i] * rb[i];  // rb is k x 2: column t = i / k
                     });
    SKINNY_CHECK_LAUNCH();
    carry(mag_a, mag_b, mag_ka, mag_rb, 4, bf.mag_cols.data(), bf.mag_rows.data());
    // P: the checksums of C o C, read from the product before any later fault can reach it.
    detail::fused_encode(static_cast<const T*>(c), m_, n_, m_, 0, bf.square_rows.data(), bf.square_cols.data(),
                         ctx_.workspace(detail::fused_workspace_bytes(m_, n_, sizeof(T))), stream, true);
  }
  ctx_.synchronize();
  set_thresholds();
}

template <class T>
void ProtectedGemm<T>::set_thresholds() {
  Buffers& bf = *buf_;
  const bool rounding = threshold_.model == ThresholdModel::rounding;
  const std::vector<T> carried_cols = bf.carried_cols.to_host(), carried_rows = bf.carried_rows.to_host();
  const std::vector<T> mag_cols = bf.mag_cols.to_host(), mag_rows = bf.mag_rows.to_host();
  const std::vector<T> square_cols = rounding ? bf.square_cols.to_host() : std::vector<T>();
  const std::vector<T> square_rows = rounding ? bf.square_rows.to_host() : std::vector<T>();
  const auto at = [](const std::vector<T>& v, std::int64_t i) { return double(v[static_cast<std::size_t>(i)]); };
  // One check's magnitudes from the positions of its values: t = 1 is the weighted check, whose squared
  // weights w_i^2 <= h w_i are bounded by h times its weighted squares.
  const auto magnitudes = [&](std::int64_t t, std::int64_t h, std::int64_t q, std::int64_t qk, std::int64_t p,
                              std::int64_t r, const std::vector<T>& mags, const std::vector<T>& squares,
                              const std::vector<T>& carried) {
    detail::CheckMagnitudes mg;
    if (!rounding) {
      mg.l1 = at(mags, q);
      return mg;
    }
    const double weights = t == 1 ? double(h) : 1.0;
    mg.squares = weights * at(mags, q);
    mg.carried_squares = at(mags, qk);
    mg.result_squares = weights * at(squares, p);
    mg.checksum = at(carried, r);
    return mg;
  };
  const std::int64_t per = rounding ? 4 : 2;  // magnitudes per column (rows of mag_cols) and per row
  col_tau_.assign(static_cast<std::size_t>(2 * n_), 0);
  row_tau_.assign(static_cast<std::size_t>(2 * m_), 0);
  for (std::int64_t j = 0; j < n_; ++j)  // column checks: value t of column j at 2 j + t; mag_cols per x n
    for (std::int64_t t = 0; t < 2; ++t)
      col_tau_[static_cast<std::size_t>(2 * j + t)] = detail::check_threshold<T>(
          threshold_, k_, m_,
          magnitudes(t, m_, per * j + t, per * j + 2 + t, 2 * j + t, 2 * j + t, mag_cols, square_cols, carried_cols));
  for (std::int64_t i = 0; i < m_; ++i)  // row checks: value t of row i at t m + i; mag_rows m x per
    for (std::int64_t t = 0; t < 2; ++t)
      row_tau_[static_cast<std::size_t>(t * m_ + i)] = detail::check_threshold<T>(
          threshold_, k_, n_,
          magnitudes(t, n_, t * m_ + i, (2 + t) * m_ + i, t * m_ + i, t * m_ + i, mag_rows, square_rows, carried_rows));
  min_threshold_ = std::numeric_limits<double>::infinity();
  max_threshold_ = 0;
  for (const double tau : col_tau_) min_threshold_ = std::min(min_threshold_, tau);
  for (const double tau : row_tau_) min_threshold_ = std::min(min_threshold_, tau);
  for (std::int64_t j = 0; j < n_; ++j) max_threshold_ = std::max(max_threshold_, col_tau_[std::size_t(2 * j)]);
  for (std::int64_t i = 0; i < m_; ++i) max_threshold_ = std::max(max_threshold_, row_tau_[std::size_t(i)]);
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
