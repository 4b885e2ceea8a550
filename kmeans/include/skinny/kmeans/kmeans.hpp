// Lloyd K-means on the GPU with the distance trick ||x||^2 + ||c||^2 - 2 x.c, the cross term through the
// gemm library's backend (cuBLAS or ours), deterministic from the seed (within a process; across
// processes when TSM2's timed plan choice is turned off: Context::set_tsm2_tuning with trial = false).
//
//   skinny::Context ctx(stream);
//   skinny::kmeans::Params p;  p.k = 16;  p.backend = skinny::gemm::Algo::tsm2;
//   auto r = skinny::kmeans::fit<float>(ctx, dX, n, d, p);     // dX: n x d row-major on the device
//   r.centroids (k x d), r.labels (n), r.inertia, r.n_iter, r.converged, r.timing
#pragma once

#include <skinny/gemm/context.hpp>
#include <skinny/gemm/gemm.hpp>
#include <skinny/gemm/nearest.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace skinny::kmeans {

enum class Init {
  kmeans_plus_plus,  ///< k-means++: each next centroid drawn with probability proportional to D(x)^2
  random,            ///< k distinct points drawn uniformly
  given,             ///< the caller's centroids (fit's `initial_centroids`)
  /// k-means|| (scalable k-means++, Bahmani et al. 2012; cuML's default): a few rounds each sample
  /// about l = init_oversampling x k points at once with probability proportional to D(x)^2, then the
  /// candidates, weighted by the points nearest to each, are reduced to k. A few passes over X instead
  /// of k-means++'s k passes.
  kmeans_parallel,
  /// k-means|| from kParallelInitMinClusters clusters on, k-means++ below (see resolve_init).
  automatic,
};

/// Init::automatic runs k-means|| from this many clusters on. To be measured on the H100: k-means++
/// costs k passes over X with several host round trips each (1.25 s at 1M x 128, k = 1024), k-means||
/// init_rounds passes and a reduction over its candidates; where they cross is not measured yet.
inline constexpr std::int64_t kParallelInitMinClusters = 64;

/// The initialisation fit runs for `init` with k clusters: `init` itself, or for Init::automatic
/// kmeans_parallel when k >= kParallelInitMinClusters and kmeans_plus_plus otherwise.
constexpr Init resolve_init(Init init, std::int64_t k) noexcept {
  if (init != Init::automatic) return init;
  return k >= kParallelInitMinClusters ? Init::kmeans_parallel : Init::kmeans_plus_plus;
}

/// Name of an initialisation, as the programs and the Python package spell it.
constexpr const char* to_string(Init init) noexcept {
  switch (init) {
    case Init::kmeans_plus_plus: return "k-means++";
    case Init::random: return "random";
    case Init::given: return "given";
    case Init::kmeans_parallel: return "k-means||";
    case Init::automatic: return "auto";
  }
  return "?";
}

/// Progress of a long initialisation, as reported to Params::init_progress.
struct InitProgress {
  /// "k-means++" (centres chosen), "k-means|| sampling" (rounds done) or "k-means|| reduction"
  /// (candidates reduced to k: centres chosen).
  const char* stage = "";
  std::int64_t step = 0;        ///< steps of the stage done, 1-based
  std::int64_t of = 0;          ///< steps of the stage in all
  std::int64_t candidates = 0;  ///< k-means||: candidates sampled so far (0 for k-means++)
  double ms = 0;                ///< host wall time since the initialisation began (GPU work to here included)
};

/// One Lloyd iteration, as reported to Params::progress.
struct IterationInfo {
  int iteration = 0;     ///< 1-based
  double inertia = 0;    ///< sum of squared distances to the nearest centroid, before this update
  double shift = 0;      ///< sum over centroids of the squared distance each moved
  double ms = 0;         ///< GPU time of the iteration
};

/// Where fit injects one fault (Params::inject), for fault-tolerance tests and campaigns.
enum class FaultTarget {
  none,
  distances,  ///< one bit of one cross term x.c (or its checksum) of one chunk, after the GEMM
  sums,       ///< one bit of one word of the centroid sums, after they are accumulated
};

