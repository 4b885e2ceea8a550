// fit() and predict(): validation at the boundary, then the Lloyd loop on one stream.
#include "detail.hpp"
#include "element.cuh"
#include "half_rows.hpp"
#include "init.hpp"
#include "lloyd_hooks.hpp"
#include "protect.hpp"
#include "route_rules.hpp"

#include <skinny/gemm/cuda_event.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/errors.hpp>
#include <skinny/gemm/nearest.hpp>
#include <skinny/gemm/pinned_buffer.hpp>
#include <skinny/gemm/splitmix64.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace skinny::kmeans {
namespace {

using detail::chunk_rows;

template <class T>
T* placeholder() {  // a non-null pointer for can_implement, which checks shapes and never dereferences
  return reinterpret_cast<T*>(std::uintptr_t(256));
}

/// Leading dimension of 16-bit rows widened to float: a multiple of 4, for the fused kernel's 16-byte copies.
std::int64_t padded_row(std::int64_t d) { return detail::nearest_row<float>(d); }

/// Rows of 16-bit X widened per assignment chunk: a float buffer of at most kWideBytes (L2-sized where d
/// allows), and at least kWideMinRows rows so that the fused kernel still fills the GPU.
constexpr std::int64_t kWideBytes = std::int64_t(32) << 20;
constexpr std::int64_t kWideMinRows = 4096;
std::int64_t wide_rows(std::int64_t n, std::int64_t d) {
  return std::min(n, std::max(kWideMinRows, kWideBytes / (padded_row(d) * std::int64_t(sizeof(float)))));
}

/// The distance GEMM of a chunk of the n x d points X with `columns` centroid columns (k, or k + 1 with
/// a checksum column), as the backends are asked whether they can run it: 16-bit data runs on rows
/// widened to float (in a buffer of ours, aligned and padded).
template <class T>
gemm::Arguments<compute_t<T>> distance_probe(const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                                             std::int64_t columns) {
  using C = compute_t<T>;
  const std::int64_t rows = chunk_rows(n, k, sizeof(C));
  const C* a = detail::is_16bit<T> ? placeholder<C>() : reinterpret_cast<const C*>(x);
  const std::int64_t lda = detail::is_16bit<T> ? padded_row(d) : d;
  return {gemm::row_major<const C>(a, rows, d, lda), gemm::col_major<const C>(placeholder<C>(), d, columns),
          gemm::row_major(placeholder<C>(), rows, columns)};
}

/// Throws std::invalid_argument unless (x, n, d, k, backend) is a problem fit and predict can run.
template <class T>
void check_shape(const T* x, std::int64_t n, std::int64_t d, std::int64_t k, gemm::Algo backend) {
  if (x == nullptr) throw std::invalid_argument("kmeans: the data pointer is null");
  if (n < 1 || d < 1)
    throw std::invalid_argument("kmeans: need n >= 1 points of d >= 1 dimensions (got n = " + std::to_string(n) +
                                ", d = " + std::to_string(d) + ")");
  if (n > INT32_MAX)
    throw std::invalid_argument("kmeans: n = " + std::to_string(n) + " points exceeds 2^31 - 1 (labels are 32-bit)");
  if (k < 1 || k > n)
    throw std::invalid_argument("kmeans: need 1 <= k <= n (got k = " + std::to_string(k) + ", n = " +
                                std::to_string(n) + ")");
  const gemm::Support s = gemm::can_implement(backend, distance_probe(x, n, d, k, k));
  if (!s) throw std::invalid_argument("kmeans: backend cannot compute the distances: " + s.reason);
}

void check_params(const Params& p) {
  if (p.inject.target != FaultTarget::none && !p.protect)
    throw std::invalid_argument("kmeans: fault injection needs protect (the fault would go unseen)");
  if (p.inject.target != FaultTarget::none && p.inject.iteration < 1)
    throw std::invalid_argument("kmeans: the injection's iteration = " + std::to_string(p.inject.iteration) +
                                " must be >= 1");
  if (p.max_iter < 1) throw std::invalid_argument("kmeans: max_iter = " + std::to_string(p.max_iter) + " must be >= 1");
  if (p.n_init < 1) throw std::invalid_argument("kmeans: n_init = " + std::to_string(p.n_init) + " must be >= 1");
  if (!(p.tol >= 0) || !std::isfinite(p.tol))
    throw std::invalid_argument("kmeans: tol = " + std::to_string(p.tol) + " must be finite and >= 0");
  if (!(p.init_oversampling > 0) || !std::isfinite(p.init_oversampling))
    throw std::invalid_argument("kmeans: init_oversampling = " + std::to_string(p.init_oversampling) +
                                " must be finite and > 0");
  if (p.init_rounds < 1)
    throw std::invalid_argument("kmeans: init_rounds = " + std::to_string(p.init_rounds) + " must be >= 1");
}

/// Cross terms per chunk of the TF32 GEMM (route_rules.hpp: with the argmin's usual 32 MiB chunks its GEMMs
/// were too short).
constexpr std::int64_t kTf32ChunkBytes = std::int64_t(512) << 20;

/// Whether a distance GEMM of compute type C through `algo` rounds to TF32: fast mode allows it
/// (Assigner::cross_terms), and cuBLAS alone takes it, in float.
template <class C>
bool gemm_rounds_to_tf32(gemm::Algo algo, gemm::Math math) {
  return algo == gemm::Algo::cublas && math == gemm::Math::fast && std::is_same_v<C, float>;
}

/// Whether fast mode takes the TF32 GEMM and the argmin instead of the fused kernel (route_rules.hpp).
template <class T>
bool tf32_gemm_pays(std::int64_t d, std::int64_t k, gemm::Math math) {
  return detail::tf32_gemm_beats_fused(std::is_same_v<T, float>, d, k, math);
}

/// The fused kernel's name for points of type T (float or 16-bit).
template <class T>
constexpr gemm::Element element_of() {
  if constexpr (std::is_same_v<T, __half>) return gemm::Element::f16;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return gemm::Element::bf16;
  else return gemm::Element::f32;
}

/// Whether `bytes` more fit in the device's free memory, leaving room for the library's scratch.
bool fits_in_free_memory(std::size_t bytes) {
  const std::size_t available = detail::available_device_memory();
  return available > 0 && bytes <= available;
}

/// Whether X's own rows are whole, aligned 16-byte copies (otherwise fit reads a padded copy of X).
template <class T>
bool rows_fit_nearest(const T* x, std::int64_t d) {
  return detail::nearest_row<T>(d) == d && reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
}

/// gemm::nearest's arguments for n x d points of type `type` in rows of ldx, and k centres, as the shape
/// checks (nearest_can_implement, nearest_may_recheck) see them: placeholders for every pointer.
gemm::NearestArguments nearest_probe(std::int64_t n, std::int64_t d, std::int64_t k, gemm::Element type,
                                     std::int64_t ldx) {
  gemm::NearestArguments a;
  a.x = placeholder<float>();
  a.x_type = type;
  a.ldx = ldx;
  a.n = n;
  a.d = d;
  a.c = a.x_sq_norms = a.c_sq_norms = placeholder<float>();
  a.k = k;
  a.labels = placeholder<std::int32_t>();
  return a;
}

/// Whether gemm::nearest can run the n x d points: in their own type (`native`: float or 16-bit, rows padded
/// to 16-byte copies) or, for 16-bit data, widened to float rows in a buffer of ours.
template <class T>
bool nearest_runs(const Context& ctx, std::int64_t n, std::int64_t d, std::int64_t k, bool native) {
  const gemm::NearestArguments a = native ? nearest_probe(n, d, k, element_of<T>(), detail::nearest_row<T>(d))
                                          : nearest_probe(n, d, k, gemm::Element::f32, padded_row(d));
  return static_cast<bool>(gemm::nearest_can_implement(ctx, a));
}

/// Whether gemm::nearest reads X in its own type: X itself, or (`copy_allowed`, fit) a copy of X with rows
/// padded to 16-byte copies, made once per fit where it fits in free memory.
template <class T>
bool nearest_reads_natively(const Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                            bool copy_allowed) {
  if (!nearest_runs<T>(ctx, n, d, k, true)) return false;
  return rows_fit_nearest(x, d) ||
         (copy_allowed && fits_in_free_memory(static_cast<std::size_t>(n * detail::nearest_row<T>(d)) * sizeof(T)));
}

/// The fewest float clusters for which Algo::automatic takes the fused kernel (route_rules.hpp), in a fit
/// with or without Params::protect. SKINNY_KMEANS_FUSED_MIN_K overrides it (for benchmarks of the crossover).
std::int64_t fused_min_clusters(const Context& ctx, std::int64_t d, gemm::Math math, bool protect) {
  if (const char* forced = std::getenv("SKINNY_KMEANS_FUSED_MIN_K"))
    return std::max<std::int64_t>(1, std::atoll(forced));
  return detail::fused_min_float_clusters(d, math, gemm::nearest_uses_wgmma(ctx), protect);
}

/// Whether the environment variable `name` is set to `value` (the benchmarks' and comparisons' switches).
bool environment_says(const char* name, const char* value) {
  const char* set = std::getenv(name);
  return set != nullptr && std::string(set) == value;
}

/// SKINNY_KMEANS_NARROW=0 in the environment keeps narrow rows off detail::narrow_nearest, =1 sends every
/// row of up to kNarrowRowsMaxDims values to it whatever the rule says (for comparisons).
bool narrow_switched_off() { return environment_says("SKINNY_KMEANS_NARROW", "0"); }
bool narrow_forced() { return environment_says("SKINNY_KMEANS_NARROW", "1"); }

/// How the assignment reaches gemm::nearest: not at all (a GEMM through the backend, then the argmin), on
/// X's rows in their own type (X itself or its padded copy), on 16-bit rows widened to float, or (fast mode,
/// float points) on a half copy of X.
enum class NearestRoute { none, native, widened, half_copy };

/// SKINNY_KMEANS_HALF_COPY=0 in the environment keeps float and bfloat16 points off the half copy: TF32 for
/// float fast mode's products and exact mode's first pass, bfloat16 products for bfloat16 points' (for
/// comparisons).
bool half_copy_switched_off() { return environment_says("SKINNY_KMEANS_HALF_COPY", "0"); }

/// SKINNY_KMEANS_ONE_PASS=1 or 0 overrides the one-pass rules (route_rules.hpp; for benchmarks of the
/// crossover): 1 where the kernel applies, 0 nowhere (16-bit rows gemm::nearest reads then take it for any
/// k). -1: not set (or another value).
int forced_one_pass() {
  const char* forced = std::getenv("SKINNY_KMEANS_ONE_PASS");
  const std::string value = forced == nullptr ? "" : forced;
  return value == "1" ? 1 : value == "0" ? 0 : -1;
}

/// Whether the one pass is faster than the two for this shape (route_rules.hpp; whether the kernel can run
/// it is assign_and_sum_applies).
template <class T>
bool one_pass_pays(const Context& ctx, std::int64_t d, std::int64_t k) {
  if (const int forced = forced_one_pass(); forced >= 0) return forced == 1;
  return detail::one_pass_beats_two(detail::is_16bit<T>, d, k, gemm::nearest_uses_wgmma(ctx));
}

/// Whether float points take the one pass (detail::assign_and_sum) with the automatic backend.
template <class T>
bool float_one_pass(const Context& ctx, const T* x, std::int64_t d, std::int64_t k, gemm::Algo backend) {
  return std::is_same_v<T, float> && backend == gemm::Algo::automatic && k <= detail::kFewClustersMax &&
         one_pass_pays<T>(ctx, d, k) && detail::assign_and_sum_applies(x, d, k);
}

/// The route for this problem, decided once (it asks the device for free memory): gemm::nearest for float
/// or 16-bit data, the automatic backend, enough clusters (any number for 16-bit data, which has no faster
/// tall-skinny path) and a shape it can do. `copy_allowed`: X's rows may be read from a padded copy (fit);
/// `protect`: a fit with Params::protect.
template <class T>
NearestRoute nearest_route(const Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                           gemm::Algo backend, gemm::Math math, bool copy_allowed = true, bool protect = false) {
  if constexpr (std::is_same_v<T, double>) {
    return NearestRoute::none;
  } else {
    const std::int64_t min_k = detail::is_16bit<T> ? 1 : fused_min_clusters(ctx, d, math, protect);
    if (backend != gemm::Algo::automatic || k < min_k || tf32_gemm_pays<T>(d, k, math)) return NearestRoute::none;
    if (nearest_reads_natively(ctx, x, n, d, k, copy_allowed)) return NearestRoute::native;
    if (detail::is_16bit<T> && nearest_runs<T>(ctx, n, d, k, false)) return NearestRoute::widened;
    return NearestRoute::none;
  }
}

/// Whether the fused kernel multiplies float points on a half copy of X (half_rows.hpp), as far as the shape
/// tells: float points, Algo::automatic, no Params::protect (its checks are calibrated on TF32's rounding),
/// and a shape where the fused kernel takes float points or where fast mode's TF32 GEMM
/// would (route_rules.hpp: the half products beat both), which gemm::nearest can run on half rows. Fast
/// mode multiplies the copy alone; exact mode's one-product pass reads it where gemm::nearest certifies one
/// product and re-checks the rest (nearest_may_recheck), the re-check reading X. Not where the one pass
/// takes the shape first. Whether X's range and the free memory allow the copy is the data's to say
/// (half_rows). bfloat16 points take one in exact mode alone, for the certified first pass (half's 11-bit
/// centres leave far fewer points to re-check than bfloat16's 8), where the fused kernel takes their rows
/// with many clusters.
template <class T>
bool half_copy_candidate(const Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                         gemm::Algo backend, gemm::Math math, bool protect) {
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, __nv_bfloat16>) {
    return false;
  } else {
    if (backend != gemm::Algo::automatic || protect || half_copy_switched_off()) return false;
    if constexpr (std::is_same_v<T, float>) {
      if (k < fused_min_clusters(ctx, d, math, protect) || float_one_pass(ctx, x, d, k, backend)) return false;
    } else if (math != gemm::Math::exact || k <= detail::kFewClustersMax ||
               nearest_route(ctx, x, n, d, k, backend, math) != NearestRoute::native) {
      return false;
    }
    gemm::NearestArguments a = nearest_probe(n, d, k, gemm::Element::f16, detail::nearest_row<__half>(d));
    a.math = math;
    return (math == gemm::Math::fast || gemm::nearest_may_recheck(ctx, a)) && gemm::nearest_can_implement(ctx, a);
  }
}

