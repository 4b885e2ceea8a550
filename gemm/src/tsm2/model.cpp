// The TSM2 performance model (Chen et al., "TSM2: Optimizing Tall-and-Skinny Matrix-Matrix
// Multiplication on GPUs", ICS'19, section 3.6), as host code. See tsm2_model.hpp for the API.
//
// The paper's formulas are reconstructed from its prose:
//   registers per thread   R_thread = c + 2 t2 (B current + next) + t2 (C partials) + 2 t3 (A current + next)
//   shared bytes / thread  S_thread = t2 * bytes          (a t1 x t2 tile of B per block of t1 threads)
//   MaxOccup_SM            = min(HW_MAX, R_SM / R_thread, S_SM / S_thread), rounded down to a multiple of t1
//   memory utilisation     = min(1, MaxOccup_SM * t3 / (BW_SM_per_cycle * latency_mem / bytes))
//   compute utilisation    = min(1, MaxOccup_SM * t2 / (FMA_SM_per_cycle * latency_comp))
//   t2_threshold           = bytes * peak_flops / bandwidth,  r = t2 / t2_threshold
//   memory time            = n^2 * ceil(k / t2) * bytes / (Util_mem * bandwidth)
//   compute time           = 2 n^2 k / (Util_comp * peak_flops)
#include <skinny/gemm/tsm2_model.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

