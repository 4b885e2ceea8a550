#include "timing.hpp"

#include <skinny/gemm/cuda_event.hpp>

#include <algorithm>

namespace skinny::apps {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

Timing time_on_stream(cudaStream_t stream, const std::function<void()>& run, int warmup, int min_reps,
                      double min_total_ms, int max_reps) {
  CudaEvent start, stop;
  std::vector<double> times;
  for (int i = 0; i < warmup; ++i) run();
  double total = 0;
  while (int(times.size()) < max_reps && (int(times.size()) < min_reps || total < min_total_ms)) {
    start.record(stream);
    run();
    stop.record(stream);
    times.push_back(stop.ms_since(start));
    total += times.back();
  }
  Timing t;
  t.median_ms = median(times);
  t.min_ms = *std::min_element(times.begin(), times.end());
  t.max_ms = *std::max_element(times.begin(), times.end());
  t.repetitions = int(times.size());
  return t;
}

}  // namespace skinny::apps