/// The half copy the fused kernel reads for these float or bfloat16 points (half_copy_candidate, then the
/// data's range and the free memory; exact mode's with each row's distance to X), or an empty one.
template <class T>
detail::HalfRows assignment_half_rows(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                                      gemm::Algo backend, gemm::Math math, bool protect) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16>) {
    if (half_copy_candidate<T>(ctx, x, n, d, k, backend, math, protect))
      return detail::half_rows(x, n, d, ctx.stream(), math == gemm::Math::exact);
  }
  return {};
}

/// Whether the assignment reads X once (automatic backend, few clusters): through detail::few_nearest, or in
/// a fit that the one-pass rule above admits, through detail::assign_and_sum, which also forms the update's
/// sums. 16-bit data where detail::few_clusters_16bit says so, or whose rows gemm::nearest cannot read
/// (`route` is not native: the GEMMs would widen X to float first); float where the one pass pays.
template <class T>
bool few_clusters_assignment(const Context& ctx, const T* x, std::int64_t d, std::int64_t k, gemm::Algo backend,
                             gemm::Math math, NearestRoute route) {
  if (backend != gemm::Algo::automatic || k > detail::kFewClustersMax) return false;
  const int forced = forced_one_pass();
  if (forced == 1) return detail::assign_and_sum_applies(x, d, k);
  if constexpr (detail::is_16bit<T>) {
    if (route != NearestRoute::native) return true;
    if (forced == 0) return false;
    return detail::few_clusters_16bit(d, k, math, gemm::nearest_uses_wgmma(ctx));
  }
  return float_one_pass(ctx, x, d, k, backend);
}