namespace skinny::gemm::tsm2 {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double peak_gflops(const GpuSpec& gpu, Precision precision) {
  return precision == Precision::f64 ? gpu.gflops_f64 : gpu.gflops_f32;
}

void check_spec(const GpuSpec& gpu, Precision precision) {
  if (gpu.multiprocessors < 1 || gpu.max_threads_per_sm < 1 || gpu.registers_per_sm < 1 ||
      gpu.shared_bytes_per_sm < 1 || gpu.max_registers_per_thread < 1 || !(gpu.clock_ghz > 0) ||
      !(gpu.bandwidth_gbs > 0) || !(peak_gflops(gpu, precision) > 0))
    throw std::invalid_argument(
        "tsm2 model: incomplete GPU spec '" + gpu.name + "' (multiprocessors=" + std::to_string(gpu.multiprocessors) +
        ", max_threads_per_sm=" + std::to_string(gpu.max_threads_per_sm) +
        ", registers_per_sm=" + std::to_string(gpu.registers_per_sm) +
        ", shared_bytes_per_sm=" + std::to_string(gpu.shared_bytes_per_sm) +
        ", max_registers_per_thread=" + std::to_string(gpu.max_registers_per_thread) +
        ", clock_ghz=" + std::to_string(gpu.clock_ghz) + ", bandwidth_gbs=" + std::to_string(gpu.bandwidth_gbs) +
        ", peak_gflops=" + std::to_string(peak_gflops(gpu, precision)) + ")");
}

void check_problem(std::int64_t n, std::int64_t k, int t1) {
  if (n < 1 || k < 1 || t1 < 1)
    throw std::invalid_argument("tsm2 model: need n >= 1, k >= 1 and t1 >= 1 (got n=" + std::to_string(n) +
                                ", k=" + std::to_string(k) + ", t1=" + std::to_string(t1) + ")");
}

/// DRAM bytes per SM per SM-clock cycle at the spec's bandwidth.
double bandwidth_bytes_per_sm_cycle(const GpuSpec& gpu) {
  return gpu.bandwidth_gbs * 1e9 / (gpu.multiprocessors * gpu.clock_ghz * 1e9);
}

/// FMAs per SM per cycle at the spec's peak (the peak counts an FMA as 2 flops).
double fma_per_sm_cycle(const GpuSpec& gpu, Precision precision) {
  return peak_gflops(gpu, precision) / 2 * 1e9 / (gpu.multiprocessors * gpu.clock_ghz * 1e9);
}

/// Relative tolerance under which two predicted times count as equal (ties are then broken by the
/// parameters, not by rounding noise).
constexpr double kTieTolerance = 1e-9;
bool less_than(double a, double b) { return a < b && !(std::fabs(a - b) <= kTieTolerance * std::fabs(b)); }

struct Candidate {
  Params params;
  Estimate estimate;
  bool valid = false;
};

/// Exhaustive search over t2 in [t2_lo, t2_hi] and t3 in [1, max_t3] minimising `objective`, then the
/// predicted time, then preferring a smaller t3, then a larger t2 (the iteration order: t3 ascending,
/// t2 descending, replacing only on a strict improvement). Choices over the register limit or with an
/// occupancy below one block are skipped.
template <class Objective>
Candidate search(const GpuSpec& gpu, const ModelConstants& constants, Precision precision, std::int64_t n,
                 std::int64_t k, int t1, std::int64_t t2_lo, std::int64_t t2_hi, int max_t3, Objective objective) {
  Candidate best;
  double best_objective = kInf;
  // No t2 above this fits in the register limit even with t3 = 1: stop the loop there, so a large k
  // does not make the search long.
  const std::int64_t t2_reg_cap = (static_cast<std::int64_t>(gpu.max_registers_per_thread) -
                                   constants.base_registers - 2) / 3;
  t2_hi = std::min(t2_hi, t2_reg_cap);
  for (int t3 = 1; t3 <= max_t3; ++t3) {
    for (std::int64_t t2 = t2_hi; t2 >= t2_lo; --t2) {
      const Params p{t1, static_cast<int>(t2), t3};
      const Estimate e = estimate(gpu, constants, precision, p, n, k);
      if (e.registers_per_thread > gpu.max_registers_per_thread || e.max_threads_per_sm < t1) continue;
      const double obj = objective(e);
      if (!std::isfinite(obj)) continue;
      const bool better =
          !best.valid || less_than(obj, best_objective) ||
          (!less_than(best_objective, obj) && less_than(e.predicted_time_s, best.estimate.predicted_time_s));
      if (better) {
        best = {p, e, true};
        best_objective = obj;
      }
    }
  }
  return best;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Published specifications. Clocks are the boost clocks the peak figures are computed with.

GpuSpec tesla_k40c() {
  // NVIDIA Tesla K40 board specification (BD-06949) and GK110B whitepaper: 15 SMX, 2048 threads and
  // 64K 32-bit registers per SM, 48 KB shared memory per block (the most a block can use of the
  // 64 KB L1/shared array), 745 MHz base clock, 288 GB/s GDDR5, 4.29 TFLOP/s FP32 and 1.43 TFLOP/s
  // FP64 (15 SMs x 192 / 64 lanes x 2 x 0.745 GHz). The paper quotes the same 1430 GFLOP/s and 288 GB/s.
  GpuSpec g;
  g.name = "Tesla K40c";
  g.multiprocessors = 15;
  g.max_threads_per_sm = 2048;
  g.registers_per_sm = 65536;
  g.shared_bytes_per_sm = 49152;
  g.max_registers_per_thread = 255;
  g.clock_ghz = 0.745;
  g.bandwidth_gbs = 288;
  g.gflops_f32 = 4290;
  g.gflops_f64 = 1430;
  return g;
}

GpuSpec tesla_m40() {
  // NVIDIA Tesla M40 datasheet and GM200 (Maxwell) tuning guide: 24 SMM, 2048 threads and 64K
  // registers per SM, 96 KB shared memory per SM, 1114 MHz boost, 288 GB/s GDDR5, 6.84 TFLOP/s FP32
  // (24 x 128 lanes x 2 x 1.114 GHz) and FP64 at 1/32 of that, 213 GFLOP/s (the paper's figure).
  GpuSpec g;
  g.name = "Tesla M40";
  g.multiprocessors = 24;
  g.max_threads_per_sm = 2048;
  g.registers_per_sm = 65536;
  g.shared_bytes_per_sm = 98304;
  g.max_registers_per_thread = 255;
  g.clock_ghz = 1.114;
  g.bandwidth_gbs = 288;
  g.gflops_f32 = 6840;
  g.gflops_f64 = 213;
  return g;
}

GpuSpec tesla_p100() {
  // The paper's figures, 4600 GFLOP/s FP64 and 720 GB/s (the GP100 whitepaper's bandwidth; NVIDIA's
  // P100 PCIe datasheet gives 4.7 TFLOP/s FP64 and 9.3 TFLOP/s FP32), with the GP100 whitepaper's SM
  // resources: 56 SMs, 2048 threads, 64K registers and 64 KB shared memory per SM; 1328 MHz (the
  // SXM2 board's base clock).
  GpuSpec g;
  g.name = "Tesla P100";
  g.multiprocessors = 56;
  g.max_threads_per_sm = 2048;
  g.registers_per_sm = 65536;
  g.shared_bytes_per_sm = 65536;
  g.max_registers_per_thread = 255;
  g.clock_ghz = 1.328;
  g.bandwidth_gbs = 720;
  g.gflops_f32 = 9300;
  g.gflops_f64 = 4600;
  return g;
}

GpuSpec h100_sxm() {
  // NVIDIA H100 datasheet and Hopper whitepaper, SXM5 80 GB: 132 SMs, 2048 threads and 64K registers
  // per SM, 228 KB shared memory per SM, 1.98 GHz boost, 3.35 TB/s HBM3, 66.9 TFLOP/s FP32
  // (132 x 128 lanes x 2 x 1.98 GHz) and 33.5 TFLOP/s FP64 without tensor cores.
  GpuSpec g;
  g.name = "H100 SXM";
  g.multiprocessors = 132;
  g.max_threads_per_sm = 2048;
  g.registers_per_sm = 65536;
  g.shared_bytes_per_sm = 233472;
  g.max_registers_per_thread = 255;
  g.clock_ghz = 1.98;
  g.bandwidth_gbs = 3350;
  g.gflops_f32 = 66900;
  g.gflops_f64 = 33500;
  return g;
}

namespace {

/// FP32 FMA lanes per SM by compute capability (CUDA C Programming Guide, "Arithmetic Instructions"
/// throughput table, and the architecture whitepapers).
int fp32_lanes_per_sm(int major, int minor) {
  switch (major) {
    case 3: return 192;                      // Kepler
    case 5: return 128;                      // Maxwell
    case 6: return minor == 0 ? 64 : 128;    // GP100 : GP10x
    case 7: return 64;                       // Volta, Turing
    case 8: return minor == 0 ? 64 : 128;    // GA100 : GA10x, AD10x
    default: return 128;                     // Hopper, Blackwell and later
  }
}

/// FP64 lanes per SM: the "full FP64" data-centre parts run FP64 at half the FP32 rate (GK110/GK210
/// at a third), the rest at 1/32 (Maxwell, GP10x, Turing, Xavier) or 1/64 (GA10x, AD10x, consumer
/// Blackwell).
int fp64_lanes_per_sm(int major, int minor) {
  const int fp32 = fp32_lanes_per_sm(major, minor);
  if (major == 3) return (minor == 5 || minor == 7) ? 64 : 8;
  if ((major == 6 && minor == 0) || (major == 7 && minor == 0) || (major == 8 && minor == 0) ||
      (major == 9 && minor == 0) || (major == 10 && minor == 0))
    return fp32 / 2;
  if (major == 8 || major >= 11) return std::max(1, fp32 / 64);
  return std::max(1, fp32 / 32);
}

void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("tsm2 model: ") + what + " failed: " + cudaGetErrorString(err));
}

}  // namespace