/// One fault injected into fit's intermediates: reproducible from the seed.
struct FaultInjection {
  FaultTarget target = FaultTarget::none;
  int iteration = 1;       ///< the Lloyd iteration (1-based) whose intermediate is corrupted
  std::uint64_t seed = 0;  ///< draws the chunk, the element and the bit
};

struct Params {
  int k = 8;                        ///< number of clusters, 1 <= k <= n
  int max_iter = 100;               ///< Lloyd iterations at most
  /// scikit-learn's meaning: stop once the sum of squared centroid shifts is <= tol times the mean
  /// per-feature variance of X. tol = 0 runs exactly max_iter iterations.
  double tol = 1e-4;
  /// How the initial centroids are chosen; automatic: k-means|| for many clusters, k-means++ for few.
  Init init = Init::automatic;
  std::uint64_t seed = 0;           ///< seeds k-means++, k-means|| and random initialisation
  /// k-means||: points sampled per round, in expectation, as a multiple of k (Bahmani et al.'s l = 2k,
  /// cuML's default). Finite and > 0.
  double init_oversampling = 2.0;
  /// k-means||: sampling rounds (Bahmani et al.'s experiments: 5 rounds with l = 2k seed about as well
  /// as k-means++). With the default l, at most about 10k candidates in expectation. >= 1.
  int init_rounds = 5;
  /// GEMM for the cross term X C^T: any registry algorithm that can do the shape, or automatic.
  gemm::Algo backend = gemm::Algo::automatic;
  /// exact: labels as an exact float argmin gives them. Where the distances are fused with the argmin:
  /// one product per term with a certificate per point (its best two distances farther apart than the
  /// products' error can move them), and the uncertified points re-run in float accuracy (3xTF32, or
  /// for 16-bit data three exact 16-bit products); with few clusters, only the second (gemm::ExactMethod).
  /// The per-iteration inertia then carries the one-product error; the result's is from direct
  /// differences either way. fast: one product there: for float data, half products on a half copy of
  /// X made once per fit where its largest |x| lies in [2^-8, 32768] and the copy fits in free memory
  /// (the 11 significant bits of TF32, rounded to nearest where TF32 truncates, in about two thirds of
  /// its time; not with protect), else TF32; the centroids rounded to X's type for 16-bit data (about
  /// 3x less tensor-core work than exact; a point whose two nearest centres are within ~1e-3 relative of
  /// each other (float, half) or ~1e-2 (bfloat16) can take the other one). Only the fused kernel (many
  /// clusters; any number for 16-bit data outside the few-clusters kernels) and the TF32 GEMM compute
  /// differently; elsewhere both are exact. Rows of up to 4 values with Algo::automatic take the FMA
  /// units: exact labels from sums of squared differences in exact mode and, in fast mode, for d <= 2;
  /// fast mode at d = 3, and at d = 4 with up to 1024 clusters, forms ||c||^2 - 2 x.c in float (float
  /// rounding of the squared norms, not half's); at d = 4 with more clusters the fused kernel's half
  /// products are faster.
  gemm::Math math = gemm::Math::exact;
  /// Keep a column-major copy of X (n x d more device memory, made once per fit) for the distance
  /// GEMM, which then reads X along points: the tall-skinny kernels stream that layout faster than
  /// rows (H100, float, 262144 x 4096, k = 16: TSM2 at 95 % of the read ceiling against 84 %). Made
  /// only for n >= 65536 (fewer points: rows are faster), when it fits in free device memory, and when
  /// the distances go through a GEMM (not gemm::nearest).
  bool column_copy = true;
  /// Stop when an iteration changes no label (scikit-learn's strict convergence), whatever tol. Off: run
  /// until tol or max_iter only (benchmarks timing a fixed number of iterations).
  bool stop_when_stable = true;
  /// Runs from different seeds (the first from `seed`); the one with the lowest inertia is returned.
  /// Init::given runs once whatever n_init says (scikit-learn does the same, with a warning).
  int n_init = 1;
  /// Called after each iteration when set (progress lines); costs nothing when empty.
  std::function<void(const IterationInfo&)> progress;
  /// Called during the initialisation when set: after each k-means|| round and every few hundred
  /// centres chosen (k-means++, the k-means|| reduction). Each call waits for the GPU work queued so
  /// far; costs nothing when empty.
  std::function<void(const InitProgress&)> init_progress;
  /// Algorithm-based fault tolerance (protect.cu): the distance GEMM carries a checksum centroid (the sum
  /// of the centroids), each point's cross terms are verified against it before the argmin uses them,
  /// within a rounding-level bound (few clusters: each block of 256 points' column sums against the
  /// block's point totals, fixed per fit, times the centroids), and a chunk that fails is recomputed; the centroid sums are verified
  /// exactly against the column totals of X (integer sums) and recomputed when they differ. Where the
  /// distances are fused with the argmin (gemm::nearest), the kernel returns each point's sum of terms and
  /// x.s comes from a pass over X. fit only (not fit_host, fit_distributed).
  bool protect = false;
  /// One fault to inject (needs protect, so that the fault is reported).
  FaultInjection inject;
};

