// The TSM2 performance model (Chen et al., ICS'19, section 3.6), as host code.
//
// Inputs are a GPU's specification and constants measured on it; outputs are the resource use per
// thread, the maximum occupancy, Little's-law estimates of memory-bandwidth and compute utilisation,
// the t2 threshold between memory- and compute-bound, and the parameter choice of the paper's Alg. 5.
// Parameters (paper's names): t1 = threads per block = rows of a tile of B; t2 = columns of C a thread
// accumulates per pass (in registers); t3 = elements of A a thread prefetches.
#pragma once

#include <cstdint>
#include <string>

struct cudaDeviceProp;

namespace skinny::gemm::tsm2 {

enum class Precision { f32, f64 };
constexpr int bytes_of(Precision p) { return p == Precision::f64 ? 8 : 4; }

/// What the model needs to know about a GPU.
struct GpuSpec {
  std::string name;
  int multiprocessors = 0;
  int max_threads_per_sm = 0;       ///< HW_MAX
  int registers_per_sm = 0;         ///< R_SM (32-bit registers)
  int shared_bytes_per_sm = 0;      ///< S_SM
  int max_registers_per_thread = 255;
  double clock_ghz = 0;             ///< SM clock
  double bandwidth_gbs = 0;         ///< peak (or measured) DRAM bandwidth, GB/s
  double gflops_f32 = 0;            ///< peak FP32 (FMA counted as 2 flops), GFLOP/s
  double gflops_f64 = 0;            ///< peak FP64, GFLOP/s
};

/// Published specifications of the paper's GPUs and of the H100 SXM we measure on.
GpuSpec tesla_k40c();
GpuSpec tesla_m40();
GpuSpec tesla_p100();
GpuSpec h100_sxm();
/// The spec of a device from its properties; bandwidth and flops from the measured values given
/// (pass 0 to estimate them from the properties).
GpuSpec spec_from_device(const cudaDeviceProp& props, double measured_bandwidth_gbs = 0);

/// Constants the paper obtains by profiling once per GPU.
struct ModelConstants {
  int base_registers = 20;               ///< c: registers a TSM2 thread uses besides its t2/t3 arrays
  double memory_latency_cycles = 600;    ///< average global-load latency
  double compute_latency_cycles = 4;     ///< average latency of a dependent FMA
};

struct Params {
  int t1 = 128;
  int t2 = 16;
  int t3 = 4;
};

/// Everything the model derives for one parameter choice on one GPU.
struct Estimate {
  int registers_per_thread = 0;        ///< c + 3 t2 + 2 t3 (B next+current, C partials, A next+current)
  int shared_bytes_per_thread = 0;     ///< t2 * bytes (a t1 x t2 tile of B per block of t1 threads)
  int max_threads_per_sm = 0;          ///< MaxOccup_SM, a multiple of t1
  double concurrent_loads_per_sm = 0;  ///< max_threads_per_sm * t3 loads of A in flight
  double needed_loads_per_sm = 0;      ///< Little's law: bandwidth per SM * latency / bytes per load
  double memory_utilization = 0;       ///< min(1, concurrent / needed)
  double concurrent_flops_per_sm = 0;  ///< max_threads_per_sm * t2 independent FMAs in flight
  double needed_flops_per_sm = 0;      ///< Little's law: FMAs per cycle per SM * FMA latency
  double compute_utilization = 0;      ///< min(1, concurrent / needed)
  double ratio = 0;                    ///< r = compute time / memory time of the inner loop
  bool compute_bound = false;          ///< r > 1
  double memory_time_s = 0;            ///< time to read A (n x n, ceil(k/t2) passes) at the estimated utilisation
  double compute_time_s = 0;           ///< time for 2 n^2 k flops at the estimated utilisation
  double predicted_time_s = 0;         ///< max of the two
};

/// The model's estimate for A n x n times B n x k with these parameters.
Estimate estimate(const GpuSpec& gpu, const ModelConstants& constants, Precision precision, const Params& params,
                  std::int64_t n, std::int64_t k);

/// The t2 at which the inner loop turns from memory- to compute-bound (r = 1): bytes * peak / bandwidth.
/// This is the paper's convention (an FMA weighed as one operation against a peak that counts it as
/// two), kept so that its thresholds (~40 K40c, ~6 M40, ~50 P100, double) are reproduced.
double t2_threshold(const GpuSpec& gpu, Precision precision);

/// Whether the whole problem (t2 = k) is compute-bound on this GPU: k > t2_threshold.
bool is_compute_bound(const GpuSpec& gpu, Precision precision, std::int64_t k);

/// Alg. 5: t2 and t3 minimising the predicted time (memory-bound problems: the memory time with
/// t2 <= k; compute-bound ones: the better of the compute-optimised and memory-optimised choices),
/// searched over the integers t2 in [1, k] and t3 in [1, max_t3] under the register limit. t1 is kept
/// as given: the paper chooses it by a short trial on the device. Ties go to the shorter predicted
/// time, then the smaller t3, then the larger t2. Throws std::invalid_argument on n, k, t1 or max_t3
/// below 1, or when no choice fits the register limit with at least one resident block.
Params choose_t2_t3(const GpuSpec& gpu, const ModelConstants& constants, Precision precision, std::int64_t n,
                    std::int64_t k, int t1 = 128, int max_t3 = 16);

/// Bytes that must be in flight per SM to reach the GPU's bandwidth (Little's law), used to decide
/// how far the long dimension must be split when the rows alone cannot keep enough loads in flight.
double bytes_in_flight_needed_per_sm(const GpuSpec& gpu, const ModelConstants& constants);

}  // namespace skinny::gemm::tsm2