GpuSpec spec_from_device(const cudaDeviceProp& props, double measured_bandwidth_gbs) {
  GpuSpec g;
  g.name = props.name;
  g.multiprocessors = props.multiProcessorCount;
  g.max_threads_per_sm = props.maxThreadsPerMultiProcessor;
  g.registers_per_sm = props.regsPerMultiprocessor;
  g.shared_bytes_per_sm = static_cast<int>(props.sharedMemPerMultiprocessor);
  g.max_registers_per_thread = 255;  // every architecture since Kepler GK110

  // CUDA 13 removed clockRate and memoryClockRate from cudaDeviceProp; the attributes remain. They
  // need the device's ordinal, which the properties identify by PCI location.
  int clock_khz = 0, mem_clock_khz = 0, bus_width_bits = props.memoryBusWidth;
#if CUDART_VERSION >= 13000
  int device = 0;
  char bus_id[32];
  std::snprintf(bus_id, sizeof bus_id, "%04x:%02x:%02x.0", props.pciDomainID, props.pciBusID, props.pciDeviceID);
  if (cudaDeviceGetByPCIBusId(&device, bus_id) != cudaSuccess) {
    (void)cudaGetLastError();
    cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  }
  cuda_check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device), "cudaDevAttrClockRate");
  cuda_check(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, device),
             "cudaDevAttrMemoryClockRate");
  if (bus_width_bits <= 0)
    cuda_check(cudaDeviceGetAttribute(&bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, device),
               "cudaDevAttrGlobalMemoryBusWidth");
#else
  clock_khz = props.clockRate;
  mem_clock_khz = props.memoryClockRate;