/// Fewest points for the column-major copy of X: below, the tall-skinny kernels' column-major path has
/// too few rows to fill the GPU without splitting the inner dimension, and rows were faster (H100,
/// float, d = 4096, k = 16, TSM2 distances with / without the copy: n = 1024 0.168 / 0.067 ms, 16384
/// 0.186 / 0.132 ms, 65536 0.405 / 0.445 ms, 262144 1.511 / 1.691 ms).
constexpr std::int64_t kColumnCopyMinPoints = 65536;

/// The assignment step: either the fused kernel over all points, or, over chunks of rows, cross terms
/// through the gemm backend (on X, or on its column-major copy xt when set) and then the argmin. 16-bit
/// X is widened to float a chunk of rows at a time, and each chunk takes one of the two ways.
/// Records an event before each GEMM and each argmin (events[2i], events[2i + 1]) and one at the end;
/// the fused kernel counts as the GEMM (its argmin is inside) and the cluster counts after it as the
/// argmin.
template <class T>
struct Assigner {
  using C = compute_t<T>;
  Context& ctx;
  const T* x;
  const C* xt = nullptr;  ///< X column-major (leading dimension n), or null
  std::int64_t n, d, k;
  gemm::Algo backend;
  gemm::Math math;
  /// Through detail::narrow_nearest, over all points at once (detail::narrow_assignment); then there is no
  /// half copy, no gemm::nearest route and no few-clusters kernel.
  bool narrow;
  /// A half copy of float or bfloat16 X, made once here where it serves (assignment_half_rows): fast mode
  /// multiplies it (route half_copy, float), exact mode's one-product pass too (route native); else empty.
  detail::HalfRows half;
  NearestRoute route;  ///< decided once; fused(), native() and `few` follow from it
  bool fused() const { return route != NearestRoute::none; }
  /// The fused kernel reads the points in their own type (float, or 16-bit without a widened copy): X
  /// itself, or `padded`, X with its rows padded to whole 16-byte copies, made once here; ldn: their stride.
  bool native() const { return route == NearestRoute::native; }
  bool half_copy() const { return route == NearestRoute::half_copy; }
  DeviceBuffer<T> padded;
  std::int64_t ldn = 0;
  std::int64_t rows;  ///< per chunk
  std::int64_t ldw = 0;
  DeviceBuffer<C> g;
  DeviceBuffer<float> wide;  ///< a chunk of 16-bit rows widened to float
  std::vector<std::unique_ptr<CudaEvent>> events;
  /// The events of the assignment before the last, where a caller keeps them (keep_events): the Lloyd loop
  /// queues the next iteration's assignment before it has read this one's times.
  std::vector<std::unique_ptr<CudaEvent>> kept_events;

  bool few;  ///< through detail::few_nearest, over all points at once
  /// Whether the distances take a GEMM through the backend and then the argmin (no fused, few-clusters or
  /// narrow-rows kernel): only then do they use the cross terms' buffer or a column-major copy of X.
  bool through_gemm() const { return !fused() && !few && !narrow; }
  /// Set: one kernel also adds every point to these cluster sums (detail::assign_and_sum), reading X once.
  const detail::SumTarget* sums = nullptr;
  /// Params::protect: the GEMM also computes the checksum term of each point, verified before the argmin.
  std::unique_ptr<detail::DistanceGuard<C>> guard;
  /// Set for the assignment that injects a fault (Params::inject); the report receives the fault and
  /// every protected assignment's counts.
  const FaultInjection* injection = nullptr;
  ProtectionReport* report = nullptr;
  DeviceBuffer<double> row_sums, carried;  ///< fused and protected: each point's sum of terms, and x.s
  DeviceBuffer<float> fault_values;        ///< fused and protected: an injected term before and after
  /// Fused and protected: the points the last call re-checked at float accuracy (chunk rows), the sums of
  /// their terms and how many; whether its row sums add one-product terms.
  DeviceBuffer<std::int32_t> rechecked_rows;
  DeviceBuffer<double> rechecked_sums;
  std::int64_t rechecked = 0;
  bool one_product_sums = false;

