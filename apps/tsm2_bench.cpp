// tsm2-bench: tall-and-skinny GEMM at the memory-bandwidth limit. In ONE run: the streaming-read
// ceiling, cuBLAS and TSM2 on the paper's grid (A n x n, B n x k) and on the K-means shape, each result
// checked against cuBLAS before it is timed, and the paper's V0-V3 ablation (its Fig. 4).
#include "common/app_main.hpp"
#include "common/checked_run.hpp"
#include "common/device_data.hpp"
#include "common/json_writer.hpp"
#include "common/read_ceiling.hpp"

#include <skinny/gemm/cuda_stream.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/gemm.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace skinny::apps {
namespace {

using gemm::Algo;

struct Tsm2BenchOptions {
  std::vector<std::int64_t> sizes{10240, 20480, 30720};
  std::vector<std::int64_t> ks{2, 4, 8, 16};
  std::vector<std::string> grid_layouts{"col"};
  bool grid = true;          ///< the paper's grid (sizes x ks)
  bool kmeans_shape = true;  ///< A = 262144 x 4096 (points x dimensions), k = 16, both layouts
  bool ablation = true;      ///< V0-V3 on the grid
  CommonOptions common;
};

struct Shape {
  std::string precision, layout;
  std::int64_t rows, inner, cols;
};

struct Row {
  Shape shape;
  std::string algo;
  CheckedRun run;
  double gbs = 0;            ///< bytes of A / median time
  double same_size_gbs = 0;  ///< the read kernel on a buffer of bytes(A): what a perfect kernel reaches at this size
};

void setup_tsm2_bench(CLI::App& app, Tsm2BenchOptions& o) {
  app.add_option("--sizes", o.sizes, "n of the grid: A is n x n (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 20))
      ->capture_default_str();
  app.add_option("--ks", o.ks, "k of the grid: B is n x k (comma-separated, 1..64)")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t(1), std::int64_t(64)))
      ->capture_default_str();
  app.add_option("--grid-layouts", o.grid_layouts, "Layouts of A on the grid: col (the paper's), row")
      ->delimiter(',')
      ->check(CLI::IsMember({"col", "row"}))
      ->capture_default_str();
  app.add_flag("!--no-grid", o.grid, "Skip the paper's grid (sizes x ks)");
  app.add_flag("!--no-kmeans-shape", o.kmeans_shape, "Skip the K-means shape (262144 x 4096, k = 16)");
  app.add_flag("!--no-ablation", o.ablation, "Skip the V0-V3 ablation");
  o.common.precision = "both";
  add_common_options(app, o.common, {"both", "float", "double"});
}

std::vector<Shape> shapes(const Tsm2BenchOptions& o) {
  std::vector<Shape> list;
  std::vector<std::string> precisions;
  if (o.common.precision != "double") precisions.push_back("float");
  if (o.common.precision != "float") precisions.push_back("double");
  for (const auto& precision : precisions) {
    for (const auto& layout : o.grid ? o.grid_layouts : std::vector<std::string>{})
      for (auto n : o.sizes)
        for (auto k : o.ks) list.push_back({precision, layout, n, n, k});
    if (o.kmeans_shape)
      for (const char* layout : {"row", "col"}) list.push_back({precision, layout, 262144, 4096, 16});
  }
  return list;
}

