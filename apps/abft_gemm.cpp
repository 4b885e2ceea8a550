// abft-gemm: a fault-injection campaign over protected GEMMs C = A B: each trial multiplies fresh random
// matrices carrying their checksums, flips bits of C, verifies, locates and corrects; clean trials count
// false alarms; the protection's cost is timed against the unprotected GEMM on the same backend.
//   abft-gemm --size 2048 --inject 1 --bits all --trials 1000 --seed 1
#include "common/app_main.hpp"
#include "common/device_data.hpp"
#include "common/timing.hpp"

#include <skinny/abft/abft.hpp>
#include <skinny/gemm/cuda_stream.hpp>
#include <skinny/gemm/device_buffer.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace skinny::apps {
namespace {

struct CampaignOptions {
  std::int64_t size = 2048;
  int inject = 1;
  std::string bits = "all";
  int trials = 1000;
  int clean_trials = -1;  ///< -1: as many as --trials
  std::string backend = "auto";
  double gamma = 16;
  double threshold = 0;
  CommonOptions common;
};

struct Tally {
  int injected = 0, above = 0, detected = 0, located = 0, corrected = 0, missed = 0;
  int below = 0, below_detected = 0, clean = 0, false_alarms = 0;
  double clean_max_ratio = 0;  ///< largest |difference| / threshold over the clean trials: the margin
  std::vector<std::string> missed_why;
};

void setup_abft_gemm(CLI::App& app, CampaignOptions& o) {
  app.add_option("--size", o.size, "n: A, B and C are n x n")->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 16))
      ->capture_default_str();
  app.add_option("--inject", o.inject, "Bit flips per trial (one: located and corrected; more: detected)")
      ->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--bits", o.bits, "Bits to flip: all, sign, exponent, high (mantissa), low (mantissa)")
      ->check(CLI::IsMember({"all", "sign", "exponent", "high", "low"}))->capture_default_str();
  app.add_option("--trials", o.trials, "Trials with injected faults")->check(CLI::Range(1, 10000000))->capture_default_str();
  app.add_option("--clean-trials", o.clean_trials, "Trials without faults (default: --trials)")->check(CLI::Range(0, 10000000));
  app.add_option("--backend", o.backend, "GEMM backend")->check(CLI::IsMember(gemm::algo_names()))->capture_default_str();
  app.add_option("--gamma", o.gamma, "Safety factor of the round-off threshold")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--threshold", o.threshold, "Absolute threshold instead of the round-off one")->check(CLI::NonNegativeNumber);
  add_common_options(app, o.common, {"float", "double"});
}