  Assigner(Context& c, const T* x_, std::int64_t n_, std::int64_t d_, std::int64_t k_, gemm::Algo b, gemm::Math m,
           bool protect = false)
      : ctx(c), x(x_), n(n_), d(d_), k(k_), backend(b), math(m), narrow(detail::narrow_assignment(d_, k_, m, b, protect)),
        half(narrow ? detail::HalfRows{} : assignment_half_rows(c, x_, n_, d_, k_, b, m, protect)),
        route(narrow                                      ? NearestRoute::none
              : half.empty() || m == gemm::Math::exact ? nearest_route(c, x_, n_, d_, k_, b, m, true, protect)
                                                       : NearestRoute::half_copy),
        few(!narrow && !protect && few_clusters_assignment(c, x_, d_, k_, b, m, route)) {
    const bool tf32 = rounds_to_tf32();  // asks gemm::choose once: the chunks and the check's bound follow it
    if (!native() && !half_copy()) half = detail::HalfRows{};  // exact mode off the fused kernel's own rows
    ldn = d;
    if (native() && !few && !rows_fit_nearest(x, d)) {
      ldn = detail::nearest_row<T>(d);
      padded = detail::padded_rows(x, n, d, ldn, c.stream());
    }
    if (few || narrow || native() || half_copy()) {
      rows = n;
    } else if constexpr (detail::is_16bit<T>) {
      rows = fused() ? wide_rows(n, d) : std::min(wide_rows(n, d), chunk_rows(n, k, sizeof(C)));
      ldw = padded_row(d);
      wide = DeviceBuffer<float>(static_cast<std::size_t>(rows * ldw));
    } else {
      // A TF32 GEMM is short next to its cross terms: chunks of kTf32ChunkBytes (where they fit) keep it long.
      const bool long_chunks = tf32 && fits_in_free_memory(kTf32ChunkBytes);
      rows = fused() ? n : long_chunks ? chunk_rows(n, k, sizeof(C), kTf32ChunkBytes) : chunk_rows(n, k, sizeof(C));
    }
    const std::int64_t chunks = (n + rows - 1) / rows;
    if (protect) {
      // cuBLAS rounds to TF32 in fast mode in its own way: its check takes a TF32-level bound. The fused
      // kernel's one-product terms are checked at float level (set_one_product_blocks); its float-accurate
      // ones, and every other backend's, at the compute type's.
      const double u = tf32 ? detail::kTf32Roundoff : detail::unit_roundoff<C>();
      const detail::Carry carry = fused()                         ? detail::Carry::pass
                                  : k <= detail::kFewClustersMax ? detail::Carry::blocks
                                                                  : detail::Carry::column;
      guard = std::make_unique<detail::DistanceGuard<C>>(d, k, chunks, u, carry);
      if (carry == detail::Carry::pass) {  // the kernel returns each point's sum of terms
        row_sums = DeviceBuffer<double>(static_cast<std::size_t>(n));
        carried = DeviceBuffer<double>(static_cast<std::size_t>(n));
        fault_values = DeviceBuffer<float>(2);
        rechecked_rows = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(rows));
        rechecked_sums = DeviceBuffer<double>(static_cast<std::size_t>(rows));
        if constexpr (!std::is_same_v<C, double>) {  // the fused kernel takes no double
          const detail::CentreRounding centres = !native() || std::is_same_v<T, float> ? detail::CentreRounding::tf32
                                                 : std::is_same_v<T, __half>           ? detail::CentreRounding::f16
                                                                                       : detail::CentreRounding::bf16;
          guard->set_one_product_blocks(x, n, rows, centres, c.stream());
        }
      } else if (carry == detail::Carry::blocks) {  // the GEMM keeps its k columns
        guard->set_blocks(x, n, rows, c.stream());
        g = DeviceBuffer<C>(static_cast<std::size_t>(rows * k));
      } else {  // x.s is one more column of the GEMM
        g = DeviceBuffer<C>(static_cast<std::size_t>(rows * (k + 1)));
      }
    } else if (through_gemm()) {
      g = DeviceBuffer<C>(static_cast<std::size_t>(rows * k));
    }
    for (std::int64_t i = 0; i < 2 * chunks + 1; ++i) {
      events.push_back(std::make_unique<CudaEvent>());
      kept_events.push_back(std::make_unique<CudaEvent>());
    }
  }

  /// The chunk of `m` rows from r0 as the GEMM reads them: X itself, its column-major copy, or 16-bit rows
  /// widened to float (queued here).
  gemm::MatrixView<const C> chunk(std::int64_t r0, std::int64_t m) {
    if constexpr (detail::is_16bit<T>) {
      detail::widen_rows(x + r0 * d, m, d, wide.data(), ldw, ctx.stream());
      return gemm::row_major<const C>(wide.data(), m, d, ldw);
    } else {
      return xt ? gemm::col_major<const C>(xt + r0, m, d, n) : gemm::row_major<const C>(x + r0 * d, m, d);
    }
  }

  /// Whether the distance GEMM rounds to TF32 (gemm_rounds_to_tf32 of the backend, chosen or resolved
  /// from Algo::automatic); never on the fused route.
  bool rounds_to_tf32() const {
    if (fused() || math != gemm::Math::fast) return false;
    const gemm::Algo algo = backend == gemm::Algo::automatic ? gemm::choose(ctx, distance_probe(x, n, d, k, k)) : backend;
    return gemm_rounds_to_tf32<C>(algo, math);
  }

  /// g = the chunk of m rows from r0 times the `columns` centroids c (d x columns, column-major), through
  /// the backend; fast mode lets a float GEMM round to TF32 (one product per term, as the fused kernel).
  void cross_terms(std::int64_t r0, std::int64_t m, const C* c, std::int64_t columns) {
    gemm::Arguments<C> a{chunk(r0, m), gemm::col_major<const C>(c, d, columns), gemm::row_major(g.data(), m, columns)};
    a.allow_tf32 = math == gemm::Math::fast;
    gemm::gemm(ctx, a, backend);
  }

  void run(const C* c, const C* xnorm, const C* cnorm, std::int32_t* labels, C* mindist, int* counts) {
    const cudaStream_t stream = ctx.stream();
    SKINNY_CUDA_TRY(cudaMemsetAsync(counts, 0, static_cast<std::size_t>(k) * sizeof(int), stream));
    if (guard) {
      run_protected(c, xnorm, cnorm, labels, mindist, counts);
      return;
    }
    if (narrow) {  // distances and argmin in one kernel count as distances, the counts as the argmin
      events[0]->record(stream);
      detail::narrow_nearest(x, n, d, c, k, detail::narrow_form(math, d), labels, mindist, stream);
      events[1]->record(stream);
      detail::count_labels(labels, n, k, counts, stream);
      events[2]->record(stream);
      return;
    }
    if constexpr (!std::is_same_v<C, double>) {
      if (sums) {  // distances, argmin, counts and the update's sums in one kernel: all of it counts as distances
        events[0]->record(stream);
        detail::assign_and_sum(x, n, d, c, k, xnorm, cnorm, labels, mindist, counts, *sums, stream);
        events[1]->record(stream);
        events[2]->record(stream);
        return;
      }
      if (few) {  // distances, argmin and counts in one kernel: all of it counts as distances
        events[0]->record(stream);
        detail::few_nearest(x, n, d, c, k, xnorm, cnorm, labels, mindist, counts, stream);
        events[1]->record(stream);
        events[2]->record(stream);
        return;
      }
    }
    std::size_t e = 0;
    for (std::int64_t r0 = 0; r0 < n; r0 += rows) {
      const std::int64_t m = std::min(rows, n - r0);
      events[e++]->record(stream);
      if constexpr (!std::is_same_v<C, double>) {
        if (fused()) {
          nearest_chunk(r0, m, c, xnorm, cnorm, labels, mindist, false);
          events[e++]->record(stream);
          detail::count_labels(labels + r0, m, k, counts, stream);
          continue;
        }
      }
      cross_terms(r0, m, c, k);
      events[e++]->record(stream);
      detail::argmin(g.data(), m, k, xnorm + r0, cnorm, labels + r0, mindist + r0, counts, stream);
    }
    events[e]->record(stream);
  }
  /// The protected assignment: per chunk, the GEMM with the checksum centroid (k + 1 columns) and the
  /// checked argmin; then the chunks whose check failed are computed again (a transient fault does not
  /// repeat), and the counts come from the verified labels.
  void run_protected(const C* c, const C* xnorm, const C* cnorm, std::int32_t* labels, C* mindist, int* counts) {
    const cudaStream_t stream = ctx.stream();
    guard->prepare(ctx, c, cnorm);
    const std::int64_t chunks = (n + rows - 1) / rows;
    const std::int64_t faulty_chunk =
        injection ? static_cast<std::int64_t>(splitmix64(injection->seed) % static_cast<std::uint64_t>(chunks)) : -1;
    std::size_t e = 0;
    // Chunk ci; `timed`: between the events of its phases (a recomputation counts in the iteration only).
    const auto compute = [&](std::int64_t ci, bool timed) {
      const std::int64_t r0 = ci * rows, m = std::min(rows, n - r0);
      const bool faulty = timed && ci == faulty_chunk;
      if (timed) events[e++]->record(stream);
      if constexpr (!std::is_same_v<C, double>) {
        if (fused()) {
          nearest_chunk(r0, m, c, xnorm, cnorm, labels, mindist, faulty);
          if (timed) events[e++]->record(stream);
          check_fused_chunk(ci, r0, m, xnorm);
          if (report) {
            report->rows_verified += m;
            if (one_product_sums) report->rows_rechecked += rechecked;
          }
          return;
        }
      }
      if (guard->blocks()) {
        cross_terms(r0, m, c, k);
        if (faulty) inject(r0, m, ci, xnorm, cnorm);
        if (timed) events[e++]->record(stream);
        detail::block_checked_argmin(g.data(), m, k, xnorm + r0, cnorm, guard->carried_blocks(), guard->block_norms(),
                                     ci * guard->blocks_per_chunk(), guard->block_factor(), labels + r0, mindist + r0,
                                     guard->failures(ci), guard->max_ratio(), stream);
      } else {
        cross_terms(r0, m, guard->centroids(), k + 1);
        if (faulty) inject(r0, m, ci, xnorm, cnorm);
        if (timed) events[e++]->record(stream);
        detail::checked_argmin(g.data(), m, k, xnorm + r0, cnorm, guard->centroid_scale(), guard->bound_factor(),
                               labels + r0, mindist + r0, guard->failures(ci), guard->max_ratio(), stream);
      }
      if (report) report->rows_verified += m;
    };
    for (std::int64_t ci = 0; ci < chunks; ++ci) compute(ci, true);
    const std::vector<std::int64_t> failed = guard->failed_chunks(stream);
    if (!failed.empty()) {
      if (report) {
        report->distance_detections += static_cast<int>(failed.size());
        if (std::find(failed.begin(), failed.end(), faulty_chunk) != failed.end()) report->detected = true;
      }
      for (const std::int64_t ci : failed) compute(ci, false);
      if (!guard->failed_chunks(stream).empty())
        throw std::runtime_error("kmeans: the distances of a chunk failed their checksum again when recomputed "
                                 "(a persistent fault, not a transient one)");
    }
    if (report) report->max_clean_ratio = std::max(report->max_clean_ratio, guard->max_clean_ratio());
    detail::count_labels(labels, n, k, counts, stream);
    events[e]->record(stream);
  }

  /// The checks of the fused kernel's chunk ci (m rows at r0): one-product row sums by blocks against the
  /// carried block terms, and the points it re-checked on their own; float-accurate row sums per point
  /// against x.s from a pass over the chunk in double.
  void check_fused_chunk(std::int64_t ci, std::int64_t r0, std::int64_t m, const C* xnorm) {
    const cudaStream_t stream = ctx.stream();
    if (one_product_sums) {
      const std::int64_t block0 = ci * guard->one_product_blocks_per_chunk();
      detail::check_one_product_blocks(row_sums.data() + r0, m, guard->one_product_carried() + block0,
                                       guard->one_product_norms() + block0, guard->centroid_scale(),
                                       guard->one_product_factor(), guard->one_product_bias(), guard->failures(ci),
                                       guard->max_ratio(), stream);
      detail::check_listed_points(x + r0 * d, d, rechecked_rows.data(), rechecked, rechecked_sums.data(),
                                  guard->column_sums(), xnorm + r0, guard->centroid_scale(), guard->bound_factor(),
                                  guard->failures(ci), guard->max_ratio(), stream);
    } else {
      detail::row_dots(x + r0 * d, m, d, guard->column_sums(), carried.data() + r0, stream);
      detail::check_points(row_sums.data() + r0, carried.data() + r0, xnorm + r0, m, guard->centroid_scale(),
                           guard->bound_factor(), guard->failures(ci), guard->max_ratio(), stream);
    }
  }

  /// The fused kernel on the chunk of m rows at r0 (16-bit rows as they are, or widened to float, queued
  /// here); protected, it also returns each point's sum of terms (and lists the points it re-checked), and
  /// with `faulty` flips one bit of one term inside the kernel (Params::inject), reported.
  void nearest_chunk(std::int64_t r0, std::int64_t m, const C* c, const C* xnorm, const C* cnorm, std::int32_t* labels,
                     C* mindist, bool faulty) {
    if constexpr (!std::is_same_v<C, double>) {
      gemm::NearestArguments na;
      na.x_sq_norms = xnorm + r0;
      if (half_copy()) {  // its norms are the copy's: the distances are those of the points it holds
        na.x = half.rows.data() + r0 * half.ld;
        na.x_type = gemm::Element::f16;
        na.ldx = half.ld;
        na.x_sq_norms = half.sq_norms.data() + r0;
      } else if (native()) {
        na.x = (padded.size() > 0 ? padded.data() : x) + r0 * ldn;
        na.x_type = element_of<T>();
        na.ldx = ldn;
        if (!half.empty()) {  // exact mode: the one-product pass on the copy, the re-check on X
          na.x_half = half.rows.data() + r0 * half.ld;
          na.ldx_half = half.ld;
          na.x_half_sq_norms = half.sq_norms.data() + r0;
          na.x_half_errors = half.errors.data() + r0;
        }
      } else {
        const gemm::MatrixView<const C> a = chunk(r0, m);
        na.x = a.data;
        na.ldx = a.ld;
      }
      na.n = m;
      na.d = d;
      na.c = c;
      na.k = k;
      na.c_sq_norms = cnorm;
      na.labels = labels + r0;
      na.sq_distances = mindist + r0;
      na.math = math;
      if (row_sums.size() > 0) {
        na.row_sums = row_sums.data() + r0;
        na.rechecked_rows = rechecked_rows.data();
        na.rechecked_row_sums = rechecked_sums.data();
        na.rechecked_count = &rechecked;
        na.row_sums_one_product = &one_product_sums;
      }
      std::uint64_t state = injection ? splitmix64(injection->seed ^ 0x4e454152ull) : 0;
      if (faulty) {
        na.fault_row = static_cast<std::int64_t>(splitmix64(state++) % static_cast<std::uint64_t>(m));
        na.fault_col = static_cast<std::int64_t>(splitmix64(state++) % static_cast<std::uint64_t>(k));
        na.fault_bit = static_cast<int>(splitmix64(state++) % 32);
        na.fault_values = fault_values.data();
      }
      gemm::nearest(ctx, na);
      if (faulty) {
        const std::vector<float> v = fault_values.to_host();
        const std::int64_t block =
            r0 / rows * guard->one_product_blocks_per_chunk() + na.fault_row / detail::kOneProductBlockRows;
        const double bound = one_product_sums ? guard->one_product_bound(block, ctx.stream())
                                              : point_bound(r0 + na.fault_row, xnorm);
        record_fault(r0 + na.fault_row, na.fault_col, na.fault_bit, v[0], v[1], bound);
      }
    }
  }

  /// Params::inject into the GEMM's terms: one bit of one term (or checksum term) of chunk ci, at r0.
  void inject(std::int64_t r0, std::int64_t m, std::int64_t ci, const C* xnorm, const C* cnorm) {
    const std::int64_t ldg = guard->blocks() ? k : k + 1;
    const detail::FlippedBit f = detail::flip_random_bit(g.data(), m * ldg, injection->seed, ctx.stream());
    const std::int64_t row = f.index / ldg, col = f.index % ldg;
    double bound = 0;
    if (guard->blocks()) {  // the bound of the check of the term's block and column
      C c_sq = 0;
      SKINNY_CUDA_TRY(cudaMemcpyAsync(&c_sq, cnorm + col, sizeof c_sq, cudaMemcpyDeviceToHost, ctx.stream()));
      bound = guard->block_bound(ci * guard->blocks_per_chunk() + row / detail::kCheckBlockRows, static_cast<double>(c_sq),
                                 ctx.stream());  // waits for the copy too
    } else {
      bound = point_bound(r0 + row, xnorm);
    }
    record_fault(r0 + row, col, f.bit, f.before, f.after, bound);
  }

  /// The bound of point `row`'s check (waits for the stream).
  double point_bound(std::int64_t row, const C* xnorm) {
    C x_sq = 0;
    SKINNY_CUDA_TRY(cudaMemcpyAsync(&x_sq, xnorm + row, sizeof x_sq, cudaMemcpyDeviceToHost, ctx.stream()));
    const double scale = guard->centroid_scale_now(ctx.stream());  // waits for the copy too
    return detail::distance_bound(static_cast<double>(x_sq), scale, guard->bound_factor());
  }

  /// The injected fault into the report, with the bound of the check that sees it.
  void record_fault(std::int64_t row, std::int64_t col, int bit, double before, double after, double bound) {
    report->injected = true;
    report->target = FaultTarget::distances;
    report->row = row;
    report->col = col;
    report->bit = bit;
    report->before = before;
    report->after = after;
    report->bound = bound;
  }

  /// GPU milliseconds of the last run in the GEMMs and in the argmins (waits for it); kept: of the run
  /// before it, whose events keep_events() set aside.
  std::pair<double, double> phase_ms(bool kept = false) const {
    const auto& recorded = kept ? kept_events : events;
    double gemm_ms = 0, argmin_ms = 0;
    for (std::size_t i = 0; i + 2 < recorded.size(); i += 2) {
      gemm_ms += recorded[i + 1]->ms_since(*recorded[i]);
      argmin_ms += recorded[i + 2]->ms_since(*recorded[i + 1]);
    }
    return {gemm_ms, argmin_ms};
  }
  /// Sets the last run's events aside (phase_ms(true)), so that the next run records into others.
  void keep_events() { std::swap(events, kept_events); }
};

