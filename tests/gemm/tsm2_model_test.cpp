// The TSM2 performance model (ICS'19, section 3.6) against hand-computed cases, the paper's reported
// thresholds and qualitative results, and brute-force searches written here.
#include <skinny/gemm/tsm2_model.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace skinny::gemm::tsm2 {
namespace {

constexpr std::int64_t kN = 20480;
const double kNN = double(kN) * double(kN);

std::vector<GpuSpec> all_gpus() { return {tesla_k40c(), tesla_m40(), tesla_p100(), h100_sxm()}; }

// ---------------------------------------------------------------------------------------------------
// Resources and occupancy

TEST(Tsm2Model, RegistersSharedMemoryAndOccupancyByHand) {
  const ModelConstants mc;  // c = 20
  ASSERT_EQ(mc.base_registers, 20);
  const GpuSpec k40 = tesla_k40c();

  // float, t1 = 128, t2 = 16, t3 = 4: 20 + 2*16 + 16 + 2*4 = 76 registers, 16 * 4 = 64 bytes of
  // shared memory. Registers allow 65536 / 76 = 862 threads, shared memory 49152 / 64 = 768, the
  // hardware 2048: 768 = 6 blocks of 128 (862 would round down to 768 as well).
  auto e = estimate(k40, mc, Precision::f32, {128, 16, 4}, kN, 16);
  EXPECT_EQ(e.registers_per_thread, 76);
  EXPECT_EQ(e.shared_bytes_per_thread, 64);
  EXPECT_EQ(e.max_threads_per_sm, 768);

  // The same in double: 128 bytes per thread, 49152 / 128 = 384 threads = 3 blocks.
  e = estimate(k40, mc, Precision::f64, {128, 16, 4}, kN, 16);
  EXPECT_EQ(e.registers_per_thread, 76);
  EXPECT_EQ(e.shared_bytes_per_thread, 128);
  EXPECT_EQ(e.max_threads_per_sm, 384);

  // Register-limited: float t2 = 8, t3 = 4: 20 + 24 + 8 = 52 registers -> 65536 / 52 = 1260 threads
  // (shared: 49152 / 32 = 1536), rounded down to 9 blocks of 128 = 1152; with blocks of 96, 13 x 96 = 1248.
  e = estimate(k40, mc, Precision::f32, {128, 8, 4}, kN, 16);
  EXPECT_EQ(e.registers_per_thread, 52);
  EXPECT_EQ(e.shared_bytes_per_thread, 32);
  EXPECT_EQ(e.max_threads_per_sm, 1152);
  EXPECT_EQ(estimate(k40, mc, Precision::f32, {96, 8, 4}, kN, 16).max_threads_per_sm, 1248);

  // Hardware-limited: float t2 = t3 = 1: 25 registers (2621 threads), 4 bytes (12288 threads) -> 2048.
  e = estimate(k40, mc, Precision::f32, {128, 1, 1}, kN, 16);
  EXPECT_EQ(e.registers_per_thread, 25);
  EXPECT_EQ(e.max_threads_per_sm, 2048);

  // A block bigger than what fits leaves no resident thread.
  EXPECT_EQ(estimate(k40, mc, Precision::f64, {512, 16, 4}, kN, 16).max_threads_per_sm, 0);
}

TEST(Tsm2Model, UtilisationsTimesAndRatioByHand) {
  const ModelConstants mc;  // latencies 600 (memory) and 4 (FMA) cycles
  const GpuSpec k40 = tesla_k40c();
  const auto e = estimate(k40, mc, Precision::f64, {128, 16, 4}, kN, 16);
  ASSERT_EQ(e.max_threads_per_sm, 384);

  // Little's law for memory: 288 GB/s over 15 SMs at 0.745 GHz = 25.77 bytes per SM-cycle; x 600
  // cycles / 8 bytes = 1932.9 loads must be in flight; 384 threads x 4 loads = 1536 are.
  const double bytes_per_cycle = 288.0 / (15 * 0.745);
  const double needed_loads = bytes_per_cycle * 600 / 8;
  EXPECT_NEAR(needed_loads, 1932.9, 0.1);
  EXPECT_DOUBLE_EQ(e.concurrent_loads_per_sm, 1536);
  EXPECT_NEAR(e.needed_loads_per_sm, needed_loads, 1e-9);
  EXPECT_NEAR(e.memory_utilization, 1536 / needed_loads, 1e-12);

  // Compute: 1430 / 2 GFMA/s over 15 SMs at 0.745 GHz = 63.98 FMA per SM-cycle, x 4 cycles = 255.9
  // FMAs in flight needed; 384 x 16 = 6144 available, so the utilisation saturates.
  EXPECT_NEAR(e.needed_flops_per_sm, 715.0 / (15 * 0.745) * 4, 1e-9);
  EXPECT_DOUBLE_EQ(e.concurrent_flops_per_sm, 6144);
  EXPECT_DOUBLE_EQ(e.compute_utilization, 1.0);

  // One pass over A (t2 = k = 16): n^2 x 8 bytes at 288 GB/s x utilisation; 2 n^2 k flops at 1430 GFLOP/s.
  const double mem = kNN * 8 / (1536 / needed_loads * 288e9);
  const double comp = 2 * kNN * 16 / 1430e9;
  EXPECT_NEAR(e.memory_time_s, mem, 1e-12 * mem);
  EXPECT_NEAR(e.compute_time_s, comp, 1e-12 * comp);
  EXPECT_DOUBLE_EQ(e.predicted_time_s, std::max(e.memory_time_s, e.compute_time_s));

  // r = t2 / threshold, threshold = 8 x 1430 / 288.
  EXPECT_NEAR(e.ratio, 16 / (8 * 1430.0 / 288), 1e-12);
  EXPECT_FALSE(e.compute_bound);
  EXPECT_TRUE(estimate(k40, mc, Precision::f64, {128, 40, 1}, kN, 64).compute_bound);  // 40 > 39.7
  EXPECT_FALSE(estimate(k40, mc, Precision::f64, {128, 39, 1}, kN, 64).compute_bound);

  EXPECT_NEAR(bytes_in_flight_needed_per_sm(k40, mc), bytes_per_cycle * 600, 1e-9);
}

// ---------------------------------------------------------------------------------------------------
// Thresholds and the paper's qualitative results

TEST(Tsm2Model, ThresholdsMatchThePaper) {
  // Paper: ~40 (K40c), ~6 (M40), ~50 (P100) in double.
  const double k40 = t2_threshold(tesla_k40c(), Precision::f64);
  const double m40 = t2_threshold(tesla_m40(), Precision::f64);
  const double p100 = t2_threshold(tesla_p100(), Precision::f64);
  EXPECT_GE(k40, 38);
  EXPECT_LE(k40, 42);
  EXPECT_GE(m40, 5);
  EXPECT_LE(m40, 7);
  EXPECT_GE(p100, 48);
  EXPECT_LE(p100, 53);
  // Definition: bytes x peak / bandwidth.
  EXPECT_NEAR(k40, 8 * 1430.0 / 288, 1e-12);
  EXPECT_NEAR(t2_threshold(tesla_k40c(), Precision::f32), 4 * 4290.0 / 288, 1e-12);
}

TEST(Tsm2Model, BoundednessMatchesThePaper) {
  for (const std::int64_t k : {2, 4, 8, 16}) {
    for (const Precision p : {Precision::f32, Precision::f64}) {
      EXPECT_FALSE(is_compute_bound(tesla_k40c(), p, k)) << "K40c k=" << k;
      EXPECT_FALSE(is_compute_bound(tesla_p100(), p, k)) << "P100 k=" << k;
    }
  }
  EXPECT_TRUE(is_compute_bound(tesla_m40(), Precision::f64, 16));
  EXPECT_FALSE(is_compute_bound(tesla_m40(), Precision::f64, 2));
  for (std::int64_t k = 1; k <= 64; ++k) {
    EXPECT_FALSE(is_compute_bound(h100_sxm(), Precision::f32, k)) << "H100 f32 k=" << k;
    EXPECT_FALSE(is_compute_bound(h100_sxm(), Precision::f64, k)) << "H100 f64 k=" << k;
  }
}

// ---------------------------------------------------------------------------------------------------
// Monotonicity

TEST(Tsm2Model, MemoryUtilisationGrowsWithT3AndSaturates) {
  // K40c double, t2 = 16: shared memory caps occupancy at 384 for every t3 <= 16 (registers
  // 68 + 2 t3 <= 100 allow >= 655). 384 t3 loads against 1932.9 needed: below 1 up to t3 = 5
  // (1920), saturated from t3 = 6 (2304).
  const GpuSpec k40 = tesla_k40c();
  const ModelConstants mc;
  double previous = 0;
  for (int t3 = 1; t3 <= 16; ++t3) {
    const auto e = estimate(k40, mc, Precision::f64, {128, 16, t3}, kN, 16);
    ASSERT_EQ(e.max_threads_per_sm, 384) << "t3=" << t3;
    if (t3 <= 5) {
      EXPECT_GT(e.memory_utilization, previous) << "t3=" << t3;
      EXPECT_LT(e.memory_utilization, 1.0) << "t3=" << t3;
    } else {
      EXPECT_DOUBLE_EQ(e.memory_utilization, 1.0) << "t3=" << t3;
    }
    EXPECT_LE(e.memory_utilization, 1.0);
    previous = e.memory_utilization;
  }
}

TEST(Tsm2Model, OccupancyFallsAsT2Grows) {
  const ModelConstants mc;
  for (const auto& gpu : all_gpus()) {
    for (const Precision p : {Precision::f32, Precision::f64}) {
      int previous = gpu.max_threads_per_sm;
      for (int t2 = 1; t2 <= 77; ++t2) {  // 20 + 3 x 77 + 2 x 2 = 255 registers
        const int occ = estimate(gpu, mc, p, {128, t2, 2}, kN, 64).max_threads_per_sm;
        EXPECT_LE(occ, previous) << gpu.name << " t2=" << t2;
        EXPECT_EQ(occ % 128, 0);
        previous = occ;
      }
      EXPECT_LT(previous, estimate(gpu, mc, p, {128, 1, 2}, kN, 64).max_threads_per_sm) << gpu.name;
    }
  }
}

TEST(Tsm2Model, MemoryTimeGrowsWithThePasses) {
  // K40c float, k = 16, t3 = 8: every t2 below saturates the memory utilisation (e.g. t2 = 16:
  // 768 x 8 = 6144 loads in flight against 25.77 x 600 / 4 = 3866 needed), so the memory time is
  // proportional to the passes over A, ceil(16 / t2).
  const GpuSpec k40 = tesla_k40c();
  const ModelConstants mc;
  const double one_pass = kNN * 4 / 288e9;
  double previous = 0;
  for (const int t2 : {16, 8, 6, 4, 3, 2, 1}) {  // 1, 2, 3, 4, 6, 8, 16 passes
    const auto e = estimate(k40, mc, Precision::f32, {128, t2, 8}, kN, 16);
    ASSERT_DOUBLE_EQ(e.memory_utilization, 1.0) << "t2=" << t2;
    const double passes = std::ceil(16.0 / t2);
    EXPECT_NEAR(e.memory_time_s, passes * one_pass, 1e-12 * passes * one_pass) << "t2=" << t2;
    EXPECT_GT(e.memory_time_s, previous);
    previous = e.memory_time_s;
  }
  // t2 = 9..15 all take two passes: the same memory time as t2 = 8; t2 = 5 takes four, as t2 = 4.
  EXPECT_DOUBLE_EQ(estimate(k40, mc, Precision::f32, {128, 9, 8}, kN, 16).memory_time_s,
                   estimate(k40, mc, Precision::f32, {128, 8, 8}, kN, 16).memory_time_s);
  EXPECT_DOUBLE_EQ(estimate(k40, mc, Precision::f32, {128, 5, 8}, kN, 16).memory_time_s,
                   estimate(k40, mc, Precision::f32, {128, 4, 8}, kN, 16).memory_time_s);
}

// ---------------------------------------------------------------------------------------------------
// Alg. 5

bool fits(const GpuSpec& gpu, const Estimate& e, int t1) {
  return e.registers_per_thread <= gpu.max_registers_per_thread && e.max_threads_per_sm >= t1;
}

TEST(Tsm2Model, ChoiceForMemoryBoundProblemsIsTheBestOfABruteForceSearch) {
  const ModelConstants mc;
  for (const auto& gpu : {tesla_k40c(), tesla_p100(), h100_sxm()}) {
    for (const Precision p : {Precision::f32, Precision::f64}) {
      for (const std::int64_t k : {2, 4, 8, 16}) {
        ASSERT_FALSE(is_compute_bound(gpu, p, k));
        const Params chosen = choose_t2_t3(gpu, mc, p, kN, k);
        const auto ce = estimate(gpu, mc, p, chosen, kN, k);
        const std::string what = gpu.name + (p == Precision::f64 ? " f64" : " f32") + " k=" + std::to_string(k);
        EXPECT_EQ(chosen.t1, 128) << what;
        EXPECT_GE(chosen.t2, 1) << what;
        EXPECT_LE(chosen.t2, k) << what;
        EXPECT_GE(chosen.t3, 1) << what;
        EXPECT_LE(chosen.t3, 16) << what;
        EXPECT_TRUE(fits(gpu, ce, 128)) << what;
        // k <= 16 fits in registers with A prefetched deep enough to saturate the bandwidth, so the
        // best is one pass over A at full utilisation.
        EXPECT_EQ(chosen.t2, k) << what;
        EXPECT_DOUBLE_EQ(ce.memory_utilization, 1.0) << what;
        for (int t2 = 1; t2 <= k; ++t2) {
          for (int t3 = 1; t3 <= 16; ++t3) {
            const auto e = estimate(gpu, mc, p, {128, t2, t3}, kN, k);
            if (!fits(gpu, e, 128)) continue;
            EXPECT_LE(ce.memory_time_s, e.memory_time_s * (1 + 1e-9)) << what << " vs " << t2 << "," << t3;
            EXPECT_LE(ce.predicted_time_s, e.predicted_time_s * (1 + 1e-9)) << what << " vs " << t2 << "," << t3;
            // Ties go to the smaller t3.
            if (std::fabs(e.memory_time_s - ce.memory_time_s) <= 1e-9 * ce.memory_time_s) {
              EXPECT_LE(chosen.t3, t3) << what << " vs " << t2 << "," << t3;
            }
          }
        }
      }
    }
  }
}

TEST(Tsm2Model, ChoiceForK40cDoubleK16ByHand) {
  // t2 = 16 (one pass); shared memory allows 384 threads; 384 t3 >= 1932.9 first at t3 = 6.
  EXPECT_EQ(choose_t2_t3(tesla_k40c(), ModelConstants{}, Precision::f64, kN, 16).t2, 16);
  EXPECT_EQ(choose_t2_t3(tesla_k40c(), ModelConstants{}, Precision::f64, kN, 16).t3, 6);
}

TEST(Tsm2Model, RegistersLimitThePassesByHand) {
  // K40c double, k = 16, c = 200: one pass (t2 = 16) leaves 255 - 248 = 7 registers, t3 <= 3, and
  // 256 threads (65536 / 254 = 258) x 3 loads = 768 < 1932.9: utilisation 0.40, 2.5 pass-times.
  // Two passes (t2 in 8..15) reach full utilisation with 256 threads x 8 loads = 2048 when
  // 200 + 3 t2 + 16 <= 255, i.e. t2 <= 13: 2 pass-times. Ties go to the larger t2: (13, 8).
  ModelConstants mc;
  mc.base_registers = 200;
  const GpuSpec k40 = tesla_k40c();
  const Params chosen = choose_t2_t3(k40, mc, Precision::f64, kN, 16);
  EXPECT_EQ(chosen.t2, 13);
  EXPECT_EQ(chosen.t3, 8);
  const auto e = estimate(k40, mc, Precision::f64, chosen, kN, 16);
  EXPECT_EQ(e.registers_per_thread, 255);
  EXPECT_EQ(e.max_threads_per_sm, 256);
  EXPECT_NEAR(e.memory_time_s, 2 * kNN * 8 / 288e9, 1e-12);
}

TEST(Tsm2Model, ChoiceForComputeBoundM40Double) {
  const ModelConstants mc;
  const GpuSpec m40 = tesla_m40();
  ASSERT_TRUE(is_compute_bound(m40, Precision::f64, 16));
  const Params chosen = choose_t2_t3(m40, mc, Precision::f64, kN, 16);
  const auto ce = estimate(m40, mc, Precision::f64, chosen, kN, 16);
  EXPECT_TRUE(fits(m40, ce, 128));
  EXPECT_GE(chosen.t2, 1);
  EXPECT_LE(chosen.t2, 16);
  const auto naive = estimate(m40, mc, Precision::f64, {128, 16, 1}, kN, 16);
  EXPECT_LE(ce.predicted_time_s, naive.predicted_time_s * (1 + 1e-9));
  // No choice can beat 2 n^2 k flops at the peak, 213 GFLOP/s; the chosen one reaches it.
  const double bound = 2 * kNN * 16 / 213e9;
  EXPECT_NEAR(ce.predicted_time_s, bound, 1e-9 * bound);
}

TEST(Tsm2Model, ChoiceForComputeBoundIsNeverWorseThanEitherSide) {
  // Compute-bound problems (M40 double k = 8 and 32, K40c double k = 48). Alg. 5 optimises the compute
  // time for t2 >= threshold and the memory time for t2 < threshold, and keeps the side whose optimum
  // predicts the shorter time: the choice must be no slower than either side's optimum, found here by
  // brute force (ties of an objective broken by the predicted time).
  const ModelConstants mc;
  struct Case { GpuSpec gpu; std::int64_t k; };
  for (const auto& c : {Case{tesla_m40(), 8}, Case{tesla_m40(), 32}, Case{tesla_k40c(), 48}}) {
    const double thr = t2_threshold(c.gpu, Precision::f64);
    ASSERT_GT(double(c.k), thr);
    const Params chosen = choose_t2_t3(c.gpu, mc, Precision::f64, kN, c.k);
    const auto ce = estimate(c.gpu, mc, Precision::f64, chosen, kN, c.k);
    EXPECT_TRUE(fits(c.gpu, ce, 128)) << c.gpu.name;
    EXPECT_LE(chosen.t2, c.k);
    // The best compute time with t2 >= threshold and the best memory time with t2 < threshold,
    // each taken with the predicted time of the choice achieving it.
    double best_comp = INFINITY, best_comp_pred = INFINITY, best_mem = INFINITY, best_mem_pred = INFINITY;
    for (int t2 = 1; t2 <= c.k; ++t2) {
      for (int t3 = 1; t3 <= 16; ++t3) {
        const auto e = estimate(c.gpu, mc, Precision::f64, {128, t2, t3}, kN, c.k);
        if (!fits(c.gpu, e, 128)) continue;
        if (t2 >= thr) {
          if (e.compute_time_s < best_comp * (1 - 1e-9) ||
              (e.compute_time_s <= best_comp * (1 + 1e-9) && e.predicted_time_s < best_comp_pred)) {
            best_comp = std::min(best_comp, e.compute_time_s);
            best_comp_pred = e.predicted_time_s;
          }
        } else if (e.memory_time_s < best_mem * (1 - 1e-9) ||
                   (e.memory_time_s <= best_mem * (1 + 1e-9) && e.predicted_time_s < best_mem_pred)) {
          best_mem = std::min(best_mem, e.memory_time_s);
          best_mem_pred = e.predicted_time_s;
        }
      }
    }
    EXPECT_LE(ce.predicted_time_s, std::min(best_comp_pred, best_mem_pred) * (1 + 1e-9)) << c.gpu.name;
  }
}

// ---------------------------------------------------------------------------------------------------
// Edge cases

TEST(Tsm2Model, KEqualsOne) {
  const ModelConstants mc;
  for (const auto& gpu : all_gpus()) {
    for (const Precision p : {Precision::f32, Precision::f64}) {
      const Params chosen = choose_t2_t3(gpu, mc, p, kN, 1);
      EXPECT_EQ(chosen.t2, 1) << gpu.name;
      EXPECT_GE(chosen.t3, 1) << gpu.name;
      const auto e = estimate(gpu, mc, p, chosen, kN, 1);
      // One pass over A: n^2 elements at the bandwidth, at best.
      EXPECT_GE(e.memory_time_s, kNN * bytes_of(p) / (gpu.bandwidth_gbs * 1e9) * (1 - 1e-12)) << gpu.name;
      EXPECT_TRUE(std::isfinite(e.predicted_time_s));
    }
  }
}

TEST(Tsm2Model, RegistersOverTheLimitGiveNoOccupancyAndAreNeverChosen) {
  const ModelConstants mc;
  const GpuSpec h100 = h100_sxm();
  // 20 + 3 x 78 + 2 x 1 = 256 > 255.
  const auto e = estimate(h100, mc, Precision::f32, {128, 78, 1}, kN, 78);
  EXPECT_EQ(e.registers_per_thread, 256);
  EXPECT_EQ(e.max_threads_per_sm, 0);
  EXPECT_EQ(e.memory_utilization, 0);
  EXPECT_EQ(e.compute_utilization, 0);
  EXPECT_FALSE(std::isfinite(e.predicted_time_s));
  // 20 + 3 x 77 + 2 x 2 = 255 still fits.
  EXPECT_GT(estimate(h100, mc, Precision::f32, {128, 77, 2}, kN, 77).max_threads_per_sm, 0);

  // k = 200 on H100 (compute-bound: threshold ~80) and k = 64 with c = 240 (t2 <= (255-240-2)/3 = 4).
  for (const std::int64_t k : {64, 200}) {
    for (const int c : {20, 240}) {
      ModelConstants m;
      m.base_registers = c;
      const Params chosen = choose_t2_t3(h100, m, Precision::f32, kN, k);
      const auto ce = estimate(h100, m, Precision::f32, chosen, kN, k);
      EXPECT_LE(ce.registers_per_thread, 255) << "k=" << k << " c=" << c;
      EXPECT_GE(ce.max_threads_per_sm, 128) << "k=" << k << " c=" << c;
      if (c == 240) {
        EXPECT_LE(chosen.t2, 4);
      }
    }
  }
  // Nothing fits at all: c = 252 leaves no room for t2 = t3 = 1 (252 + 3 + 2 = 257).
  ModelConstants full;
  full.base_registers = 252;
  EXPECT_THROW(choose_t2_t3(h100, full, Precision::f32, kN, 4), std::invalid_argument);
}

std::string invalid_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no std::invalid_argument>";
}

