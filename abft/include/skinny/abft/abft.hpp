// Algorithm-based fault tolerance (Huang & Abraham, 1984) on the GPU: checksum encoding of a matrix,
// a GEMM that carries its own checksums, verification, location and correction of an error, and fault
// injection. Matrices are column-major (BLAS), in device memory, float or double.
//
// Weights: e = (1, ..., 1) and w = (1, 2, ..., b) restarting in every block of b rows or columns (density
// b; b = 0 or b >= the dimension: one checksum pair over the whole dimension). For an m x n matrix A:
//   row checksums    R (m x 2 nb_c, column-major): R(i, 2t) = sum_{j in block t} A(i, j),
//                                                  R(i, 2t + 1) = sum_{j in block t} (j - t b + 1) A(i, j)
//   column checksums K (2 nb_r x n, column-major): K(2s, j) = sum_{i in block s} A(i, j), K(2s + 1, j) likewise
//                                                  with the weights (i - s b + 1).
// One error of size eps at (i, j) changes R's pair of block t by (eps, (j - t b + 1) eps) and K's pair of
// block s by (eps, (i - s b + 1) eps): the ratios give j and i, the difference corrects it.
#pragma once

#include <skinny/gemm/context.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/gemm.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace skinny::abft {

enum class Backend {
  cublas,  ///< two GEMMs through cuBLAS: A W and W^T A
  tsm2,    ///< the same two GEMMs through skinny's TSM2 (needs 2 nb <= 64)
  fused,   ///< one kernel, one read of A: row and column checksums, both weights
};
std::string_view to_string(Backend b);
/// "cublas", "tsm2" or "fused"; throws std::invalid_argument naming the valid ones.
Backend backend_from_name(std::string_view name);
std::vector<std::string> backend_names();

enum class Side { rows, cols, both };

struct EncodeParams {
  Side side = Side::both;
  Backend backend = Backend::fused;
  std::int64_t density = 0;  ///< block size b; 0: one checksum pair over the whole dimension
};

/// Number of checksum blocks along a dimension of `extent` for density b.
std::int64_t blocks(std::int64_t extent, std::int64_t density);

/// Why `backend` cannot encode an m x n matrix at this density ("" when it can).
std::string cannot_encode(Backend backend, std::int64_t m, std::int64_t n, std::int64_t density);

/// An encoder for m x n matrices: checks the arguments and prepares the weight matrices once, so that
/// run() only queues GPU work (what the benchmarks time).
template <class T>
class Encoder {
 public:
  /// Throws std::invalid_argument for bad shapes or a backend that cannot do them (with the reason).
  Encoder(Context& ctx, std::int64_t m, std::int64_t n, std::int64_t lda, const EncodeParams& params);
  /// Queues the encoding of A on the context's stream; see encode() for the outputs.
  void run(const T* a, T* row_checksums, T* col_checksums);

 private:
  Context& ctx_;
  std::int64_t m_, n_, lda_;
  EncodeParams params_;
  DeviceBuffer<T> w_cols_, w_rows_;  ///< A W (row checksums) and W^T A (column checksums)
};

/// Encodes the m x n column-major A (leading dimension lda). `row_checksums` (m x 2 nb_c, ld m) and
/// `col_checksums` (2 nb_r x n, ld 2 nb_r) are device outputs; the one not asked for may be null.
/// Throws std::invalid_argument for bad shapes, null pointers or a backend that cannot do it.
template <class T>
void encode(Context& ctx, const T* a, std::int64_t m, std::int64_t n, std::int64_t lda, const EncodeParams& params,
            T* row_checksums, T* col_checksums);