/// Throws std::invalid_argument unless `w` is empty or n finite weights > 0.
void check_weights(const std::vector<double>& w, std::int64_t n) {
  if (w.empty()) return;
  if (static_cast<std::int64_t>(w.size()) != n)
    throw std::invalid_argument("kmeans: sample_weight holds " + std::to_string(w.size()) + " values for n = " +
                                std::to_string(n) + " points");
  for (std::size_t i = 0; i < w.size(); ++i)
    if (!(w[i] > 0) || !std::isfinite(w[i]))
      throw std::invalid_argument("kmeans: sample_weight[" + std::to_string(i) + "] = " + std::to_string(w[i]) +
                                  " must be finite and > 0");
}

/// The update moves the points whose label changed, instead of summing all points, when the iteration
/// before changed fewer than n / kMoveChangesBelow labels (Updater::queue_update): the bits of summing all
/// points, without the update's read of X once labels settle (H100, the main job: 2.82 -> 1.44 ms an
/// iteration; bench/results/h100/2026-12-07_moves). SKINNY_KMEANS_MOVES=0 sums all points every iteration
/// (for comparisons).
constexpr unsigned long long kMoveChangesBelow = 32;
bool moves_switched_off() { return environment_says("SKINNY_KMEANS_MOVES", "0"); }

