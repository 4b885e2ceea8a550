// abft-gemm: a fault-injection campaign over protected GEMMs C = A B: each trial multiplies fresh random
// matrices carrying their checksums, flips bits of C, verifies, locates and corrects; clean trials count
// false alarms and measure how far the rounding stays below the threshold (and the threshold above the
// rounding); the protection's cost is timed against the unprotected GEMM on the same backend, for both
// ways of using it (multiply then verify_and_correct, and multiply_and_verify). With --fused the trials
// run multiply_and_verify, the flips striking C between the product and its one pass.
//   abft-gemm --size 2048 --inject 1 --bits all --trials 1000 --seed 1 --threshold-model rounding [--fused]
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
  int flips_per_product = 1;  ///< trials on each product (C restored between them): fewer GEMMs at large n
  std::string backend = "auto";
  std::string threshold_model = "rounding";
  double gamma = 0;  ///< 0: the model's calibrated default
  double threshold = 0;
  bool fused = false;
  CommonOptions common;
};

struct Tally {
  int injected = 0, above = 0, detected = 0, located = 0, corrected = 0;
  int missed = 0;       ///< above the threshold but not detected
  int not_corrected = 0;  ///< detected, but not located or not restored
  int below = 0, below_detected = 0, clean = 0, false_alarms = 0;
  double clean_max_ratio = 0;  ///< largest |difference| / threshold over the clean trials: the margin
  double clean_max_difference = 0;  ///< largest |carried - computed| plain checksum over the clean trials
  double detection_bound = 0;       ///< largest plain threshold of any trial: every larger error is seen
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
  CLI::Option* flips =
      app.add_option("--flips-per-product", o.flips_per_product,
                     "Faulty trials on each product, C restored between them (clean trials: one product each)")
          ->check(CLI::Range(1, 1000000))->capture_default_str();
  app.add_option("--backend", o.backend, "GEMM backend")->check(CLI::IsMember(gemm::algo_names()))->capture_default_str();
  app.add_option("--threshold-model", o.threshold_model,
                 "Round-off threshold: rounding (the spread of rounding, from the squares) or l1 (the |A||B| bound)")
      ->check(CLI::IsMember({"rounding", "l1"}))->capture_default_str();
  app.add_option("--gamma", o.gamma, "Safety factor of the round-off threshold (0: the model's calibrated one)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--threshold", o.threshold, "Absolute threshold instead of the round-off one")->check(CLI::NonNegativeNumber);
  app.add_flag("--fused", o.fused,
               "Trials through multiply_and_verify (one pass over C after the product; the flips strike between "
               "them) instead of multiply, then verify_and_correct; one product per trial")
      ->excludes(flips);
  add_common_options(app, o.common, {"float", "double"});
}