TEST(Tsm2Model, InvalidInputsThrowWithTheValues) {
  const ModelConstants mc;
  const GpuSpec k40 = tesla_k40c();
  const auto has = [](const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; };
  EXPECT_TRUE(has(invalid_message([&] { estimate(k40, mc, Precision::f64, {128, 16, 4}, 0, 16); }), "n=0"));
  EXPECT_TRUE(has(invalid_message([&] { estimate(k40, mc, Precision::f64, {128, 16, 4}, kN, -3); }), "k=-3"));
  EXPECT_TRUE(has(invalid_message([&] { estimate(k40, mc, Precision::f64, {0, 16, 4}, kN, 16); }), "t1=0"));
  EXPECT_TRUE(has(invalid_message([&] { estimate(k40, mc, Precision::f64, {128, 0, 4}, kN, 16); }), "t2=0"));
  EXPECT_TRUE(has(invalid_message([&] { estimate(k40, mc, Precision::f64, {128, 16, -1}, kN, 16); }), "t3=-1"));
  EXPECT_TRUE(has(invalid_message([&] { choose_t2_t3(k40, mc, Precision::f64, -7, 16); }), "n=-7"));
  EXPECT_TRUE(has(invalid_message([&] { choose_t2_t3(k40, mc, Precision::f64, kN, 0); }), "k=0"));
  EXPECT_TRUE(has(invalid_message([&] { choose_t2_t3(k40, mc, Precision::f64, kN, 16, 0); }), "t1=0"));
  EXPECT_TRUE(has(invalid_message([&] { choose_t2_t3(k40, mc, Precision::f64, kN, 16, 128, 0); }), "max_t3=0"));
  // An empty spec is refused rather than dividing by zero.
  EXPECT_THROW(t2_threshold(GpuSpec{}, Precision::f32), std::invalid_argument);
  EXPECT_THROW(estimate(GpuSpec{}, mc, Precision::f32, {}, kN, 16), std::invalid_argument);
}

}  // namespace
}  // namespace skinny::gemm::tsm2