/// One fit's data and what every run from a seed shares: norms, the column-major copy, the weights,
/// the scaled tol and the sums' scales; run() is one Lloyd run from one set of initial centroids.
template <class T>
class Lloyd {
 public:
  using C = compute_t<T>;
  Lloyd(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const Params& params,
        const std::vector<double>& sample_weight)
      : ctx_(ctx), x_(x), n_(n), d_(d), k_(params.k), params_(params), xnorm_(static_cast<std::size_t>(n)),
        mindist_(static_cast<std::size_t>(n)), c_(static_cast<std::size_t>(k_ * d)), c_next_(static_cast<std::size_t>(k_ * d)),
        cnorm_(static_cast<std::size_t>(k_)), labels_(static_cast<std::size_t>(n)), prev_labels_(static_cast<std::size_t>(n)),
        counts_(static_cast<std::size_t>(k_)), weights_(sample_weight),
        assign_(ctx, x, n, d, k_, params.backend, params.math, params.protect), updater_(n, d, k_) {
    const cudaStream_t stream = ctx.stream();
    one_pass_ = assign_.few && sample_weight.empty() && one_pass_pays<T>(ctx, d, k_) &&
                detail::assign_and_sum_applies(x, d, k_);
    if (one_pass_) {
      sum_target_ = updater_.sum_target();
      assign_.sums = &sum_target_;
    }
    // The next assignment queued ahead (update()), where the sums are the updater's own and there is room
    // for a second set of per-point results.
    if (!one_pass_ && !params.protect &&
        fits_in_free_memory(static_cast<std::size_t>(n) * (sizeof(C) + sizeof(std::int32_t)) + (64u << 20))) {
      labels_ahead_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(n));
      mindist_ahead_ = DeviceBuffer<C>(static_cast<std::size_t>(n));
      counts_ahead_ = DeviceBuffer<int>(static_cast<std::size_t>(k_));
    }
    updater_.keep_summed_labels(!moves_switched_off());
    const std::size_t xt_bytes = static_cast<std::size_t>(n) * static_cast<std::size_t>(d) * sizeof(T);
    if (std::is_same_v<T, C> && params.column_copy && assign_.through_gemm() && n >= kColumnCopyMinPoints &&
        fits_in_free_memory(xt_bytes))
      xt_ = DeviceBuffer<C>(static_cast<std::size_t>(n) * static_cast<std::size_t>(d));
    CudaEvent start, stop;
    start.record(stream);
    if constexpr (std::is_same_v<T, C>) {
      if (xt_.size() > 0) {
        detail::to_columns(x, n, d, xt_.data(), stream);
        assign_.xt = xt_.data();
      }
    }
    detail::row_sq_norms(x, n, d, xnorm_.data(), stream);
    tol_scaled_ = params.tol > 0 ? params.tol * detail::mean_feature_variance(x, n, d, stream) : 0.0;
    const std::vector<double> max_abs = updater_.column_max_abs(x, n, weights(), stream);
    updater_.set_scales(max_abs, !sample_weight.empty());
    if (params.protect) sum_guard_ = std::make_unique<detail::SumGuard<T>>(x, n, d, max_abs, weights(), stream);
    stop.record(stream);
    shared_init_ms_ = stop.ms_since(start);
  }

  Result<C> run(std::uint64_t seed, const std::vector<C>& initial_centroids) {
    const cudaStream_t stream = ctx_.stream();
    Result<C> result;
    result.k = k_;
    result.d = d_;
    result.seed = seed;
    result.column_copy = xt_.size() > 0;
    result.one_pass = one_pass_;
    result.protection.enabled = params_.protect;
    assign_.report = &result.protection;
    CudaEvent start, stop;
    start.record(stream);
    if (params_.init == Init::given) {
      c_.copy_from(initial_centroids);
    } else if constexpr (detail::is_16bit<T>) {
      initialise_16bit(seed);
    } else {
      initialise(x_, n_, xnorm_.data(), seed);
    }
    stop.record(stream);
    result.timing.init_ms = stop.ms_since(start) + shared_init_ms_;
    shared_init_ms_ = 0;  // counted once, in the first run

    // One assignment before the iterations carries the one-time costs (the GEMM's plan, which TSM2 times
    // on a shape's first call, and the kernels' loading), so that every iteration's time is a steady one.
    start.record(stream);
    assign();
    stop.record(stream);
    result.timing.setup_ms = stop.ms_since(start);

    // ahead: this iteration's assignment was queued by the last update(), right after
    // that iteration's end event; its results wait in the *_ahead_ buffers.
    bool ahead = false;
    few_changes_ = false;
    CudaEvent ends[2];
    for (int it = 1; it <= params_.max_iter; ++it) {
      CudaEvent update_start;
      CudaEvent& end = ends[it % 2];
      start.record(stream);
      std::swap(labels_, prev_labels_);
      const bool faulty = params_.protect && params_.inject.iteration == it;
      assign_.injection = faulty && params_.inject.target == FaultTarget::distances ? &params_.inject : nullptr;
      if (ahead) {
        take_ahead();
      } else {
        if (one_pass_) updater_.begin(stream);  // the assignment adds to the sums
        assign();
      }
      assign_.injection = nullptr;
      // The inertia and the changed labels come back with the update, which waits for the stream anyway
      // (iteration 1's labels have nothing before them: the set-up's were for the same centroids).
      const bool counts_changes = it > 1;
      inertia_sum_.queue(mindist_.data(), n_, stream, weights(), counts_changes ? labels_.data() : nullptr,
                         prev_labels_.data());
      update_start.record(stream);
      const double shift = update(faulty && params_.inject.target == FaultTarget::sums, result.protection, end);
      const double inertia = inertia_sum_.value();
      std::swap(c_, c_next_);
      // With the next assignment queued ahead, this one's events were set aside; an iteration whose
      // assignment ran ahead began at the last one's end.
      const auto [gemm_ms, argmin_ms] = assign_.phase_ms(queues_ahead());
      const double total = ahead ? end.ms_since(ends[(it + 1) % 2]) : end.ms_since(start);
      const detail::IterationTimes times{gemm_ms, argmin_ms, end.ms_since(update_start), total};
      ahead = queues_ahead() && !updater_.moved();  // a move changed the centroids after it was queued
      // The changes count the empty-cluster moves of the iteration before too: they change labels.
      const unsigned long long changed = counts_changes ? inertia_sum_.changes() : 0;
      few_changes_ = counts_changes && changed * kMoveChangesBelow <= static_cast<unsigned long long>(n_);
      if (detail::end_iteration(result, params_, it, times, inertia, shift, changed, tol_scaled_)) break;
    }
    // Labels and inertia for the centroids returned (scikit-learn does the same final assignment); the
    // inertia from direct differences, whatever precision the assignment's distances had.
    if (ahead) take_ahead();
    else assign();
    detail::label_sq_distances(x_, n_, d_, c_.data(), labels_.data(), mindist_.data(), stream);
    result.inertia = detail::sum(mindist_.data(), n_, stream, weights());
    result.labels = labels_.to_host();
    result.centroids = c_.to_host();
    assign_.report = nullptr;
    return result;
  }

 private:
  const double* weights() const { return weights_.size() > 0 ? weights_.data() : nullptr; }

  /// The initial centroids of one run from `rows` points (float or double) with norms `norms`.
  void initialise(const C* x, std::int64_t rows, const C* norms, std::uint64_t seed) {
    switch (resolve_init(params_.init, k_)) {
      case Init::given: break;  // copied by run()
      case Init::random: detail::init_random(ctx_, x, rows, d_, k_, seed, c_.data()); break;
      case Init::kmeans_plus_plus:
        detail::init_kmeans_plus_plus(ctx_, x, rows, d_, k_, seed, norms, c_.data(), params_.init_progress);
        break;
      case Init::kmeans_parallel:
      case Init::automatic:  // resolved to one of the others
        // The sampling rounds read the assignment's half copy where it holds these points.
        detail::init_kmeans_parallel(ctx_, x, rows, d_, k_, seed, params_.init_oversampling, params_.init_rounds,
                                     norms, c_.data(), params_.init_progress, detail::Reduction::automatic,
                                     static_cast<const void*>(x) == x_ && rows == n_ ? &assign_.half : nullptr);
        break;
    }
  }

  /// 16-bit X: the initialisation runs on X widened to float when that fits in free memory, otherwise on
  /// every s-th row, as many as fit (a deterministic sample; the seeding then sees n / s points).
  void initialise_16bit(std::uint64_t seed) {
    if constexpr (detail::is_16bit<T>) {
      const std::size_t row_bytes = static_cast<std::size_t>(d_) * sizeof(float);
      std::int64_t step = 1;
      while (step < n_ && !fits_in_free_memory(static_cast<std::size_t>((n_ + step - 1) / step) * row_bytes * 2)) step *= 2;
      const std::int64_t rows = (n_ + step - 1) / step;
      if (rows < k_)
        throw std::invalid_argument("kmeans: too little free GPU memory to seed " + std::to_string(k_) +
                                    " clusters from 16-bit data; give the initial centroids");
      DeviceBuffer<float> wide(static_cast<std::size_t>(rows) * static_cast<std::size_t>(d_)), norms(static_cast<std::size_t>(rows));
      const cudaStream_t stream = ctx_.stream();
      if (step == 1) {
        detail::widen_rows(x_, n_, d_, wide.data(), d_, stream);
      } else {
        for (std::int64_t r = 0; r < rows; ++r)  // one row at a time: rare, and small next to the seeding
          detail::widen_rows(x_ + r * step * d_, 1, d_, wide.data() + r * d_, d_, stream);
      }
      detail::row_sq_norms(wide.data(), rows, d_, norms.data(), stream);
      initialise(wide.data(), rows, norms.data(), seed);
      SKINNY_CUDA_TRY(cudaStreamSynchronize(stream));  // the buffers go when this returns
    }
  }
  /// The centroid update, ending with `end` recorded once the new centroids are queued; with
  /// Params::protect, the sums verified against X's column totals before the means use them, and
  /// accumulated again when they differ (after `inject_fault`, one bit flipped in them). Where the
  /// *_ahead_ buffers exist, the next assignment (on the new centroids) is queued before the host waits
  /// for the shift, so that the GPU does not idle while the host checks the counts and queues the next
  /// iteration (queues_ahead(); it stands unless a move to an empty cluster changes the centroids).
  double update(bool inject_fault, ProtectionReport& report, CudaEvent& end) {
    const cudaStream_t stream = ctx_.stream();
    if (queues_ahead()) {
      updater_.queue_update(x_, weights(), labels_.data(), counts_.data(), c_.data(), c_next_.data(), stream,
                            few_changes_);
      end.record(stream);
      assign_.keep_events();
      assign_into(c_next_.data(), labels_ahead_.data(), mindist_ahead_.data(), counts_ahead_.data());
      return updater_.settle(x_, weights(), labels_.data(), mindist_.data(), counts_.data(), c_.data(), c_next_.data(),
                             stream, end.get());
    }
    const double shift = guarded_update(inject_fault, report);
    end.record(stream);
    return shift;
  }

  /// update() without the assignment ahead.
  double guarded_update(bool inject_fault, ProtectionReport& report) {
    const cudaStream_t stream = ctx_.stream();
    if (one_pass_)  // the assignment formed the sums
      return updater_.finish(x_, weights(), labels_.data(), mindist_.data(), counts_.data(), c_.data(), c_next_.data(),
                             stream);
    if (!sum_guard_)
      return updater_.update(x_, weights(), labels_.data(), mindist_.data(), counts_.data(), c_.data(), c_next_.data(),
                             stream, few_changes_);
    const auto accumulate = [&] {
      updater_.begin(stream);
      updater_.accumulate(x_, weights(), labels_.data(), n_, stream);
    };
    accumulate();
    if (inject_fault) {
      const detail::FlippedBit f = detail::flip_random_bit(updater_.sums(), updater_.sum_words(), params_.inject.seed, stream);
      report.injected = true;
      report.target = FaultTarget::sums;
      report.row = f.index;
      report.col = -1;
      report.bit = f.bit;
      report.before = f.before;
      report.after = f.after;
    }
    if (!sum_guard_->matches(updater_, stream)) {
      ++report.sum_detections;
      if (inject_fault) report.detected = true;
      accumulate();
      if (!sum_guard_->matches(updater_, stream))
        throw std::runtime_error("kmeans: the centroid sums failed their checksums again when recomputed (a "
                                 "persistent fault, not a transient one)");
    }
    return updater_.finish(x_, weights(), labels_.data(), mindist_.data(), counts_.data(), c_.data(), c_next_.data(),
                           stream);
  }

  void assign() { assign_into(c_.data(), labels_.data(), mindist_.data(), counts_.data()); }

  /// Labels, distances and counts of every point for the centroids c.
  void assign_into(const C* c, std::int32_t* labels, C* mindist, int* counts) {
    detail::row_sq_norms(c, k_, d_, cnorm_.data(), ctx_.stream());
    assign_.run(c, xnorm_.data(), cnorm_.data(), labels, mindist, counts);
  }

  /// Whether update() queues the next assignment ahead (its buffers exist).
  bool queues_ahead() const { return labels_ahead_.size() > 0; }

  /// The assignment queued ahead becomes the current one.
  void take_ahead() {
    std::swap(labels_, labels_ahead_);
    std::swap(mindist_, mindist_ahead_);
    std::swap(counts_, counts_ahead_);
  }

  Context& ctx_;
  const T* x_;
  std::int64_t n_, d_, k_;
  const Params& params_;
  DeviceBuffer<C> xnorm_, mindist_, c_, c_next_, cnorm_;
  DeviceBuffer<std::int32_t> labels_, prev_labels_;
  DeviceBuffer<int> counts_;
  // The next iteration's assignment, queued ahead by update() (empty where it does not run ahead).
  DeviceBuffer<std::int32_t> labels_ahead_;
  DeviceBuffer<C> mindist_ahead_;
  DeviceBuffer<int> counts_ahead_;
  DeviceBuffer<double> weights_;
  Assigner<T> assign_;
  detail::Updater<T> updater_;
  detail::AsyncSum inertia_sum_;  // and the changed labels
  DeviceBuffer<C> xt_;  // X column-major, when Params::column_copy applies
  std::unique_ptr<detail::SumGuard<T>> sum_guard_;  // Params::protect
  bool one_pass_ = false;          // the assignment forms the update's sums (Result::one_pass)
  detail::SumTarget sum_target_{};  // the updater's sums, for the assignment
  double tol_scaled_ = 0, shared_init_ms_ = 0;
  /// Whether the last iteration changed few labels (under n / kMoveChangesBelow): the next update then moves
  /// the changed points between the sums instead of summing all (Updater::queue_update).
  bool few_changes_ = false;
};

}  // namespace