template <class T>
int run_typed(const CampaignOptions& o) {
  const std::int64_t n = o.size;
  require_gpu_memory(4.5 * double(n) * double(n) * sizeof(T), "a protected " + std::to_string(n) + "^2 GEMM",
                     memory_advice(o.common, "a smaller --size"));
  const CudaStream stream;
  Context ctx(stream);
  apply_environment_tuning(ctx);
  const std::size_t count = static_cast<std::size_t>(n * n);
  DeviceBuffer<T> a(count), b(count), c(count);
  DeviceBuffer<T> clean(o.fused ? 0 : count);  // the product restored between flips (one product a trial when fused)
  const abft::ThresholdModel model = abft::threshold_model_from_name(o.threshold_model);
  abft::ProtectedGemm<T> pg(ctx, n, n, n, gemm::algo_from_name(o.backend), abft::Threshold{o.gamma, o.threshold, model});
  const abft::BitRange range = abft::bit_range_from_name(o.bits);
  Tally tally;
  double min_tau = INFINITY;
  const auto fill_operands = [&](int trial) {  // new operands in [-1, 1) for every trial
    fill_uniform(a.data(), count, o.common.seed * 1000003 + 2 * trial, -1.0, 1.0, stream);
    fill_uniform(b.data(), count, o.common.seed * 1000003 + 2 * trial + 1, -1.0, 1.0, stream);
  };
  const auto note_thresholds = [&] {
    min_tau = std::min(min_tau, pg.min_threshold());
    tally.detection_bound = std::max(tally.detection_bound, pg.max_threshold());
  };
  const auto fresh = [&](int trial) {  // multiply on new operands
    fill_operands(trial);
    pg.multiply(a.data(), b.data(), c.data());
    note_thresholds();
  };
  // Clean trials first: they count false alarms and measure the rounding, which the faulty trials allow
  // for: a flip is "above the threshold" when it exceeds its row's and column's thresholds plus the
  // largest clean difference (a flip within the rounding of a threshold may or may not cross it).
  // multiply_and_verify's thresholds see the flips too (by ~2e-5 of the error; Inf or NaN for such a
  // value): the run's smallest and largest come from its clean trials.
  const int clean_trials = o.clean_trials >= 0 ? o.clean_trials : o.trials;
  for (int t = 0; t < clean_trials; ++t) {
    tally.clean++;
    abft::Report report;
    if (o.fused) {
      fill_operands(o.trials + t);
      report = pg.multiply_and_verify(a.data(), b.data(), c.data());
      note_thresholds();
    } else {
      fresh(o.trials + t);
      report = pg.verify_and_correct(c.data());
    }
    tally.false_alarms += report.finding != abft::Finding::clean;
    tally.clean_max_ratio = std::max(tally.clean_max_ratio, report.max_ratio);
    tally.clean_max_difference = std::max(tally.clean_max_difference, report.max_difference);
  }
  for (int t = 0; t < o.trials; ++t) {
    std::vector<abft::Injection> injections;
    const auto flip = [&](T* product) {
      for (int f = 0; f < o.inject; ++f)
        injections.push_back(
            abft::inject_bit_flip<T>(ctx, product, n, n, o.common.seed ^ (std::uint64_t(t) << 8 | f), range));
    };
    abft::Report report;
    if (o.fused) {  // the flips strike between the product and its pass: a fault of the product's computation
      fill_operands(t);
      pg.inject_into_next_product(flip);
      report = pg.multiply_and_verify(a.data(), b.data(), c.data());
    } else {
      if (t % o.flips_per_product == 0) {
        fresh(t / o.flips_per_product);
        SKINNY_CUDA_TRY(cudaMemcpyAsync(clean.data(), c.data(), count * sizeof(T), cudaMemcpyDeviceToDevice, stream));
      } else {  // the same product again, as it was before the last trial's flips and corrections
        SKINNY_CUDA_TRY(cudaMemcpyAsync(c.data(), clean.data(), count * sizeof(T), cudaMemcpyDeviceToDevice, stream));
      }
      flip(c.data());
      report = pg.verify_and_correct(c.data());
    }
    tally.injected += o.inject;
    const abft::Injection& inj = injections[0];
    const double effect = std::abs(inj.after - inj.before);
    const double tau = std::max(pg.threshold_row(inj.row), pg.threshold_col(inj.col));
    const bool above = !(effect <= tau + tally.clean_max_difference);  // NaN and Inf effects are above any
    const bool detected = report.finding != abft::Finding::clean;
    if (o.inject > 1) {  // several errors: detection is what ABFT promises
      ++tally.above;
      tally.detected += detected;
      tally.missed += !detected;
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
    tally.missed += !detected;
    const bool located = report.finding == abft::Finding::corrected && report.row == inj.row && report.col == inj.col;
    tally.located += located;
    bool corrected = false;
    if (located) {  // against the element before its flip
      T fixed{};
      SKINNY_CUDA_TRY(cudaMemcpy(&fixed, c.data() + inj.col * n + inj.row, sizeof(T), cudaMemcpyDeviceToHost));
      corrected = std::abs(double(fixed) - inj.before) <= (std::isfinite(tau) ? tau : tally.detection_bound);
    }
    tally.corrected += corrected;
    tally.not_corrected += detected && !corrected;
    if (!corrected) {
      char why[256];
      std::snprintf(why, sizeof why, "trial %d: bit %d of C(%lld, %lld) %.6g -> %.6g, threshold %.3g: %s", t, inj.bit,
                    static_cast<long long>(inj.row), static_cast<long long>(inj.col), inj.before, inj.after, tau,
                    !detected ? "not detected" : !located ? "not located" : "corrected value off");
      tally.missed_why.push_back(why);
    }
  }
  // How far above the rounding the detection bound sits (the smaller, the smaller the errors it sees).
  const double bound_over_clean = tally.clean_max_difference > 0 ? tally.detection_bound / tally.clean_max_difference : 0;
  const double gamma = pg.threshold().gamma;
  // The cost of protection on this backend: carried checksums + verification against the product alone.
  const Timing plain = time_on_stream(stream, [&] { pg.multiply_unprotected(a.data(), b.data(), c.data()); });
  const Timing guarded = time_on_stream(stream, [&] {
    pg.multiply(a.data(), b.data(), c.data());
    pg.verify_and_correct(c.data());
  });
  const Timing fused = time_on_stream(stream, [&] { pg.multiply_and_verify(a.data(), b.data(), c.data()); });
  const auto overhead = [&](const Timing& t) { return 100 * (t.median_ms / plain.median_ms - 1); };
  std::printf("abft-gemm on %s: %s, n = %lld, backend %s, %d flip(s) per trial in bits '%s', %s, seed %llu\n",
              device_name().c_str(), o.common.precision.c_str(), static_cast<long long>(n), o.backend.c_str(), o.inject,
              o.bits.c_str(),
              o.fused ? "multiply_and_verify (flips between the product and its pass)"
                      : (std::to_string(o.flips_per_product) + " trial(s) per product").c_str(),
              static_cast<unsigned long long>(o.common.seed));
  const std::string formula = model == abft::ThresholdModel::rounding
                                  ? "gamma u sqrt(k + h) sqrt(Q + Q_K + P + R^2)"
                                  : "gamma u sqrt(k + h) |A||B|-checksum";
  std::printf("threshold: %s (model %s, gamma %g; smallest over the run %.3g, largest plain %.3g)\n",
              o.threshold > 0 ? "absolute, from --threshold" : formula.c_str(), o.threshold_model.c_str(), gamma,
              min_tau, tally.detection_bound);
  std::printf("%-34s %8d\n", "faults injected", tally.injected);
  std::printf("%-34s %8d\n", o.inject > 1 ? "trials (several faults each)" : "above the threshold", tally.above);
  std::printf("%-34s %8d\n", "  detected", tally.detected);
  if (o.inject == 1) {
    std::printf("%-34s %8d\n", "  located", tally.located);
    std::printf("%-34s %8d\n", "  corrected", tally.corrected);
    std::printf("%-34s %8d\n", "  missed", tally.missed);
    std::printf("%-34s %8d\n", "  detected, not corrected", tally.not_corrected);
    std::printf("%-34s %8d  (%d of them detected anyway)\n", "below the threshold: not promised", tally.below,
                tally.below_detected);
  }
  std::printf("%-34s %8d of %d clean trials (largest rounding difference: %.3g of the threshold)\n", "false alarms",
              tally.false_alarms, tally.clean, tally.clean_max_ratio);
  std::printf("detection bound %.3g = %.3g x the largest clean difference %.3g\n", tally.detection_bound,
              bound_over_clean, tally.clean_max_difference);
  std::printf("protection overhead: %.3f ms multiply + verify_and_correct, %.3f ms multiply_and_verify, vs %.3f ms "
              "unprotected: %+.1f %% and %+.1f %%\n",
              guarded.median_ms, fused.median_ms, plain.median_ms, overhead(guarded), overhead(fused));
  for (const auto& why : tally.missed_why) std::printf("  not corrected: %s\n", why.c_str());
  if (!o.common.json.empty()) {
    JsonWriter json;
    json.begin_object().field("benchmark", "abft-gemm").field("precision", o.common.precision);
    write_environment(json);
    json.field("n", n).field("backend", o.backend).field("bits", o.bits).field("flips_per_trial", o.inject)
        .field("trials_per_product", o.flips_per_product)
        .field("seed", o.common.seed).field("threshold_model", o.threshold_model).field("gamma", gamma)
        .field("threshold_override", o.threshold)
        .field("smallest_threshold", min_tau).field("injected", tally.injected).field("above_threshold", tally.above)
        .field("detected", tally.detected).field("located", tally.located).field("corrected", tally.corrected)
        .field("missed", tally.missed).field("detected_not_corrected", tally.not_corrected)
        .field("below_threshold", tally.below)
        .field("below_threshold_detected", tally.below_detected).field("clean_trials", tally.clean)
        .field("false_alarms", tally.false_alarms).field("clean_max_ratio_to_threshold", tally.clean_max_ratio)
        .field("largest_clean_difference", tally.clean_max_difference).field("detection_bound", tally.detection_bound)
        .field("detection_bound_over_largest_clean_difference", bound_over_clean).field("fused_trials", o.fused)
        .field("unprotected_ms", plain.median_ms).field("protected_ms", guarded.median_ms)
        .field("overhead_percent", overhead(guarded)).field("fused_ms", fused.median_ms)
        .field("fused_overhead_percent", overhead(fused));
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
