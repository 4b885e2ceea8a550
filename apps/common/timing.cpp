#include "timing.hpp"

#include <skinny/gemm/errors.hpp>

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
  cudaEvent_t start, stop;
  SKINNY_CUDA_TRY(cudaEventCreate(&start));
  SKINNY_CUDA_TRY(cudaEventCreate(&stop));
  std::vector<double> times;
  try {
    for (int i = 0; i < warmup; ++i) run();
    double total = 0;
    while (int(times.size()) < max_reps && (int(times.size()) < min_reps || total < min_total_ms)) {
      SKINNY_CUDA_TRY(cudaEventRecord(start, stream));
      run();
      SKINNY_CUDA_TRY(cudaEventRecord(stop, stream));
      SKINNY_CUDA_TRY(cudaEventSynchronize(stop));
      float ms = 0;
      SKINNY_CUDA_TRY(cudaEventElapsedTime(&ms, start, stop));
      times.push_back(ms);
      total += ms;
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  Timing t;
  t.median_ms = median(times);
  t.min_ms = *std::min_element(times.begin(), times.end());
  t.max_ms = *std::max_element(times.begin(), times.end());
  t.repetitions = int(times.size());
  return t;
}

}  // namespace skinny::apps