/// Throws std::invalid_argument unless the backend can compute the protected distances of many clusters:
/// k + 1 columns (few clusters keep k: block checks).
template <class T>
void check_protected_shape(const T* x, std::int64_t n, std::int64_t d, std::int64_t k, gemm::Algo backend) {
  const gemm::Support s = gemm::can_implement(backend, distance_probe(x, n, d, k, k + 1));
  if (!s) throw std::invalid_argument("kmeans: backend cannot compute the protected distances (k + 1 columns): " + s.reason);
}

template <class T>
Result<compute_t<T>> fit(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const Params& params,
                         const std::vector<compute_t<T>>& initial_centroids, const std::vector<double>& sample_weight) {
  check_shape(x, n, d, params.k, params.backend);
  if (params.protect && params.k > detail::kFewClustersMax) check_protected_shape(x, n, d, params.k, params.backend);
  check_params(params);
  check_weights(sample_weight, n);
  if (params.init == Init::given) detail::check_centroids(initial_centroids, params.k, d);
  Lloyd<T> lloyd(ctx, x, n, d, params, sample_weight);
  const int runs = params.init == Init::given ? 1 : params.n_init;
  Result<compute_t<T>> best;
  for (int run = 0; run < runs; ++run) {
    const std::uint64_t seed = run == 0 ? params.seed : splitmix64(params.seed + static_cast<std::uint64_t>(run));
    Result<compute_t<T>> r = lloyd.run(seed, initial_centroids);
    if (run == 0 || r.inertia < best.inertia) best = std::move(r);
  }
  return best;
}

template <class T>
std::vector<std::int32_t> predict(Context& ctx, const T* x, std::int64_t n, std::int64_t d,
                                  const std::vector<compute_t<T>>& centroids, std::int64_t k, gemm::Algo backend,
                                  gemm::Math math) {
  check_shape(x, n, d, k, backend);
  detail::check_centroids(centroids, k, d);
  const cudaStream_t stream = ctx.stream();
  using C = compute_t<T>;
  DeviceBuffer<C> xnorm(static_cast<std::size_t>(n)), mindist(static_cast<std::size_t>(n)), c(centroids),
      cnorm(static_cast<std::size_t>(k));
  DeviceBuffer<std::int32_t> labels(static_cast<std::size_t>(n));
  DeviceBuffer<int> counts(static_cast<std::size_t>(k));
  detail::row_sq_norms(x, n, d, xnorm.data(), stream);
  detail::row_sq_norms(c.data(), k, d, cnorm.data(), stream);
  Assigner<T> assign(ctx, x, n, d, k, backend, math);
  assign.run(c.data(), xnorm.data(), cnorm.data(), labels.data(), mindist.data(), counts.data());
  return labels.to_host();
}