/// What protection saw during a fit (Result::protection).
struct ProtectionReport {
  bool enabled = false;
  std::int64_t rows_verified = 0;     ///< point checks of the distances, over all assignments
  /// Of those, points whose one-product terms were re-checked at float accuracy (Math::exact through
  /// the fused kernel's fast_then_recheck), their exact terms checked on their own.
  std::int64_t rows_rechecked = 0;
  int distance_detections = 0;        ///< chunks whose check failed (each recomputed)
  int sum_detections = 0;             ///< updates whose sums failed their checksums (each recomputed)
  /// Largest |checksum difference| / bound over the rows that passed: how close clean rounding came to
  /// the bound (below 1).
  double max_clean_ratio = 0;
  /// The injected fault (Params::inject), when one was: where, the bit, the value before and after, and
  /// for distances the bound of its point's check (an error below it is rounding-sized and not detected).
  bool injected = false;
  FaultTarget target = FaultTarget::none;
  std::int64_t row = -1, col = -1;    ///< distances: the point and the column (k: the checksum); sums: word
  int bit = -1;
  double before = 0, after = 0, bound = 0;
  bool detected = false;              ///< the injected fault's check failed (and it was recomputed)
};

/// GPU time of each iteration and of each of its phases: distances (the GEMMs X C^T), argmin (nearest
/// centroid, inertia, counts), update (centroid sums and means, empty clusters, shift). fit() queues each
/// iteration's assignment while the host still checks the one before (unless Params::protect or the one
/// pass applies); such an iteration's time runs from the end of the one before to its own end, so it also
/// holds any time the GPU waited for the host.
struct PhaseTiming {
  double init_ms = 0;   ///< norms, variance, the column-major copy of X and the initial centroids
  /// One assignment before the first iteration: it plans the distance GEMM (TSM2 times its candidates
  /// on a shape's first call in a process) and loads the kernels, so that no iteration carries them.
  double setup_ms = 0;
  std::vector<double> iteration_ms, distances_iteration_ms, argmin_iteration_ms, update_iteration_ms;
};

/// The type of centroids, distances and inertia for data of type T: T itself for float and double,
/// float for the 16-bit __half and __nv_bfloat16.
template <class T>
struct Compute {
  using type = T;
};
template <>
struct Compute<__half> {
  using type = float;
};
template <>
struct Compute<__nv_bfloat16> {
  using type = float;
};
template <class T>
using compute_t = typename Compute<T>::type;

template <class T>
struct Result {
  std::int64_t k = 0, d = 0;
  std::vector<T> centroids;           ///< k x d row-major
  std::vector<std::int32_t> labels;   ///< n: index of the nearest centroid (ties: the lowest index)
  double inertia = 0;                 ///< of the returned centroids and labels, from direct differences
  int n_iter = 0;                     ///< iterations run
  bool converged = false;             ///< stopped by tol, or by an iteration that changed no label
  std::uint64_t seed = 0;             ///< the seed of the run returned (of n_init)
  bool column_copy = false;           ///< the distances read a column-major copy of X (Params::column_copy)
  /// X read once per iteration: the assignment also formed the update's sums (Hopper, automatic backend,
  /// no weights, no protect; 128 <= d (a multiple of 4); k <= 2, float with d <= 512, 16-bit exact also
  /// k <= 4 from d = 256, 16-bit fast below d = 1024: where it measured faster than two passes).
  /// Its time counts as distances; update is then the means.
  bool one_pass = false;
  PhaseTiming timing;
  ProtectionReport protection;        ///< Params::protect's checks (enabled false without it)
};

