// One benchmark measurement: ask the registry whether the algorithm can run the problem, run it once
// on a poisoned output and compare with a reference result, and only then time it.
#pragma once

#include "device_data.hpp"
#include "timing.hpp"

#include <skinny/gemm/gemm.hpp>
#include <skinny/gemm/reference.hpp>

#include <cmath>
#include <cstdio>
#include <string>

namespace skinny::apps {

struct CheckedRun {
  bool supported = true;
  bool check_passed = true;
  std::string reason;  ///< why unsupported, or why the check failed
  double relative_error = 0;
  Timing timing;
};

/// `args.c` must be a packed matrix of `count` elements; `reference` the same shape holding the
/// expected result (cuBLAS's). The bound is twice the norm-wise bound for inner dimension `k`, since
/// both results carry rounding error.
template <class TIn, class TOut>
CheckedRun checked_run(Context& ctx, const gemm::Arguments<TIn, TOut>& args, gemm::Algo algo, const TOut* reference,
                       std::size_t count, std::int64_t k, double unit_roundoff) {
  CheckedRun r;
  const gemm::Support support = gemm::can_implement(algo, args);
  if (!support) {
    r.supported = false;
    r.reason = support.reason;
    return r;
  }
  fill_value(args.c.data, count, std::nan(""), ctx.stream());
  gemm::gemm(ctx, args, algo);  // also the first warm-up
  r.relative_error = relative_error(args.c.data, reference, count, ctx.stream());
  const double bound = 2 * gemm::error_bound(k, unit_roundoff);
  if (!(r.relative_error <= bound)) {
    r.check_passed = false;
    char msg[160];
    std::snprintf(msg, sizeof msg, "relative error %.3g against cuBLAS exceeds %.3g", r.relative_error, bound);
    r.reason = msg;
    return r;
  }
  r.timing = time_on_stream(ctx.stream(), [&] { gemm::gemm(ctx, args, algo); }, /*warmup=*/1);
  return r;
}

}  // namespace skinny::apps