template <class T>
std::string distance_method(const Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                            gemm::Algo backend, gemm::Math math) {
  check_shape(x, n, d, k, backend);
  if (detail::narrow_assignment(d, k, math, backend, false)) return "narrow rows";
  if constexpr (std::is_same_v<T, float>) {
    if (math == gemm::Math::fast && half_copy_candidate<T>(ctx, x, n, d, k, backend, math, false) &&
        detail::half_rows_possible(x, n, d, ctx.stream()))
      return "nearest (fast, half copy)";
  }
  const NearestRoute route = nearest_route(ctx, x, n, d, k, backend, math);
  if (few_clusters_assignment(ctx, x, d, k, backend, math, route)) return "few-clusters";
  if (route != NearestRoute::none) return math == gemm::Math::fast ? "nearest (fast)" : "nearest";
  const gemm::Algo algo = gemm::choose(ctx, distance_probe(x, n, d, k, k));
  return std::string(gemm::to_string(algo)) + (gemm_rounds_to_tf32<compute_t<T>>(algo, math) ? " (tf32)" : "");
}

template <class T>
Blobs<T> make_blobs(Context& ctx, T* x, std::int64_t n, std::int64_t d, int k, std::uint64_t seed, double stddev,
                    double center_box) {
  if (x == nullptr || n < 1 || d < 1 || k < 1 || k > n)
    throw std::invalid_argument("make_blobs: need x != null, n, d >= 1 and 1 <= k <= n (got n = " + std::to_string(n) +
                                ", d = " + std::to_string(d) + ", k = " + std::to_string(k) + ")");
  if (!(stddev >= 0) || !(center_box > 0))
    throw std::invalid_argument("make_blobs: need stddev >= 0 and center_box > 0");
  DeviceBuffer<T> centers(static_cast<std::size_t>(k) * static_cast<std::size_t>(d));
  detail::blobs(x, centers.data(), n, d, k, seed, stddev, center_box, ctx.stream());
  Blobs<T> b;
  b.centers = centers.to_host();
  b.labels.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) b.labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % k);
  return b;
}

namespace detail {

template <class T>
void check_fit(const T* x, std::int64_t n, std::int64_t d, const Params& params, const std::vector<T>& initial_centroids,
               const std::vector<double>& sample_weight) {
  check_shape(x, n, d, params.k, params.backend);
  check_params(params);
  check_weights(sample_weight, n);
  if (params.init == Init::given) check_centroids(initial_centroids, params.k, d);
}

static_assert(kNarrowRowsMaxDims <= kNarrowMaxDims, "the rule routes only rows the kernel takes");
gemm::Math narrow_form(gemm::Math math, std::int64_t d) {
  const bool expanded = math == gemm::Math::fast && narrow_expanded_pays(d) &&
                        !environment_says("SKINNY_KMEANS_NARROW_FAST", "0");
  return expanded ? gemm::Math::fast : gemm::Math::exact;
}
bool narrow_assignment(std::int64_t d, std::int64_t k, gemm::Math math, gemm::Algo backend, bool protect) {
  if (backend != gemm::Algo::automatic || protect || narrow_switched_off()) return false;
  return narrow_forced() ? d <= kNarrowRowsMaxDims : narrow_rows_pay(d, k, math);
}

template <class T>
bool uses_nearest(const Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k, gemm::Algo backend,
                  gemm::Math math) {
  return nearest_route(ctx, x, n, d, k, backend, math, false) != NearestRoute::none;  // streamed chunks: X's rows
}

template void check_fit(const float*, std::int64_t, std::int64_t, const Params&, const std::vector<float>&,
                        const std::vector<double>&);
template void check_fit(const double*, std::int64_t, std::int64_t, const Params&, const std::vector<double>&,
                        const std::vector<double>&);
template bool uses_nearest(const Context&, const float*, std::int64_t, std::int64_t, std::int64_t, gemm::Algo, gemm::Math);
template bool uses_nearest(const Context&, const double*, std::int64_t, std::int64_t, std::int64_t, gemm::Algo,
                           gemm::Math);

// ------------------------------------------------------------------ for fit_distributed (lloyd_hooks.hpp)

void check_fit_params(const Params& p) { check_params(p); }

template <class T>
void check_distance_backend(const T* x, std::int64_t rows, std::int64_t d, std::int64_t k, gemm::Algo backend) {
  const gemm::Support s = gemm::can_implement(backend, distance_probe(x, rows, d, k, k));
  if (!s) throw std::invalid_argument("kmeans: backend cannot compute the distances: " + s.reason);
}

template <class T>
struct ShardAssigner<T>::Impl {
  Impl(Context& c, const T* x, std::int64_t n, std::int64_t d, std::int64_t k, gemm::Algo b, gemm::Math m)
      : assign(c, x, n, d, k, b, m) {}
  Assigner<T> assign;
  DeviceBuffer<T> xt;
};

template <class T>
ShardAssigner<T>::ShardAssigner(Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                                gemm::Algo backend, gemm::Math math, bool column_copy)
    : impl_(std::make_unique<Impl>(ctx, x, n, d, k, backend, math)) {
  const std::size_t elems = static_cast<std::size_t>(n) * static_cast<std::size_t>(d);
  if (column_copy && impl_->assign.through_gemm() && n >= kColumnCopyMinPoints &&
      fits_in_free_memory(elems * sizeof(T))) {
    impl_->xt = DeviceBuffer<T>(elems);
    detail::to_columns(x, n, d, impl_->xt.data(), ctx.stream());
    impl_->assign.xt = impl_->xt.data();
  }
}

template <class T>
ShardAssigner<T>::~ShardAssigner() = default;

template <class T>
bool ShardAssigner<T>::fused() const {
  return impl_->assign.fused();
}

template <class T>
bool ShardAssigner<T>::few() const {
  return impl_->assign.few;
}

template <class T>
bool ShardAssigner<T>::narrow() const {
  return impl_->assign.narrow;
}

template <class T>
bool ShardAssigner<T>::column_copy() const {
  return impl_->xt.size() > 0;
}

template <class T>
void ShardAssigner<T>::run(const T* c, const T* xnorm, const T* cnorm, std::int32_t* labels, T* mindist, int* counts) {
  impl_->assign.run(c, xnorm, cnorm, labels, mindist, counts);
}

template <class T>
std::pair<double, double> ShardAssigner<T>::phase_ms() const {
  return impl_->assign.phase_ms();
}

template void check_distance_backend(const float*, std::int64_t, std::int64_t, std::int64_t, gemm::Algo);
template void check_distance_backend(const double*, std::int64_t, std::int64_t, std::int64_t, gemm::Algo);
template class ShardAssigner<float>;
template class ShardAssigner<double>;

}  // namespace detail

#define SKINNY_KMEANS_FIT(T)                                                                                      \
  template Result<compute_t<T>> fit(Context&, const T*, std::int64_t, std::int64_t, const Params&,                \
                                    const std::vector<compute_t<T>>&, const std::vector<double>&);                \
  template std::vector<std::int32_t> predict(Context&, const T*, std::int64_t, std::int64_t,                      \
                                             const std::vector<compute_t<T>>&, std::int64_t, gemm::Algo, gemm::Math); \
  template std::string distance_method(const Context&, const T*, std::int64_t, std::int64_t, std::int64_t,        \
                                       gemm::Algo, gemm::Math);
SKINNY_KMEANS_FIT(float)
SKINNY_KMEANS_FIT(double)
SKINNY_KMEANS_FIT(__half)
SKINNY_KMEANS_FIT(__nv_bfloat16)
template Blobs<float> make_blobs(Context&, float*, std::int64_t, std::int64_t, int, std::uint64_t, double, double);
template Blobs<double> make_blobs(Context&, double*, std::int64_t, std::int64_t, int, std::uint64_t, double, double);

}  // namespace skinny::kmeans
