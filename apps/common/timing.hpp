// Benchmark timing: CUDA events around each run, warm-up first, the median of the repetitions.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <vector>

namespace skinny::apps {

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  int repetitions = 0;
};

/// Times `run` (which queues work on `stream`) with CUDA events: `warmup` untimed runs, then at least
/// `min_reps` timed runs and more until about `min_total_ms` of GPU time is covered (at most `max_reps`).
Timing time_on_stream(cudaStream_t stream, const std::function<void()>& run, int warmup = 2, int min_reps = 5,
                      double min_total_ms = 300, int max_reps = 50);

double median(std::vector<double> values);

}  // namespace skinny::apps