/// Clusters the n x d row-major matrix X on the device (leading dimension d). `initial_centroids`
/// (k x d row-major, host memory) is required when params.init == Init::given and ignored otherwise.
/// `sample_weight` (host memory): n finite weights > 0, or empty for 1 each; scikit-learn's semantics
/// (weighted means and inertia, and an integer weight w gives what w copies of the point give).
/// Throws std::invalid_argument naming the offending values (k < 1, k > n, n or d < 1, max_iter < 1,
/// tol < 0 or NaN, n_init < 1, init_oversampling not finite and > 0, init_rounds < 1, a backend that cannot
/// do the shape, missing or non-finite given centroids, weights of the wrong count or not finite and > 0).
///
/// X may be float, double, or 16-bit (__half, __nv_bfloat16): then the centroids, distances and
/// inertia are float (compute_t), the products accumulate in float, and the fused distance kernel
/// multiplies X in its own type (Params::math: exact products, or centroids rounded to X's type); X is
/// widened to float a chunk of rows at a time only where the kernel cannot read it.
template <class T>
Result<compute_t<T>> fit(Context& ctx, const T* x, std::int64_t n, std::int64_t d, const Params& params,
                         const std::vector<compute_t<T>>& initial_centroids = {},
                         const std::vector<double>& sample_weight = {});

/// How fit and predict compute the distances of this problem: "narrow rows" (Algo::automatic, d <= 4, any k;
/// in fast mode d <= 3, or k <= 1024; not with Params::protect: on the FMA units, squared differences summed,
/// or in fast mode from d = 3 ||c||^2 - 2 x.c),
/// "few-clusters" (Algo::automatic, on Hopper k <= 2 with d >= 128 for 16-bit data and 128 <= d <= 512 for
/// float, 16-bit exact also k <= 4 from d = 256; without wgmma k <= 8: dot products on the FMA units, X read
/// once; a fit without weights or protect then also forms the update's sums in that pass: Result::one_pass),
/// "nearest" (gemm::nearest: the cross term on the tensor cores fused with the argmin, which
/// Algo::automatic picks for many clusters; "nearest (fast)" in fast mode, "nearest (fast, half copy)"
/// where it reads a half copy of float X: Params::math; deciding that reads X once on the GPU) or the
/// registry name of the GEMM `backend` resolves to ("cublas
/// (tf32)" in fast mode, where cuBLAS may round float to TF32).
/// Validates like fit.
template <class T>
std::string distance_method(const Context& ctx, const T* x, std::int64_t n, std::int64_t d, std::int64_t k,
                            gemm::Algo backend, gemm::Math math = gemm::Math::exact);

/// Labels of the n x d points X (device) for the k x d centroids (host), through `backend`.
template <class T>
std::vector<std::int32_t> predict(Context& ctx, const T* x, std::int64_t n, std::int64_t d,
                                  const std::vector<compute_t<T>>& centroids, std::int64_t k,
                                  gemm::Algo backend = gemm::Algo::automatic, gemm::Math math = gemm::Math::exact);

/// Gaussian blobs generated on the GPU: point i belongs to blob i % k; centres uniform in
/// [-center_box, center_box]^d; each coordinate N(centre, stddev^2). A pure function of the seed.
template <class T>
struct Blobs {
  std::vector<T> centers;            ///< k x d
  std::vector<std::int32_t> labels;  ///< n
};
template <class T>
Blobs<T> make_blobs(Context& ctx, T* x, std::int64_t n, std::int64_t d, int k, std::uint64_t seed,
                    double stddev = 1.0, double center_box = 10.0);

/// Adjusted Rand index of two labelings of the same points (1: identical up to renaming).
double adjusted_rand_index(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b);

/// CPU reference Lloyd (double arithmetic) with the same rules as fit (weights, tol, strict
/// convergence): from the same initial centroids it gives the same labels. `x` is n x d row-major on
/// the host; `sample_weight` empty or n weights.
template <class T>
Result<T> reference_fit(const std::vector<T>& x, std::int64_t n, std::int64_t d, const Params& params,
                        const std::vector<T>& initial_centroids, const std::vector<double>& sample_weight = {});

}  // namespace skinny::kmeans
