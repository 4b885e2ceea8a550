// gemm-bench: every registered GEMM algorithm on square sizes, each checked against cuBLAS before it
// is timed; one table of GFLOP/s and % of cuBLAS, optionally JSON.
#include "common/app_main.hpp"
#include "common/device_data.hpp"
#include "common/json_writer.hpp"
#include "common/checked_run.hpp"
#include "common/timing.hpp"

#include <skinny/gemm/cuda_stream.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/gemm.hpp>
#include <skinny/gemm/reference.hpp>

#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace skinny::apps {
namespace {

using gemm::Algo;

struct GemmBenchOptions {
  std::vector<std::int64_t> sizes{1024, 2048, 4096, 8192};
  std::vector<std::string> algos;  ///< empty: every registered algorithm
  CommonOptions common;
};

struct Row {
  std::string algo;
  std::int64_t size = 0;
  CheckedRun run;
  double gflops = 0;
};

void setup_gemm_bench(CLI::App& app, GemmBenchOptions& o) {
  std::vector<std::string> names;
  for (const auto& info : gemm::algorithms()) names.emplace_back(info.name);
  app.add_option("--sizes", o.sizes, "Square sizes m = n = k (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 20))
      ->capture_default_str();
  app.add_option("--algo", o.algos, "Algorithms to run, comma-separated (default: all; cuBLAS always runs as the baseline)")
      ->delimiter(',')
      ->check(CLI::IsMember(names));
  add_common_options(app, o.common, {"float", "double", "half"});
}

template <class TIn, class TOut>
void check_memory(const std::vector<std::int64_t>& sizes) {
  std::int64_t largest = 0;
  for (auto s : sizes) largest = std::max(largest, s);
  const double need = double(largest) * double(largest) * (2.0 * sizeof(TIn) + 2.0 * sizeof(TOut));
  require_gpu_memory(need, "size " + std::to_string(largest), "; pass smaller --sizes");
}

template <class TIn, class TOut>
std::vector<Row> bench_precision(const GemmBenchOptions& o, double unit_roundoff) {
  check_memory<TIn, TOut>(o.sizes);
  std::vector<Algo> algos{Algo::cublas};
  for (const auto& info : gemm::algorithms()) {
    const bool wanted = o.algos.empty() || std::find(o.algos.begin(), o.algos.end(), info.name) != o.algos.end();
    if (wanted && info.algo != Algo::cublas) algos.push_back(info.algo);
  }
  const CudaStream stream;
  Context ctx(stream);
  apply_environment_tuning(ctx);
  std::vector<Row> rows;
  for (const std::int64_t s : o.sizes) {
    const std::size_t count = std::size_t(s) * std::size_t(s);
    DeviceBuffer<TIn> a(count), b(count);
    DeviceBuffer<TOut> c(count), c_ref(count);
    fill_uniform(a.data(), count, o.common.seed, -1.0, 1.0, stream);
    fill_uniform(b.data(), count, o.common.seed + 1, -1.0, 1.0, stream);
    auto args_for = [&](TOut* out) {
      return gemm::Arguments<TIn, TOut>{gemm::row_major<const TIn>(a.data(), s, s),
                                        gemm::row_major<const TIn>(b.data(), s, s), gemm::row_major(out, s, s)};
    };
    gemm::gemm(ctx, args_for(c_ref.data()), Algo::cublas);
    for (const Algo algo : algos) {
      Row row;
      row.algo = std::string(gemm::to_string(algo));
      row.size = s;
      row.run = checked_run(ctx, args_for(c.data()), algo, c_ref.data(), count, s, unit_roundoff);
      if (row.run.supported && row.run.check_passed)
        row.gflops = 2.0 * double(s) * double(s) * double(s) / (row.run.timing.median_ms * 1e6);
      rows.push_back(row);
    }
  }
  return rows;
}

void print_table(const GemmBenchOptions& o, const std::vector<Row>& rows, const std::string& math) {
  std::map<std::int64_t, double> cublas;
  std::vector<std::string> order;
  for (const auto& r : rows) {
    if (r.algo == "cublas") cublas[r.size] = r.gflops;
    if (std::find(order.begin(), order.end(), r.algo) == order.end()) order.push_back(r.algo);
  }
  std::printf("\ngemm-bench on %s, %s, C = A*B square row-major: GFLOP/s (%% of cuBLAS), median of runs\n",
              device_name().c_str(), math.c_str());
  std::printf("%-12s", "algorithm");
  for (auto s : o.sizes) std::printf(" %20lld", static_cast<long long>(s));
  std::printf("\n");
  for (const auto& name : order) {
    std::printf("%-12s", name.c_str());
    for (const auto& r : rows) {
      if (r.algo != name) continue;
      char cell[64];
      if (!r.run.supported)
        std::snprintf(cell, sizeof cell, "n/a");
      else if (!r.run.check_passed)
        std::snprintf(cell, sizeof cell, "WRONG");
      else
        std::snprintf(cell, sizeof cell, "%9.0f (%5.1f%%)", r.gflops, 100.0 * r.gflops / cublas[r.size]);
      std::printf(" %20s", cell);
    }
    std::printf("\n");
  }
  for (const auto& r : rows)
    if (!r.run.reason.empty() && r.size == o.sizes.front())
      std::printf("  %s: %s\n", r.algo.c_str(), r.run.reason.c_str());
}

std::string to_json(const GemmBenchOptions& o, const std::vector<Row>& rows, const std::string& math) {
  std::map<std::int64_t, double> cublas;
  for (const auto& r : rows)
    if (r.algo == "cublas") cublas[r.size] = r.gflops;
  JsonWriter json;
  json.begin_object().field("benchmark", "gemm-bench");
  write_environment(json);
  json.field("precision", o.common.precision).field("math", math).field("seed", o.common.seed);
  json.key("results").begin_array();
  for (const auto& r : rows) {
    json.begin_object()
        .field("algo", r.algo)
        .field("m", r.size)
        .field("n", r.size)
        .field("k", r.size)
        .field("supported", r.run.supported)
        .field("check_passed", r.run.check_passed)
        .field("relative_error_vs_cublas", r.run.relative_error)
        .field("reason", r.run.reason);
    if (r.run.supported && r.run.check_passed)
      json.field("median_ms", r.run.timing.median_ms)
          .field("min_ms", r.run.timing.min_ms)
          .field("max_ms", r.run.timing.max_ms)
          .field("repetitions", r.run.timing.repetitions)
          .field("gflops", r.gflops)
          .field("percent_of_cublas", 100.0 * r.gflops / cublas[r.size]);
    json.end_object();
  }
  json.end_array().end_object();
  return json.str();
}

int run_gemm_bench(const GemmBenchOptions& o) {
  std::vector<Row> rows;
  std::string math;
  if (o.common.precision == "double") {
    rows = bench_precision<double, double>(o, 0x1p-53);
    math = "double (fp64)";
  } else if (o.common.precision == "half") {
    rows = bench_precision<__half, float>(o, 0x1p-21);
    math = "half inputs, float accumulate and output";
  } else {
    rows = bench_precision<float, float>(o, 0x1p-24);
    math = "float (fp32 math, no TF32)";
  }
  print_table(o, rows, math);
  if (!o.common.json.empty()) write_file_atomically(o.common.json, to_json(o, rows, math));
  for (const auto& r : rows)
    if (!r.run.check_passed) {
      std::cerr << "gemm-bench: error: " << r.algo << " at size " << r.size << ": " << r.run.reason << "\n";
      return 1;
    }
  return 0;
}

}  // namespace
}  // namespace skinny::apps

int main(int argc, char** argv) {
  using namespace skinny::apps;
  CLI::App app{"Benchmark every registered GEMM algorithm against cuBLAS on square matrices", "gemm-bench"};
  GemmBenchOptions options;
  setup_gemm_bench(app, options);
  return run_app(app, argc, argv, options.common, [&] { return run_gemm_bench(options); });
}