#endif
  g.clock_ghz = clock_khz * 1e3 / 1e9;

  const double clock_hz = clock_khz * 1e3;
  g.gflops_f32 = g.multiprocessors * double(fp32_lanes_per_sm(props.major, props.minor)) * 2 * clock_hz / 1e9;
  g.gflops_f64 = g.multiprocessors * double(fp64_lanes_per_sm(props.major, props.minor)) * 2 * clock_hz / 1e9;
  // Double data rate: two transfers per memory clock over the whole bus. Exact for HBM (H100 SXM:
  // 2 x 2.619 GHz x 5120 / 8 = 3352 GB/s); an estimate for GDDR parts, so pass a measured value.
  g.bandwidth_gbs = measured_bandwidth_gbs > 0
                        ? measured_bandwidth_gbs
                        : 2.0 * mem_clock_khz * 1e3 * (bus_width_bits / 8.0) / 1e9;
  return g;
}

// ---------------------------------------------------------------------------------------------------

double t2_threshold(const GpuSpec& gpu, Precision precision) {
  check_spec(gpu, precision);
  // Setting r = 1 in the inner loop: a thread loads one element of A (`bytes` bytes) and issues t2
  // FMAs with it. The paper equates t2 operations at the peak flop rate with `bytes` at the peak
  // bandwidth, t2 / peak_flops = bytes / bandwidth, i.e. it weighs an FMA as one operation against a
  // peak that counts an FMA as two flops. The "consistent" threshold would be half of this. We keep
  // the paper's convention so that its reported thresholds are reproduced: K40c double
  // 8 x 1430 / 288 = 39.7 (paper: ~40), M40 double 8 x 213 / 288 = 5.9 (~6), P100 double
  // 8 x 4600 / 720 = 51.1 (~50).
  return bytes_of(precision) * peak_gflops(gpu, precision) / gpu.bandwidth_gbs;
}

bool is_compute_bound(const GpuSpec& gpu, Precision precision, std::int64_t k) {
  return static_cast<double>(k) > t2_threshold(gpu, precision);
}

double bytes_in_flight_needed_per_sm(const GpuSpec& gpu, const ModelConstants& constants) {
  if (gpu.multiprocessors < 1 || !(gpu.clock_ghz > 0) || !(gpu.bandwidth_gbs > 0))
    throw std::invalid_argument("tsm2 model: GPU spec '" + gpu.name + "' lacks multiprocessors (" +
                                std::to_string(gpu.multiprocessors) + "), clock (" + std::to_string(gpu.clock_ghz) +
                                ") or bandwidth (" + std::to_string(gpu.bandwidth_gbs) + ")");
  return bandwidth_bytes_per_sm_cycle(gpu) * constants.memory_latency_cycles;
}

Estimate estimate(const GpuSpec& gpu, const ModelConstants& constants, Precision precision, const Params& params,
                  std::int64_t n, std::int64_t k) {
  check_problem(n, k, params.t1);
  if (params.t2 < 1 || params.t3 < 1)
    throw std::invalid_argument("tsm2 model: need t2 >= 1 and t3 >= 1 (got t2=" + std::to_string(params.t2) +
                                ", t3=" + std::to_string(params.t3) + ")");
  check_spec(gpu, precision);
  const int bytes = bytes_of(precision);
  const int t1 = params.t1, t2 = params.t2, t3 = params.t3;

  Estimate e;
  // Registers counted per element, as the paper does (a double held in two 32-bit registers is not
  // distinguished).
  e.registers_per_thread = constants.base_registers + 2 * t2 + t2 + 2 * t3;
  e.shared_bytes_per_thread = t2 * bytes;

  // MaxOccup_SM: the tightest of the hardware thread limit, registers and shared memory, rounded down
  // to whole blocks (the paper divides by the block size so that the threads counted are resident).
  if (e.registers_per_thread <= gpu.max_registers_per_thread) {
    const std::int64_t by_regs = gpu.registers_per_sm / e.registers_per_thread;
    const std::int64_t by_smem = gpu.shared_bytes_per_sm / e.shared_bytes_per_thread;
    const std::int64_t threads = std::min<std::int64_t>({gpu.max_threads_per_sm, by_regs, by_smem});
    e.max_threads_per_sm = static_cast<int>(threads / t1 * t1);
  }

  // Memory: t3 independent loads of A in flight per thread against the loads Little's law needs to
  // cover the latency at the SM's share of the bandwidth.
  e.concurrent_loads_per_sm = static_cast<double>(e.max_threads_per_sm) * t3;
  e.needed_loads_per_sm = bandwidth_bytes_per_sm_cycle(gpu) * constants.memory_latency_cycles / bytes;
  e.memory_utilization =
      e.needed_loads_per_sm > 0 ? std::min(1.0, e.concurrent_loads_per_sm / e.needed_loads_per_sm) : 1.0;

  // Compute: t2 independent FMAs (one per column of C) per thread against FMA rate x latency.
  e.concurrent_flops_per_sm = static_cast<double>(e.max_threads_per_sm) * t2;
  e.needed_flops_per_sm = fma_per_sm_cycle(gpu, precision) * constants.compute_latency_cycles;
  e.compute_utilization =
      e.needed_flops_per_sm > 0 ? std::min(1.0, e.concurrent_flops_per_sm / e.needed_flops_per_sm) : 1.0;

  // Inner-loop balance, with the paper's convention (see t2_threshold).
  e.ratio = t2 / t2_threshold(gpu, precision);
  e.compute_bound = e.ratio > 1;

  const double nn = static_cast<double>(n) * static_cast<double>(n);
  const double passes = static_cast<double>((k + t2 - 1) / t2);
  const double bandwidth = gpu.bandwidth_gbs * 1e9, flops = peak_gflops(gpu, precision) * 1e9;
  e.memory_time_s = e.memory_utilization > 0 ? nn * passes * bytes / (e.memory_utilization * bandwidth) : kInf;
  e.compute_time_s = e.compute_utilization > 0 ? 2 * nn * static_cast<double>(k) / (e.compute_utilization * flops)
                                               : kInf;
  e.predicted_time_s = std::max(e.memory_time_s, e.compute_time_s);
  return e;
}