template <class T>
void bench_shape(Context& ctx, const Tsm2BenchOptions& o, const Shape& s, bool grid, std::vector<Row>& rows,
                 std::map<std::size_t, double>& same_size_reads) {
  const auto a_count = std::size_t(s.rows) * std::size_t(s.inner);
  const double need = double(a_count + std::size_t(s.inner) * s.cols + 2 * std::size_t(s.rows) * s.cols) * sizeof(T);
  require_gpu_memory(need, std::to_string(s.rows) + " x " + std::to_string(s.inner) + " " + s.precision);
  DeviceBuffer<T> a(a_count), b(std::size_t(s.inner) * s.cols), c(std::size_t(s.rows) * s.cols),
      c_ref(std::size_t(s.rows) * s.cols);
  fill_uniform(a.data(), a_count, o.common.seed, 0.0, 1.0, ctx.stream());  // the paper's inputs: [0, 1)
  fill_uniform(b.data(), b.size(), o.common.seed + 1, 0.0, 1.0, ctx.stream());
  // Column-major everything is the paper's setting; row-major A with B^T stored k x inner row-major
  // (a column-major inner x k view) and row-major C is K-means' (points x dimensions) * centroids^T.
  const bool col = s.layout == "col";
  auto args_for = [&](T* out) {
    return gemm::Arguments<T>{
        col ? gemm::col_major<const T>(a.data(), s.rows, s.inner) : gemm::row_major<const T>(a.data(), s.rows, s.inner),
        gemm::col_major<const T>(b.data(), s.inner, s.cols),
        col ? gemm::col_major(out, s.rows, s.cols) : gemm::row_major(out, s.rows, s.cols)};
  };
  gemm::gemm(ctx, args_for(c_ref.data()), Algo::cublas);
  std::vector<Algo> algos{Algo::cublas, Algo::tsm2};
  if (grid && o.ablation) algos.insert(algos.end(), {Algo::tsm2_v0, Algo::tsm2_v1, Algo::tsm2_v2, Algo::tsm2_v3});
  const double u = sizeof(T) == 8 ? 0x1p-53 : 0x1p-24;
  // Small problems pay a ramp-up and a tail that a 4 GiB read hides: measure the read at this size too.
  const std::size_t a_bytes = a_count * sizeof(T);
  if (!same_size_reads.count(a_bytes)) same_size_reads[a_bytes] = measure_read_ceiling(ctx.stream(), a_bytes).gbs;
  for (const Algo algo : algos) {
    Row row{s, std::string(gemm::to_string(algo)), {}, 0, same_size_reads[a_bytes]};
    row.run = checked_run(ctx, args_for(c.data()), algo, c_ref.data(), c.size(), s.inner, u);
    if (row.run.supported && row.run.check_passed)
      row.gbs = double(a_count * sizeof(T)) / (row.run.timing.median_ms * 1e6);
    rows.push_back(row);
  }
}

const Row* find(const std::vector<Row>& rows, const Shape& s, const char* algo) {
  for (const auto& r : rows)
    if (r.algo == algo && r.shape.precision == s.precision && r.shape.layout == s.layout && r.shape.rows == s.rows &&
        r.shape.inner == s.inner && r.shape.cols == s.cols && r.run.supported && r.run.check_passed)
      return &r;
  return nullptr;
}

void print_table(const std::vector<Shape>& list, const std::vector<Row>& rows, const ReadCeiling& ceiling) {
  std::printf("\ntsm2-bench on %s: streaming-read ceiling %.0f GB/s (float4 read of %.1f GiB, %d blocks)\n",
              device_name().c_str(), ceiling.gbs, double(ceiling.bytes) / (1 << 30), ceiling.best_blocks);
  std::printf("GB/s = bytes of A / median time; %% = of the read ceiling; %%size = of a read of bytes(A) alone; "
              "speedup = cuBLAS time / TSM2 time; V1-V3 as speedup over V0\n");
  std::printf("%-6s %-3s %6s %5s %3s | %8s %6s %5s | %8s %6s %5s %5s | %7s | %5s %5s %5s\n", "prec", "A", "rows",
              "inner", "k", "cuBLASms", "GB/s", "%", "tsm2 ms", "GB/s", "%", "%size", "speedup", "V1", "V2", "V3");
  double log_sum = 0;
  int float_shapes = 0;
  for (const auto& s : list) {
    const Row* cu = find(rows, s, "cublas");
    const Row* ts = find(rows, s, "tsm2");
    const Row* v0 = find(rows, s, "tsm2_v0");
    auto ratio = [&](const char* name) {
      const Row* v = find(rows, s, name);
      return v && v0 ? v0->run.timing.median_ms / v->run.timing.median_ms : NAN;
    };
    const double speedup = cu && ts ? cu->run.timing.median_ms / ts->run.timing.median_ms : NAN;
    if (s.precision == "float" && s.rows == s.inner && std::isfinite(speedup)) {
      log_sum += std::log(speedup);
      ++float_shapes;
    }
    std::printf("%-6s %-3s %6lld %5lld %3lld | %8.3f %6.0f %5.1f | %8.3f %6.0f %5.1f %5.1f | %7.2f | %5.2f %5.2f %5.2f\n",
                s.precision.c_str(), s.layout.c_str(), static_cast<long long>(s.rows),
                static_cast<long long>(s.inner), static_cast<long long>(s.cols), cu ? cu->run.timing.median_ms : NAN,
                cu ? cu->gbs : NAN, cu ? 100 * cu->gbs / ceiling.gbs : NAN, ts ? ts->run.timing.median_ms : NAN,
                ts ? ts->gbs : NAN, ts ? 100 * ts->gbs / ceiling.gbs : NAN,
                ts ? 100 * ts->gbs / ts->same_size_gbs : NAN, speedup, ratio("tsm2_v1"),
                ratio("tsm2_v2"), ratio("tsm2_v3"));
  }
  if (float_shapes > 0)
    std::printf("geometric-mean speedup of tsm2 over cuBLAS on the %d float grid shapes: %.3fx\n", float_shapes,
                std::exp(log_sum / float_shapes));
  for (const auto& r : rows)
    if (!r.run.supported || !r.run.check_passed)
      std::printf("  %s %s %lldx%lld k=%lld %s: %s\n", r.shape.precision.c_str(), r.shape.layout.c_str(),
                  static_cast<long long>(r.shape.rows), static_cast<long long>(r.shape.inner),
                  static_cast<long long>(r.shape.cols), r.algo.c_str(), r.run.reason.c_str());
}

