// A GEMM that carries its own checksums: C = A B through any gemm backend, the checksums of C predicted
// from the operands and recomputed from C, compared within round-off thresholds computed from the
// magnitudes of the same product (threshold.hpp, docs/abft-threshold.md). Everything stays on the GPU
// until verification's verdict: three passes over the operands give the carried checksums and the
// thresholds' magnitudes (two_way_sums.cuh), on a stream of their own that overlaps the product; one pass
// over C gives the squares of the result, added up by the thresholds' kernel. Verification is one pass
// over C, added up by the comparison's kernel, and a copy of four numbers to the host. Only an
// inconsistent check brings the checksums to the host, where one element is located and corrected.
#include "detail.hpp"
#include "threshold.hpp"
#include "two_way_sums.cuh"

#include <skinny/gemm/cuda_event.hpp>
#include <skinny/gemm/cuda_stream.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/pinned_buffer.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace skinny::abft {
namespace {

using detail::CheckWeightSums;
using detail::Magnitude;
using detail::Parts;
using detail::SideSums;
using detail::Weight;

/// One side's checks (row checks of C: extent m, h = n; column checks: extent n, h = m).
template <class T>
struct SideChecks {
  /// Value-major, per check position: carried (e, w), then rounding: Q (e, w), Q_K (e, w); l1: S (e, w).
  const T* sums = nullptr;
  /// Partial sums of a pass over C (two_way_partial_sums): for the thresholds, the checksums (e, w) of
  /// C o C; for verification, C's checksums (e, w), then (multiply_and_verify, rounding) those of C o C.
  Parts<T> result;
  double* tau = nullptr;  ///< 2 x extent, value-major (plain, weighted)
  std::int64_t extent = 0, h = 0;
};

/// The threshold of check t (0: plain, 1: weighted) at `pos`; `result_squares`: its checksum of C o C.
template <class T>
__device__ double check_threshold(const SideChecks<T>& in, const Threshold& threshold, std::int64_t k, std::int64_t t,
                                  std::int64_t pos, double result_squares) {
  const std::int64_t e = in.extent;
  detail::CheckMagnitudes mg;
  if (threshold.model == ThresholdModel::l1_bound) {
    mg.l1 = in.sums[(2 + t) * e + pos];
  } else {
    // The weighted check's squared weights w^2 <= h w are bounded by h times its weighted squares.
    const double weights = t == 1 ? double(in.h) : 1.0;
    mg.squares = weights * double(in.sums[(2 + t) * e + pos]);
    mg.carried_squares = in.sums[(4 + t) * e + pos];
    mg.result_squares = weights * double(T(result_squares));
    mg.checksum = in.sums[t * e + pos];
  }
  return detail::resolved_threshold<T>(threshold, k, in.h, mg);
}

/// The thresholds after multiply(): one output (check t at pos) per column of threads (adding_block).
template <class T>
__global__ void __launch_bounds__(detail::kOutputsPerBlock * detail::kPartGroups)
    thresholds_kernel(const SideChecks<T> rows, const SideChecks<T> cols, Threshold threshold, std::int64_t k) {
  wait_for_previous_grid();
  std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * detail::kOutputsPerBlock + threadIdx.x;
  const bool is_row = o < 2 * rows.extent;
  const SideChecks<T> in = is_row ? rows : cols;
  if (!is_row) o -= 2 * rows.extent;
  const bool valid = o < 2 * in.extent;
  const bool rounding = threshold.model == ThresholdModel::rounding;
  const double result_squares = rounding ? detail::sum_of_parts(in.result, o, valid) : 0.0;
  if (!valid || threadIdx.y != 0) return;
  in.tau[o] = check_threshold(in, threshold, k, o / in.extent, o % in.extent, result_squares);
}

/// What verification found on the GPU: the count of inconsistent checks per side and the largest finite
/// ratio and plain difference (non-negative doubles compare like their bits: atomicMax on those).
struct Verdict {
  unsigned long long inconsistent_rows, inconsistent_cols, max_ratio_bits, max_difference_bits;
};

/// One check position per column of threads (adding_block): C's checksums from their partial sums, with
/// `thresholds_here` (multiply_and_verify) the thresholds too, then the same decision as detail::analyze
/// makes on the host. Verifications alternate between two verdicts: this one clears the next one's.
template <class T>
__global__ void __launch_bounds__(detail::kOutputsPerBlock * detail::kPartGroups)
    compare_kernel(const SideChecks<T> rows, const SideChecks<T> cols, Threshold threshold, std::int64_t k,
                   bool thresholds_here, Verdict* verdict, Verdict* next_verdict) {
  static_assert(detail::kOutputsPerBlock == 32, "a block's checks fill one warp");
  wait_for_previous_grid();
  std::int64_t pos = static_cast<std::int64_t>(blockIdx.x) * detail::kOutputsPerBlock + threadIdx.x;
  if (pos == 0 && threadIdx.y == 0) *next_verdict = Verdict{};
  const bool is_row = pos < rows.extent;
  const SideChecks<T> in = is_row ? rows : cols;
  if (!is_row) pos -= rows.extent;
  const bool valid = pos < in.extent;
  const std::int64_t e = in.extent;
  const T computed_e = T(detail::sum_of_parts(in.result, pos, valid));
  const T computed_w = T(detail::sum_of_parts(in.result, e + pos, valid));
  double squares_e = 0, squares_w = 0;
  if (thresholds_here && threshold.model == ThresholdModel::rounding) {
    squares_e = detail::sum_of_parts(in.result, 2 * e + pos, valid);
    squares_w = detail::sum_of_parts(in.result, 3 * e + pos, valid);
  }
  // The block's checks are in its first warp (threadIdx.y == 0): the verdict's sums and maxima within
  // the warp first, then one lane's atomics (thousands on the same addresses would queue up).
  if (threadIdx.y != 0) return;
  bool inconsistent = false;
  unsigned long long ratio_bits = 0, difference_bits = 0;  // non-negative doubles: their bits order alike
  if (valid) {
    if (thresholds_here) {
      in.tau[pos] = check_threshold(in, threshold, k, 0, pos, squares_e);
      in.tau[e + pos] = check_threshold(in, threshold, k, 1, pos, squares_w);
    }
    in.result.out[pos] = computed_e;  // for the host, should a check fail
    in.result.out[e + pos] = computed_w;
    // The carried checksums are the first two values of each check's sums.
    const double de = double(computed_e) - double(in.sums[pos]);
    const double dw = double(computed_w) - double(in.sums[e + pos]);
    const double worst =
        detail::worst_ratio(detail::check_ratio(de, in.tau[pos]), detail::check_ratio(dw, in.tau[e + pos]));
    inconsistent = !(worst <= 1);
    if (fabs(worst) <= DBL_MAX) ratio_bits = static_cast<unsigned long long>(__double_as_longlong(worst));
    if (fabs(de) <= DBL_MAX) difference_bits = static_cast<unsigned long long>(__double_as_longlong(fabs(de)));
  }
  const unsigned bad_rows = __popc(__ballot_sync(0xffffffffu, inconsistent && is_row));
  const unsigned bad_cols = __popc(__ballot_sync(0xffffffffu, inconsistent && !is_row));
  for (int offset = 16; offset > 0; offset >>= 1) {
    ratio_bits = max(ratio_bits, __shfl_xor_sync(0xffffffffu, ratio_bits, offset));
    difference_bits = max(difference_bits, __shfl_xor_sync(0xffffffffu, difference_bits, offset));
  }
  if (threadIdx.x != 0) return;
  if (bad_rows > 0) atomicAdd(&verdict->inconsistent_rows, static_cast<unsigned long long>(bad_rows));
  if (bad_cols > 0) atomicAdd(&verdict->inconsistent_cols, static_cast<unsigned long long>(bad_cols));
  if (ratio_bits > 0) atomicMax(&verdict->max_ratio_bits, ratio_bits);
  if (difference_bits > 0) atomicMax(&verdict->max_difference_bits, difference_bits);
}

double from_bits(unsigned long long bits) {
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

}  // namespace

template <class T>
struct ProtectedGemm<T>::Buffers {
  // Value-major sums (see multiply): B's row sums (4 x k); A's column sums (4 x k); the row checks' sums
  // (carried, then the magnitudes: 6 x m rounding, 4 x m l1) and the column checks' (6 or 4 x n).
  DeviceBuffer<T> b_rows, a_cols, check_rows, check_cols;
  DeviceBuffer<T> computed_rows, computed_cols;  ///< verification's checksums of C: 2 x m, 2 x n
  DeviceBuffer<double> tau_rows, tau_cols;       ///< 2 x m, 2 x n (plain, weighted)
  DeviceBuffer<T> operand_parts;                 ///< partial sums of the largest operand pass
  DeviceBuffer<T> result_parts;                  ///< partial sums of a pass over C
  DeviceBuffer<Verdict> verdicts;                ///< two, used in turn (compare_kernel)
  PinnedBuffer<Verdict> verdict_host;
  std::uint64_t verifications = 0;
  Verdict* verdict = nullptr;  ///< the one the last verification queued
  /// The next verification's verdict (set in `verdict`), and the other one, which its kernel clears.
  Verdict* take_verdict() {
    const std::uint64_t turn = verifications++ % 2;
    verdict = verdicts.data() + turn;
    return verdicts.data() + (1 - turn);
  }
  // The operand passes run on their own stream, from the multiply's start to the thresholds.
  CudaStream operand_stream{cudaStreamNonBlocking};
  CudaEvent operands_ready{cudaEventDisableTiming}, checksums_carried{cudaEventDisableTiming};
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
  const std::int64_t per_check = threshold_.model == ThresholdModel::rounding ? 6 : 4;
  Buffers& b = *buf_;
  b.b_rows = DeviceBuffer<T>(size(4 * k));
  b.a_cols = DeviceBuffer<T>(size(4 * k));
  b.check_rows = DeviceBuffer<T>(size(per_check * m));
  b.check_cols = DeviceBuffer<T>(size(per_check * n));
  b.computed_rows = DeviceBuffer<T>(size(2 * m));
  b.computed_cols = DeviceBuffer<T>(size(2 * n));
  b.tau_rows = DeviceBuffer<double>(size(2 * m));
  b.tau_cols = DeviceBuffer<double>(size(2 * n));
  const int sms = ctx.properties().multiProcessorCount;
  const std::int64_t operand_parts = std::max({detail::two_way_workspace<T>(k, n, 4, int(per_check), sms),  // B
                                               detail::two_way_workspace<T>(m, k, int(per_check), 4, sms)});  // A
  b.operand_parts = DeviceBuffer<T>(size(operand_parts));
  const int result_terms = threshold_.model == ThresholdModel::rounding ? 4 : 2;  // multiply_and_verify's pass
  b.result_parts = DeviceBuffer<T>(size(detail::two_way_workspace<T>(m, n, result_terms, result_terms, sms)));
  b.verdicts = DeviceBuffer<Verdict>(std::vector<Verdict>(2, Verdict{}));
  b.verdict_host = PinnedBuffer<Verdict>(1);
}

template <class T>
void ProtectedGemm<T>::multiply_unprotected(const T* a, const T* b, T* c) {
  gemm::gemm(ctx_, {gemm::col_major<const T>(a, m_, k_), gemm::col_major<const T>(b, k_, n_), gemm::col_major(c, m_, n_)},
             backend_);
}

namespace {

/// The carried checksums and their magnitudes, in three passes over the operands (B, A, B again):
///   B's rows:    rb = B (e, w) and the same sums of B's magnitudes (B o B or |B|)             4 x k
///   A's rows:    A rb (the carried row checksums of C); rounding: (A o A)(B o B)(e, w) and
///                (A o A)(rb o rb); l1: |A| |B| (e, w)                                          6 or 4 x m
///   A's columns: ka = (e, w)^T A and the same sums of A's magnitudes                            4 x k
///   B's columns: ka B (the carried column checksums); rounding: ((e, w)^T (A o A))(B o B) and
///                (ka o ka)(B o B); l1: ((e, w)^T |A|) |B|                                       6 or 4 x n
template <class T, ThresholdModel kModel>
void carry_checksums(const T* a, const T* b, std::int64_t m, std::int64_t n, std::int64_t k, T* b_rows, T* a_cols,
                     T* check_rows, T* check_cols, T* parts, int sms, cudaStream_t stream) {
  constexpr bool kRounding = kModel == ThresholdModel::rounding;
  constexpr Magnitude kMag = kRounding ? Magnitude::square : Magnitude::absolute;
  using None = SideSums<T, 0, 0>;
  using Pairs = CheckWeightSums<T, 2, 2>;
  using Checks = SideSums<T, 2, kRounding ? 4 : 2>;
  // A checks pass weighs by one operand's four sums along k (x with e, w; its magnitude with e, w) and,
  // for the rounding model, by the first two squared.
  const auto checks_over = [k](const T* sums, T* out) {
    const auto sum = [&](int t, bool squared) { return Weight<T>{sums + t * k, squared}; };
    Checks c{{sum(0, false), sum(1, false), sum(2, false), sum(3, false)}, out};
    if constexpr (kRounding) {
      c.w[4] = sum(0, true);
      c.w[5] = sum(1, true);
    }
    return c;
  };
  detail::two_way_sums<T, kMag>(b, k, n, Pairs{b_rows}, None{}, parts, sms, stream);
  detail::two_way_sums<T, kMag>(a, m, k, checks_over(b_rows, check_rows), Pairs{a_cols}, parts, sms, stream);
  detail::two_way_sums<T, kMag>(b, k, n, None{}, checks_over(a_cols, check_cols), parts, sms, stream);
}

}  // namespace

template <class T>
void ProtectedGemm<T>::product_beside_checksums(const T* a, const T* b, T* c) {
  Buffers& bf = *buf_;
  const cudaStream_t operand_stream = bf.operand_stream;
  // The product is queued first, so its blocks take the SMs first; the operand passes, on their own
  // stream, fill what it leaves free (its last wave) instead of following it.
  bf.operands_ready.record(ctx_.stream());
  multiply_unprotected(a, b, c);
  SKINNY_CUDA_TRY(cudaStreamWaitEvent(operand_stream, bf.operands_ready.get()));
  (threshold_.model == ThresholdModel::rounding ? carry_checksums<T, ThresholdModel::rounding>
                                                : carry_checksums<T, ThresholdModel::l1_bound>)(
      a, b, m_, n_, k_, bf.b_rows.data(), bf.a_cols.data(), bf.check_rows.data(), bf.check_cols.data(),
      bf.operand_parts.data(), ctx_.properties().multiProcessorCount, operand_stream);
  bf.checksums_carried.record(operand_stream);
  host_.current = false;
}

template <class T>
void ProtectedGemm<T>::multiply(const T* a, const T* b, T* c) {
  Buffers& bf = *buf_;
  const cudaStream_t stream = ctx_.stream();
  product_beside_checksums(a, b, c);
  SideChecks<T> rows{bf.check_rows.data(), {}, bf.tau_rows.data(), m_, n_};
  SideChecks<T> cols{bf.check_cols.data(), {}, bf.tau_cols.data(), n_, m_};
  if (threshold_.model == ThresholdModel::rounding) {
    // P: the checksums of C o C, read from the product before any later fault can reach it.
    using Squares = CheckWeightSums<T, 0, 2>;
    const detail::TwoWayParts<T> p = detail::two_way_partial_sums<T, Magnitude::square>(
        c, m_, n_, Squares{nullptr}, Squares{nullptr}, bf.result_parts.data(), ctx_.properties().multiProcessorCount,
        stream);
    rows.result = p.rows;
    cols.result = p.cols;
  }
  SKINNY_CUDA_TRY(cudaStreamWaitEvent(stream, bf.checksums_carried.get()));
  // An ordinary launch: it waits for the other stream's passes too, not only for the kernel ahead of it.
  thresholds_kernel<T>
      <<<detail::adding_grid(2 * (m_ + n_)), detail::adding_block(), 0, stream>>>(rows, cols, threshold_, k_);
  SKINNY_CHECK_LAUNCH();
}

template <class T>
Report ProtectedGemm<T>::multiply_and_verify(const T* a, const T* b, T* c) {
  Buffers& bf = *buf_;
  const cudaStream_t stream = ctx_.stream();
  product_beside_checksums(a, b, c);
  if (fault_) std::exchange(fault_, nullptr)(c);
  // One pass over C: its checksums (e, w) and, for the rounding model, those of C o C.
  const auto pass = [&](auto sums) {
    using Sums = decltype(sums);
    return detail::two_way_partial_sums<T, Magnitude::square>(c, m_, n_, Sums{bf.computed_rows.data()},
                                                              Sums{bf.computed_cols.data()}, bf.result_parts.data(),
                                                              ctx_.properties().multiProcessorCount, stream);
  };
  const detail::TwoWayParts<T> p = threshold_.model == ThresholdModel::rounding ? pass(CheckWeightSums<T, 2, 2>{})
                                                                                 : pass(CheckWeightSums<T, 2, 0>{});
  SKINNY_CUDA_TRY(cudaStreamWaitEvent(stream, bf.checksums_carried.get()));
  Verdict* const next_verdict = bf.take_verdict();
  // An ordinary launch, as for the thresholds.
  compare_kernel<T><<<detail::adding_grid(m_ + n_), detail::adding_block(), 0, stream>>>(
      SideChecks<T>{bf.check_rows.data(), p.rows, bf.tau_rows.data(), m_, n_},
      SideChecks<T>{bf.check_cols.data(), p.cols, bf.tau_cols.data(), n_, m_}, threshold_, k_, true, bf.verdict,
      next_verdict);
  SKINNY_CHECK_LAUNCH();
  return conclude(c);
}

template <class T>
const typename ProtectedGemm<T>::HostThresholds& ProtectedGemm<T>::host_thresholds() const {
  if (host_.current) return host_;
  ctx_.synchronize();
  host_.rows = buf_->tau_rows.to_host();
  host_.cols = buf_->tau_cols.to_host();
  host_.min = std::numeric_limits<double>::infinity();
  host_.max = 0;
  for (const double tau : host_.rows) host_.min = std::min(host_.min, tau);
  for (const double tau : host_.cols) host_.min = std::min(host_.min, tau);
  for (std::int64_t i = 0; i < m_; ++i) host_.max = std::max(host_.max, host_.rows[std::size_t(i)]);  // plain checks
  for (std::int64_t j = 0; j < n_; ++j) host_.max = std::max(host_.max, host_.cols[std::size_t(j)]);
  host_.current = true;
  return host_;
}

template <class T>
double ProtectedGemm<T>::min_threshold() const {
  return host_thresholds().min;
}

template <class T>
double ProtectedGemm<T>::max_threshold() const {
  return host_thresholds().max;
}

template <class T>
double ProtectedGemm<T>::threshold_row(std::int64_t i, bool weighted) const {
  return host_thresholds().rows[static_cast<std::size_t>(weighted ? m_ + i : i)];
}

template <class T>
double ProtectedGemm<T>::threshold_col(std::int64_t j, bool weighted) const {
  return host_thresholds().cols[static_cast<std::size_t>(weighted ? n_ + j : j)];
}

template <class T>
Report ProtectedGemm<T>::verify_and_correct(T* c) {
  Buffers& bf = *buf_;
  const cudaStream_t stream = ctx_.stream();
  using Sums = CheckWeightSums<T, 2, 0>;
  const detail::TwoWayParts<T> p = detail::two_way_partial_sums<T, Magnitude::square>(
      c, m_, n_, Sums{bf.computed_rows.data()}, Sums{bf.computed_cols.data()}, bf.result_parts.data(),
      ctx_.properties().multiProcessorCount, stream);
  SideChecks<T> rows{bf.check_rows.data(), p.rows, bf.tau_rows.data(), m_, n_};
  SideChecks<T> cols{bf.check_cols.data(), p.cols, bf.tau_cols.data(), n_, m_};
  Threshold threshold = threshold_;
  std::int64_t k = k_;
  bool thresholds_here = false;
  Verdict* next_verdict = bf.take_verdict();
  void* args[] = {&rows, &cols, &threshold, &k, &thresholds_here, &bf.verdict, &next_verdict};
  launch_after_previous(reinterpret_cast<const void*>(&compare_kernel<T>), detail::adding_grid(m_ + n_),
                        detail::adding_block(), args, stream);
  return conclude(c);
}

template <class T>
Report ProtectedGemm<T>::conclude(T* c) {
  Buffers& bf = *buf_;
  const cudaStream_t stream = ctx_.stream();
  bf.verdict_host.copy_from_device_async(bf.verdict, stream);
  ctx_.synchronize();
  const Verdict v = bf.verdict_host[0];
  if (v.inconsistent_rows == 0 && v.inconsistent_cols == 0) {
    Report r;
    r.max_ratio = from_bits(v.max_ratio_bits);
    r.max_difference = from_bits(v.max_difference_bits);
    return r;
  }
  // Something is off: the checks to the host, where detail::analyze decides (and recounts).
  const std::vector<T> carried_cols = bf.check_cols.to_host(), computed_cols = bf.computed_cols.to_host();
  const std::vector<T> carried_rows = bf.check_rows.to_host(), computed_rows = bf.computed_rows.to_host();
  const HostThresholds& tau = host_thresholds();
  const auto checks = [](const std::vector<T>& carried, const std::vector<T>& computed, const std::vector<double>& taus,
                         std::int64_t extent) {
    detail::Checks ch;
    const auto at = [](const auto& v, std::int64_t i) { return double(v[static_cast<std::size_t>(i)]); };
    for (std::int64_t p = 0; p < extent; ++p) {
      ch.carried_e.push_back(at(carried, p));
      ch.carried_w.push_back(at(carried, extent + p));
      ch.computed_e.push_back(at(computed, p));
      ch.computed_w.push_back(at(computed, extent + p));
      ch.tau_e.push_back(at(taus, p));
      ch.tau_w.push_back(at(taus, extent + p));
    }
    return ch;
  };
  const detail::Checks col_checks = checks(carried_cols, computed_cols, tau.cols, n_);
  Report r = detail::analyze(col_checks, checks(carried_rows, computed_rows, tau.rows, m_));
  if (r.finding != Finding::corrected) return r;
  // The element from its column's carried checksum and the other elements of the column: exact for an
  // error of any size (also Inf or NaN), unlike subtracting the difference.
  scratch_host_.resize(static_cast<std::size_t>(m_));
  T* column = c + r.col * m_;
  SKINNY_CUDA_TRY(cudaMemcpyAsync(scratch_host_.data(), column, std::size_t(m_) * sizeof(T), cudaMemcpyDeviceToHost,
                                  stream));
  ctx_.synchronize();
  double others = 0;
  for (std::int64_t i = 0; i < m_; ++i)
    if (i != r.row) others += double(scratch_host_[std::size_t(i)]);
  const T fixed = T(col_checks.carried_e[std::size_t(r.col)] - others);
  r.error = double(scratch_host_[std::size_t(r.row)]) - double(fixed);
  SKINNY_CUDA_TRY(cudaMemcpyAsync(column + r.row, &fixed, sizeof(T), cudaMemcpyHostToDevice, stream));
  ctx_.synchronize();
  return r;
}

template class ProtectedGemm<float>;
template class ProtectedGemm<double>;

}  // namespace skinny::abft