// Alg. 5. The paper relaxes t2 and t3 to reals, runs gradient descent from (1, 1) with step 0.1 and
// rounds the result. The objective is piecewise (ceil, min, integer division), so gradient descent
// can stop at a kink; an exhaustive search over the integers (at most k x max_t3 estimates, k capped
// by the register limit) finds the same optimum or a better one, and is cheap on the host.
Params choose_t2_t3(const GpuSpec& gpu, const ModelConstants& constants, Precision precision, std::int64_t n,
                    std::int64_t k, int t1, int max_t3) {
  check_problem(n, k, t1);
  if (max_t3 < 1) throw std::invalid_argument("tsm2 model: need max_t3 >= 1 (got max_t3=" + std::to_string(max_t3) + ")");
  const double threshold = t2_threshold(gpu, precision);
  const auto memory_time = [](const Estimate& e) { return e.memory_time_s; };
  const auto compute_time = [](const Estimate& e) { return e.compute_time_s; };

  Candidate chosen;
  if (static_cast<double>(k) <= threshold) {
    // Memory-bound problem: keep it memory-bound (t2 <= k) and minimise the time to stream A.
    chosen = search(gpu, constants, precision, n, k, t1, 1, k, max_t3, memory_time);
  } else {
    // Compute-bound problem: the compute-optimised choice keeps the inner loop compute-bound
    // (threshold <= t2 <= k); the memory-optimised one makes it memory-bound (t2 < threshold). The
    // better predicted time wins.
    const auto lowest_compute_t2 = static_cast<std::int64_t>(std::ceil(threshold));
    const Candidate comp = search(gpu, constants, precision, n, k, t1, std::max<std::int64_t>(1, lowest_compute_t2),
                                  k, max_t3, compute_time);
    const std::int64_t highest_memory_t2 = std::min<std::int64_t>(k, std::max<std::int64_t>(0, lowest_compute_t2 - 1));
    const Candidate mem = search(gpu, constants, precision, n, k, t1, 1, highest_memory_t2, max_t3, memory_time);
    if (!comp.valid) {
      chosen = mem;
    } else if (!mem.valid) {
      chosen = comp;
    } else {
      const double tc = comp.estimate.predicted_time_s, tm = mem.estimate.predicted_time_s;
      if (less_than(tm, tc))
        chosen = mem;
      else if (less_than(tc, tm))
        chosen = comp;
      else  // tie: smaller t3, then larger t2
        chosen = (mem.params.t3 < comp.params.t3 ||
                  (mem.params.t3 == comp.params.t3 && mem.params.t2 > comp.params.t2))
                     ? mem
                     : comp;
    }
  }
  if (!chosen.valid)
    throw std::invalid_argument("tsm2 model: no (t2, t3) fits " + gpu.name + " with t1=" + std::to_string(t1) +
                                ", base_registers=" + std::to_string(constants.base_registers) +
                                " and max_registers_per_thread=" + std::to_string(gpu.max_registers_per_thread));
  return chosen.params;
}

}  // namespace skinny::gemm::tsm2