/// The round-off threshold of a checksum comparison. A checksum of C = A B carried through the product
/// and the same checksum recomputed from the computed C differ, on clean data, by rounding alone
/// (docs/abft-threshold.md derives both models and calibrates them):
///   rounding: tau = gamma * sigma, sigma = u sqrt(k + h) sqrt(Q + Q_K + P + R^2): the spread of the
///             rounding errors, which add like a random walk over the partial sums. Q is the checksum of
///             (A o A)(B o B) (the squared products it adds up), Q_K the carried GEMM's squared terms, P the
///             checksum of C o C and R the carried checksum (sums that drift instead of cancelling).
///   l1_bound: tau = gamma * u sqrt(k + h) * S, S the checksum of |A| |B|: far above the rounding of data of
///             mixed signs (about sqrt(k h) times sigma), so errors 1000x the rounding can pass unseen.
/// h is the number of terms the checksum adds (m for column checksums, n for row checksums) and u the
/// unit round-off of T. The rounding model needs the squares in T's range: |a b| and |c| within about
/// [1e-19, 1e19] for float ([1e-154, 1e154] for double); a threshold that is not finite flags its check.
enum class ThresholdModel { rounding, l1_bound };
std::string_view to_string(ThresholdModel m);                     ///< "rounding", "l1"
ThresholdModel threshold_model_from_name(std::string_view name);  ///< "rounding" or "l1"; throws otherwise

/// The calibrated safety factor of a model for T (float or double): the rounding model's keeps every
/// clean difference of the CPU simulations below tau with a margin; the l1 bound's is 16.
template <class T>
double default_gamma(ThresholdModel model);

struct Threshold {
  double gamma = 0;  ///< safety factor; 0: default_gamma<T>(model). Higher: fewer false alarms, small errors unseen
  double override_value = 0;  ///< > 0: use this absolute threshold for every comparison instead
  ThresholdModel model = ThresholdModel::rounding;
};

/// What verification found.
enum class Finding {
  clean,               ///< every checksum within its threshold
  corrected,           ///< one inconsistent row and column: located and corrected
  detected_unlocated,  ///< inconsistencies that do not point at one element (several errors)
};
std::string_view to_string(Finding f);

struct Report {
  Finding finding = Finding::clean;
  std::int64_t row = -1, col = -1;  ///< the element corrected
  double error = 0;                 ///< its error (computed - corrected value)
  std::int64_t inconsistent_rows = 0, inconsistent_cols = 0;
  double max_ratio = 0;             ///< largest |difference| / threshold seen (below 1: clean)
  double max_difference = 0;        ///< largest |carried - computed| of the plain checksums (finite ones)
};

