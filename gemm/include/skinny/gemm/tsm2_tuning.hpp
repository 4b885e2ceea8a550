// How TSM2 chooses its plan for a shape. Every default is what the library does on its own; the
// other values are for experiments, tests that must run one kernel, and runs that must round the same
// way in every process. Passed with the Context:
//
//   skinny::gemm::Tsm2Tuning t;  t.trial = false;      // the same plan in every process
//   ctx.set_tsm2_tuning(t);
//
// The programs and tests fill it from SKINNY_TSM2_* environment variables with
// tsm2_tuning_from(std::getenv); the library itself reads no environment.
#pragma once

#include <functional>
#include <string>

namespace skinny::gemm {

/// Row-major A: which kernel the planner may use (any: all that can run the shape, the trial decides).
enum class Tsm2RowMajorKernel { any, mma, ffma, stream };
/// Column-major A (16-byte path): which kernel the planner may use. tf32 is 3xTF32 for float and DMMA
/// for double.
enum class Tsm2ColMajorKernel { any, dmma, tf32, ffma };
/// Which splits of the inner dimension are candidates: all (the wave-filling one first, then lean
/// waves), or only the lean waves where they differ (so that tests without a trial run them).
enum class Tsm2SplitRule { all, lean };

struct Tsm2Tuning {
  /// Time the candidate plans on a shape's first call and keep the fastest (the paper's Alg. 5).
  /// False: always the first candidate, so every process rounds the same way, at some cost in speed.
  bool trial = true;
  int t1 = 0;               ///< threads per block, where a kernel's launch bound allows it (0: the planner's)
  int split = 0;            ///< splits of the inner dimension, rounded to whole B chunks (0: the planner's)
  int max_t2 = 0;           ///< at most this many columns per pass (0: the widest kernel that fits)
  double partial_cap = 0;   ///< cap on partial-sum bytes as a fraction of bytes(A) (0: the planner's 3 %)
  Tsm2RowMajorKernel row_major_kernel = Tsm2RowMajorKernel::any;
  Tsm2ColMajorKernel col_major_kernel = Tsm2ColMajorKernel::any;
  Tsm2SplitRule split_rule = Tsm2SplitRule::all;
  bool verbose = false;     ///< print each new plan and the trial's median per candidate to stderr

  /// A text that differs whenever two tunings may plan differently (plans are cached per tuning).
  std::string key() const;
};

/// Reads a tuning from named settings: `lookup(name)` returns the value or null, e.g. std::getenv.
///   SKINNY_TSM2_NO_TRIAL=1      trial = false          SKINNY_TSM2_RM_KERNEL=mma|ffma|stream
///   SKINNY_TSM2_T1=n            t1                     SKINNY_TSM2_CM_KERNEL=dmma|tf32|ffma
///   SKINNY_TSM2_SPLIT=n         split                  SKINNY_TSM2_SPLIT_RULE=all|lean
///   SKINNY_TSM2_MAX_T2=n        max_t2                 SKINNY_TSM2_VERBOSE=1
///   SKINNY_TSM2_PARTIAL_CAP=f   partial_cap
/// Unset or empty names keep the default. Throws std::invalid_argument naming the setting and its value
/// when a value is not one of those.
Tsm2Tuning tsm2_tuning_from(const std::function<const char*(const char*)>& lookup);

}  // namespace skinny::gemm