std::string to_json(const Tsm2BenchOptions& o, const std::vector<Row>& rows, const ReadCeiling& ceiling) {
  JsonWriter json;
  json.begin_object().field("benchmark", "tsm2-bench");
  write_environment(json);
  json.field("seed", o.common.seed);
  json.key("read_ceiling")
      .begin_object()
      .field("gbs", ceiling.gbs)
      .field("bytes", std::uint64_t(ceiling.bytes))
      .field("blocks", ceiling.best_blocks)
      .field("threads_per_block", ceiling.threads_per_block)
      .end_object();
  json.key("results").begin_array();
  for (const auto& r : rows) {
    const Row* cu = find(rows, r.shape, "cublas");
    const Row* v0 = find(rows, r.shape, "tsm2_v0");
    json.begin_object()
        .field("precision", r.shape.precision)
        .field("a_layout", r.shape.layout == "col" ? "col_major" : "row_major")
        .field("rows", r.shape.rows)
        .field("inner", r.shape.inner)
        .field("k", r.shape.cols)
        .field("algo", r.algo)
        .field("supported", r.run.supported)
        .field("check_passed", r.run.check_passed)
        .field("relative_error_vs_cublas", r.run.relative_error)
        .field("reason", r.run.reason);
    if (r.run.supported && r.run.check_passed) {
      json.field("median_ms", r.run.timing.median_ms)
          .field("min_ms", r.run.timing.min_ms)
          .field("max_ms", r.run.timing.max_ms)
          .field("repetitions", r.run.timing.repetitions)
          .field("gbs", r.gbs)
          .field("percent_of_read_ceiling", 100 * r.gbs / ceiling.gbs)
          .field("same_size_read_gbs", r.same_size_gbs)
          .field("percent_of_same_size_read", 100 * r.gbs / r.same_size_gbs);
      if (cu) json.field("speedup_vs_cublas", cu->run.timing.median_ms / r.run.timing.median_ms);
      if (v0) json.field("speedup_vs_v0", v0->run.timing.median_ms / r.run.timing.median_ms);
    }
    json.end_object();
  }
  json.end_array().end_object();
  return json.str();
}

int run_tsm2_bench(const Tsm2BenchOptions& o) {
  const CudaStream stream;
  Context ctx(stream);
  apply_environment_tuning(ctx);
  const ReadCeiling ceiling = measure_read_ceiling(stream);
  const std::vector<Shape> list = shapes(o);
  std::vector<Row> rows;
  std::map<std::size_t, double> same_size_reads;  // GB/s of the read kernel by buffer size
  for (const auto& s : list) {
    const bool grid = s.rows == s.inner;
    if (s.precision == "double")
      bench_shape<double>(ctx, o, s, grid, rows, same_size_reads);
    else
      bench_shape<float>(ctx, o, s, grid, rows, same_size_reads);
  }
  print_table(list, rows, ceiling);
  if (!o.common.json.empty()) write_file_atomically(o.common.json, to_json(o, rows, ceiling));
  for (const auto& r : rows)
    if (!r.run.check_passed) {
      std::cerr << "tsm2-bench: error: " << r.algo << " on " << r.shape.rows << "x" << r.shape.inner
                << " k=" << r.shape.cols << ": " << r.run.reason << "\n";
      return 1;
    }
  return 0;
}

}  // namespace
}  // namespace skinny::apps

int main(int argc, char** argv) {
  using namespace skinny::apps;
  CLI::App app{"Tall-and-skinny GEMM: TSM2 against cuBLAS and the streaming-read ceiling", "tsm2-bench"};
  Tsm2BenchOptions options;
  setup_tsm2_bench(app, options);
  return run_app(app, argc, argv, options.common, [&] { return run_tsm2_bench(options); });
}