/// C = A B (A m x k, B k x n, C m x n, all column-major, packed) through any gemm backend, carrying the
/// full checksums of C: column checksums (e, w)^T A B and row checksums A B (e, w), plus the magnitudes
/// their thresholds need (density: whole dimensions): the same checksums of A o A and B o B, of the carried
/// checksums' squares and of C o C (rounding model), or of |A| and |B| (l1_bound). Three passes over the
/// operands overlap the product; the thresholds are computed on the GPU. Verification is one pass over C
/// that compares on the GPU; only when a check fails do the checksums come to the host.
/// Two ways to use it: multiply() then verify_and_correct() (two passes over C: the thresholds are fixed
/// at the product, C may be checked later), or multiply_and_verify() (one pass over C right after the
/// product: the cheaper, as an epilogue would be).
template <class T>
class ProtectedGemm {
 public:
  ProtectedGemm(Context& ctx, std::int64_t m, std::int64_t n, std::int64_t k,
                gemm::Algo backend = gemm::Algo::automatic, Threshold threshold = {});
  /// Queues C and its carried checksums on the context's stream (no wait for the GPU). The operands'
  /// checksum passes run on a stream of this object's own, overlapping the product; the context's stream
  /// waits for them before the thresholds. The inputs must stay valid until the context's stream is done.
  void multiply(const T* a, const T* b, T* c);
  /// Recomputes C's checksums, compares, and corrects a single error in place; waits for the GPU.
  Report verify_and_correct(T* c);
  /// multiply() and verify_and_correct() with one pass over C after the product, which gives the
  /// thresholds' P and C's checksums at once. An error E at an element c of C then enters its own row's
  /// and column's plain thresholds too, by at most gamma u sqrt(k + h) (|E| + sqrt(2 |c| |E|)) (about
  /// 2e-5 |E| in float at k + h = 4096, plus the cross term; docs/abft-threshold.md). Waits for the GPU.
  Report multiply_and_verify(const T* a, const T* b, T* c);
  /// For fault-injection campaigns: work that the next multiply_and_verify() queues on C between the
  /// product and its pass, as a fault in the product's computation would strike (used once).
  void inject_into_next_product(std::function<void(T* c)> fault) { fault_ = std::move(fault); }
  /// The product alone (for the overhead measurement).
  void multiply_unprotected(const T* a, const T* b, T* c);
  /// The thresholds of the last multiply (the first question after it waits for the GPU and copies them).
  /// Smallest threshold over all comparisons: errors below it cannot be told from rounding.
  double min_threshold() const;
  /// Largest threshold of a plain checksum: a single error above it (and the rounding) fails both its row's
  /// and its column's check: the detection bound.
  double max_threshold() const;
  /// The threshold's parameters, gamma resolved (default_gamma when given as 0).
  const Threshold& threshold() const { return threshold_; }
  /// Threshold of the plain (e) checksum of row i and of column j, or of the weighted (w) one.
  double threshold_row(std::int64_t i, bool weighted = false) const;
  double threshold_col(std::int64_t j, bool weighted = false) const;

 private:
  Context& ctx_;
  std::int64_t m_, n_, k_;
  gemm::Algo backend_;
  Threshold threshold_;
  std::vector<T> scratch_host_;
  std::function<void(T* c)> fault_;
  struct Buffers;
  std::shared_ptr<Buffers> buf_;
  /// The GPU's thresholds on the host: rows and cols (plain, then weighted), the smallest and the
  /// largest plain one; copied on the first question after a multiply.
  struct HostThresholds {
    std::vector<double> rows, cols;
    double min = 0, max = 0;
    bool current = false;
  };
  mutable HostThresholds host_;
  const HostThresholds& host_thresholds() const;
  /// The product, and beside it the carried checksums (the thresholds' stream waits for them).
  void product_beside_checksums(const T* a, const T* b, T* c);
  /// The verdict's four numbers to the host; only when a check failed, analysis and correction there.
  Report conclude(T* c);
};

/// Fault injection, reproducible from the seed.
enum class BitRange { any, sign, exponent, high_mantissa, low_mantissa };
BitRange bit_range_from_name(std::string_view name);  ///< "all", "sign", "exponent", "high", "low"
std::string_view to_string(BitRange r);

struct Injection {
  std::int64_t row = 0, col = 0;
  int bit = 0;
  double before = 0, after = 0;
};

/// Flips one bit of element (row, col) of the m x n column-major matrix x (device, ld m). row/col < 0 and
/// bit < 0 are drawn from the seed (bit within `range`).
template <class T>
Injection inject_bit_flip(Context& ctx, T* x, std::int64_t m, std::int64_t n, std::uint64_t seed,
                          BitRange range = BitRange::any, std::int64_t row = -1, std::int64_t col = -1, int bit = -1);
/// Adds `value` to element (row, col).
template <class T>
Injection inject_add(Context& ctx, T* x, std::int64_t m, std::int64_t row, std::int64_t col, T value);

/// The bit `flip` of the binary representation of v (0 = lowest mantissa bit, top = sign).
template <class T>
T flip_bit(T v, int bit);

/// CPU references (double accumulation) of the encodings, on a host column-major matrix.
void reference_encode(const std::vector<double>& a, std::int64_t m, std::int64_t n, std::int64_t density,
                      std::vector<double>& row_checksums, std::vector<double>& col_checksums);

}  // namespace skinny::abft