template <class T>
int run_typed(const CampaignOptions& o) {
  const std::int64_t n = o.size;
  require_gpu_memory(7.0 * double(n) * double(n) * sizeof(T), "a protected " + std::to_string(n) + "^2 GEMM",
                     memory_advice(o.common, "a smaller --size"));
  const CudaStream stream;
  Context ctx(stream);
  apply_environment_tuning(ctx);
  const std::size_t count = static_cast<std::size_t>(n * n);
  DeviceBuffer<T> a(count), b(count), c(count), clean(count);
  abft::ProtectedGemm<T> pg(ctx, n, n, n, gemm::algo_from_name(o.backend), abft::Threshold{o.gamma, o.threshold});
  const abft::BitRange range = abft::bit_range_from_name(o.bits);
  Tally tally;
  double min_tau = INFINITY;
  const auto fresh = [&](int trial) {  // new operands in [-1, 1) for every trial
    fill_uniform(a.data(), count, o.common.seed * 1000003 + 2 * trial, -1.0, 1.0, stream);
    fill_uniform(b.data(), count, o.common.seed * 1000003 + 2 * trial + 1, -1.0, 1.0, stream);
    pg.multiply(a.data(), b.data(), c.data());
    min_tau = std::min(min_tau, pg.min_threshold());
  };
  for (int t = 0; t < o.trials; ++t) {
    fresh(t);
    SKINNY_CUDA_TRY(cudaMemcpyAsync(clean.data(), c.data(), count * sizeof(T), cudaMemcpyDeviceToDevice, stream));
    std::vector<abft::Injection> injections;
    for (int f = 0; f < o.inject; ++f)
      injections.push_back(abft::inject_bit_flip<T>(ctx, c.data(), n, n, o.common.seed ^ (std::uint64_t(t) << 8 | f), range));
    const abft::Report report = pg.verify_and_correct(c.data());
    tally.injected += o.inject;
    const abft::Injection& inj = injections[0];
    const double effect = std::abs(inj.after - inj.before);
    const double tau = std::max(pg.threshold_row(inj.row), pg.threshold_col(inj.col));
    const bool above = !(effect <= tau);  // NaN and Inf effects are above any threshold
    const bool detected = report.finding != abft::Finding::clean;
    if (o.inject > 1) {  // several errors: detection is what ABFT promises
      ++tally.above;
      tally.detected += detected;
      if (!detected) tally.missed_why.push_back("trial " + std::to_string(t) + ": not detected");
      continue;
    }
    if (!above) {
      ++tally.below;
      tally.below_detected += detected;
      continue;
    }
    ++tally.above;
    tally.detected += detected;
    const bool located = report.finding == abft::Finding::corrected && report.row == inj.row && report.col == inj.col;
    tally.located += located;
    bool corrected = false;
    if (located) {
      T fixed{}, want{};
      SKINNY_CUDA_TRY(cudaMemcpy(&fixed, c.data() + inj.col * n + inj.row, sizeof(T), cudaMemcpyDeviceToHost));
      SKINNY_CUDA_TRY(cudaMemcpy(&want, clean.data() + inj.col * n + inj.row, sizeof(T), cudaMemcpyDeviceToHost));
      corrected = std::abs(double(fixed) - double(want)) <= tau;
    }
    tally.corrected += corrected;
    if (!corrected) {
      ++tally.missed;
      char why[256];
      std::snprintf(why, sizeof why, "trial %d: bit %d of C(%lld, %lld) %.6g -> %.6g, threshold %.3g: %s", t, inj.bit,
                    static_cast<long long>(inj.row), static_cast<long long>(inj.col), inj.before, inj.after, tau,
                    !detected ? "not detected" : !located ? "not located" : "corrected value off");
      tally.missed_why.push_back(why);
    }
  }
  const int clean_trials = o.clean_trials >= 0 ? o.clean_trials : o.trials;
  for (int t = 0; t < clean_trials; ++t) {
    fresh(o.trials + t);
    tally.clean++;
    const abft::Report report = pg.verify_and_correct(c.data());
    tally.false_alarms += report.finding != abft::Finding::clean;
    tally.clean_max_ratio = std::max(tally.clean_max_ratio, report.max_ratio);
  }
  // The cost of protection on this backend: carried checksums + verification against the product alone.
  const Timing plain = time_on_stream(stream, [&] { pg.multiply_unprotected(a.data(), b.data(), c.data()); });
  const Timing guarded = time_on_stream(stream, [&] {
    pg.multiply(a.data(), b.data(), c.data());
    pg.verify_and_correct(c.data());
  });
  std::printf("abft-gemm on %s: %s, n = %lld, backend %s, %d flip(s) per trial in bits '%s', seed %llu\n",
              device_name().c_str(), o.common.precision.c_str(), static_cast<long long>(n), o.backend.c_str(), o.inject,
              o.bits.c_str(), static_cast<unsigned long long>(o.common.seed));
  std::printf("threshold: %s (smallest over the run %.3g)\n",
              o.threshold > 0 ? "absolute, from --threshold" : "gamma u sqrt(k + h) |A||B|-checksum", min_tau);
  std::printf("%-34s %8d\n", "faults injected", tally.injected);
  std::printf("%-34s %8d\n", o.inject > 1 ? "trials (several faults each)" : "above the threshold", tally.above);
  std::printf("%-34s %8d\n", "  detected", tally.detected);
  if (o.inject == 1) {
    std::printf("%-34s %8d\n", "  located", tally.located);
    std::printf("%-34s %8d\n", "  corrected", tally.corrected);
    std::printf("%-34s %8d\n", "  missed", tally.missed);
    std::printf("%-34s %8d  (%d of them detected anyway)\n", "below the threshold: undetectable", tally.below,
                tally.below_detected);
  }
  std::printf("%-34s %8d of %d clean trials (largest rounding difference: %.3g of the threshold)\n", "false alarms",
              tally.false_alarms, tally.clean, tally.clean_max_ratio);
  std::printf("protection overhead: %.3f ms protected (multiply + verify) vs %.3f ms unprotected: %+.1f %%\n",
              guarded.median_ms, plain.median_ms, 100 * (guarded.median_ms / plain.median_ms - 1));
  for (const auto& why : tally.missed_why) std::printf("  missed: %s\n", why.c_str());
  if (!o.common.json.empty()) {
    JsonWriter json;
    json.begin_object().field("benchmark", "abft-gemm").field("precision", o.common.precision);
    write_environment(json);
    json.field("n", n).field("backend", o.backend).field("bits", o.bits).field("flips_per_trial", o.inject)
        .field("seed", o.common.seed).field("gamma", o.gamma).field("threshold_override", o.threshold)
        .field("smallest_threshold", min_tau).field("injected", tally.injected).field("above_threshold", tally.above)
        .field("detected", tally.detected).field("located", tally.located).field("corrected", tally.corrected)
        .field("missed", tally.missed).field("below_threshold", tally.below)
        .field("below_threshold_detected", tally.below_detected).field("clean_trials", tally.clean)
        .field("false_alarms", tally.false_alarms).field("clean_max_ratio_to_threshold", tally.clean_max_ratio).field("protected_ms", guarded.median_ms)
        .field("unprotected_ms", plain.median_ms).field("overhead_percent", 100 * (guarded.median_ms / plain.median_ms - 1));
    json.key("missed_details").begin_array();
    for (const auto& why : tally.missed_why) json.value(why);
    json.end_array().end_object();
    write_file_atomically(o.common.json, json.str());
  }
  return 0;
}

}  // namespace
}  // namespace skinny::apps

int main(int argc, char** argv) {
  using namespace skinny::apps;
  CLI::App app{"ABFT fault-injection campaign over protected GEMMs", "abft-gemm"};
  CampaignOptions options;
  setup_abft_gemm(app, options);
  return run_app(app, argc, argv, options.common, [&] {
    return options.common.precision == "double" ? run_typed<double>(options) : run_typed<float>(options);
  });
}
