// abft-encode: checksum encoding of an n x n matrix on the GPU (row, column, both; cuBLAS, TSM2 or the
// fused one-read kernel), checked against a reference, timed against the streaming-read ceiling.
//   abft-encode --size 20480 --compare                 every backend's speedup over cuBLAS
//   abft-encode --sizes 1024,2048,...,30720 --compare  the paper's Fig. 9 sweep, with --json
#include "common/app_main.hpp"
#include "common/device_data.hpp"
#include "common/matrix_io.hpp"
#include "common/read_ceiling.hpp"
#include "common/timing.hpp"

#include <skinny/abft/abft.hpp>
#include <skinny/gemm/cuda_stream.hpp>
#include <skinny/gemm/device_buffer.hpp>
#include <skinny/gemm/reference.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace skinny::apps {
namespace {

struct EncodeOptions {
  std::vector<std::int64_t> sizes{20480};
  std::string backend = "fused";
  std::int64_t density = 0;
  bool compare = false;
  std::string input;  ///< .npy matrix instead of random data (its size replaces --sizes)
  CommonOptions common;
};

struct Row {
  std::int64_t size = 0;
  std::string backend, side;
  bool supported = true;
  std::string reason;
  double relative_error = 0;
  Timing timing;
  double gbs = 0;
};

void setup_abft_encode(CLI::App& app, EncodeOptions& o) {
  app.add_option("--size,--sizes", o.sizes, "Matrix sizes n (A is n x n), comma-separated")
      ->delimiter(',')->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 20))->capture_default_str();
  app.add_option("--backend", o.backend, "Encoder (without --compare)")->check(CLI::IsMember(abft::backend_names()))
      ->capture_default_str();
  app.add_option("--density", o.density, "Checksum block size b (0: one checksum pair per row and column)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_flag("--compare", o.compare, "Run every backend; print each one's speedup over cuBLAS");
  app.add_option("--input", o.input, "Encode this .npy matrix (float32/float64, 2-D) instead of random data");
  add_common_options(app, o.common, {"float", "double"});
}

const char* side_name(abft::Side s) { return s == abft::Side::rows ? "rows" : s == abft::Side::cols ? "cols" : "both"; }

template <class T>
std::vector<Row> bench_size(Context& ctx, const EncodeOptions& o, std::int64_t m, std::int64_t n,
                            const HostData<T>* input) {
  const std::int64_t nbc = abft::blocks(n, o.density), nbr = abft::blocks(m, o.density);
  require_gpu_memory(double(m) * double(n) * sizeof(T) * 1.05 + 4.0 * (m * nbc + n * nbr) * sizeof(T),
                     std::to_string(m) + " x " + std::to_string(n) + " " + o.common.precision,
                     memory_advice(o.common, input ? "a smaller matrix (it must fit in GPU memory)" : "a smaller --size"));
  DeviceBuffer<T> a(static_cast<std::size_t>(m * n));
  if (input) {  // the file is row-major: A(i, j) = values[i * cols + j]; store it column-major
    std::vector<T> cm(static_cast<std::size_t>(m * n));
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) cm[std::size_t(j * m + i)] = input->values[std::size_t(i * n + j)];
    a.copy_from(cm);
  } else {
    fill_uniform(a.data(), a.size(), o.common.seed, 0.0, 1.0, ctx.stream());  // the paper's inputs: [0, 1)
  }
  // The reference: the CPU in double for small matrices, else cuBLAS (a double-checked GEMM library).
  DeviceBuffer<T> r(static_cast<std::size_t>(m * 2 * nbc)), k(static_cast<std::size_t>(2 * nbr * n));
  DeviceBuffer<T> r_ref(r.size()), k_ref(k.size());
  const bool cpu_reference = double(m) * double(n) <= 4.2e6;
  if (cpu_reference) {
    std::vector<double> ad(static_cast<std::size_t>(m * n)), rd, kd;
    const std::vector<T> host = a.to_host();
    for (std::size_t i = 0; i < host.size(); ++i) ad[i] = host[i];
    abft::reference_encode(ad, m, n, o.density, rd, kd);
    r_ref.copy_from(std::vector<T>(rd.begin(), rd.end()));
    k_ref.copy_from(std::vector<T>(kd.begin(), kd.end()));
  } else {
    abft::encode<T>(ctx, a.data(), m, n, m, {abft::Side::both, abft::Backend::cublas, o.density}, r_ref.data(), k_ref.data());
  }
  const double u = sizeof(T) == 8 ? 0x1p-53 : 0x1p-24;
  const double bound = 4 * gemm::error_bound(std::max(m, n), u);
  // cuBLAS is the baseline of every speedup: measured in every run.
  std::vector<std::string> backends = o.compare ? abft::backend_names() : std::vector<std::string>{"cublas", o.backend};
  if (!o.compare && o.backend == "cublas") backends.pop_back();
  std::vector<Row> rows;
  for (const auto& name : backends) {
    for (const abft::Side side : {abft::Side::rows, abft::Side::cols, abft::Side::both}) {
      Row row;
      row.size = n;
      row.backend = name;
      row.side = side_name(side);
      const abft::EncodeParams params{side, abft::backend_from_name(name), o.density};
      const std::string why = abft::cannot_encode(params.backend, m, n, o.density);
      if (!why.empty()) {
        row.supported = false;
        row.reason = why;
        rows.push_back(row);
        continue;
      }
      abft::Encoder<T> encoder(ctx, m, n, m, params);
      const bool want_r = side != abft::Side::cols, want_k = side != abft::Side::rows;
      fill_value(r.data(), r.size(), std::nan(""), ctx.stream());  // poisoned: every checksum must be written
      fill_value(k.data(), k.size(), std::nan(""), ctx.stream());
      encoder.run(a.data(), want_r ? r.data() : nullptr, want_k ? k.data() : nullptr);
      double err = 0;
      if (want_r) err = std::max(err, relative_error(r.data(), r_ref.data(), r.size(), ctx.stream()));
      if (want_k) err = std::max(err, relative_error(k.data(), k_ref.data(), k.size(), ctx.stream()));
      row.relative_error = err;
      if (!(err <= bound))
        throw std::runtime_error(name + " " + row.side + " checksums of " + std::to_string(m) + " x " + std::to_string(n) +
                                 " differ from the reference by " + std::to_string(err) + " (bound " +
                                 std::to_string(bound) + ")");
      row.timing = time_on_stream(ctx.stream(), [&] { encoder.run(a.data(), want_r ? r.data() : nullptr,
                                                                  want_k ? k.data() : nullptr); });
      row.gbs = double(m) * double(n) * sizeof(T) / (row.timing.median_ms * 1e6);
      rows.push_back(row);
    }
  }
  return rows;
}

const Row* find(const std::vector<Row>& rows, std::int64_t size, const std::string& backend, const std::string& side) {
  for (const auto& r : rows)
    if (r.size == size && r.backend == backend && r.side == side && r.supported) return &r;
  return nullptr;
}

/// `input`: the --input matrix, read and checked while parsing (empty: random matrices of --sizes).
template <class T>
int run_typed(const EncodeOptions& o, const std::optional<HostData<T>>& input) {
  const CudaStream stream;
  Context ctx(stream);
  apply_environment_tuning(ctx);
  const ReadCeiling ceiling = measure_read_ceiling(stream);
  std::vector<Row> rows;
  for (const std::int64_t n : o.sizes) {
    const std::int64_t m = input ? input->rows : n;
    const std::vector<Row> r = bench_size<T>(ctx, o, m, n, input ? &*input : nullptr);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  std::printf("abft-encode on %s, %s, density %lld: streaming-read ceiling %.0f GB/s\n", device_name().c_str(),
              o.common.precision.c_str(), static_cast<long long>(o.density), ceiling.gbs);
  std::printf("GB/s = bytes of A / median time; %% = of the read ceiling; speedup = cuBLAS time (same checksums) / time\n");
  std::printf("%6s %-7s %-5s | %9s %7s %6s | %8s | %9s\n", "size", "backend", "side", "ms", "GB/s", "%", "speedup",
              "rel.err");
  for (const auto& r : rows) {
    if (!r.supported) {
      std::printf("%6lld %-7s %-5s | cannot: %s\n", static_cast<long long>(r.size), r.backend.c_str(), r.side.c_str(),
                  r.reason.c_str());
      continue;
    }
    const Row* cu = find(rows, r.size, "cublas", r.side);
    std::printf("%6lld %-7s %-5s | %9.4f %7.0f %6.1f | %7.2fx | %9.2e\n", static_cast<long long>(r.size),
                r.backend.c_str(), r.side.c_str(), r.timing.median_ms, r.gbs, 100 * r.gbs / ceiling.gbs,
                cu ? cu->timing.median_ms / r.timing.median_ms : NAN, r.relative_error);
  }
  if (!o.common.json.empty()) {
    JsonWriter json;
    json.begin_object().field("benchmark", "abft-encode").field("precision", o.common.precision);
    write_environment(json);
    json.field("density", o.density).field("seed", o.common.seed).field("input", o.input.empty() ? "random [0, 1)" : o.input);
    json.key("read_ceiling").begin_object().field("gbs", ceiling.gbs).field("bytes", std::uint64_t(ceiling.bytes)).end_object();
    json.key("results").begin_array();
    for (const auto& r : rows) {
      json.begin_object().field("size", r.size).field("backend", r.backend).field("side", r.side)
          .field("supported", r.supported).field("reason", r.reason);
      if (r.supported) {
        const Row* cu = find(rows, r.size, "cublas", r.side);
        json.field("median_ms", r.timing.median_ms).field("min_ms", r.timing.min_ms).field("max_ms", r.timing.max_ms)
            .field("repetitions", r.timing.repetitions).field("gbs", r.gbs)
            .field("percent_of_read_ceiling", 100 * r.gbs / ceiling.gbs).field("relative_error", r.relative_error);
        if (cu) json.field("speedup_vs_cublas", cu->timing.median_ms / r.timing.median_ms);
      }
      json.end_object();
    }
    json.end_array().end_object();
    write_file_atomically(o.common.json, json.str());
  }
  return 0;
}

}  // namespace
}  // namespace skinny::apps

int main(int argc, char** argv) {
  using namespace skinny::apps;
  CLI::App app{"ABFT checksum encoding: cuBLAS, TSM2 and the fused one-read kernel against the read ceiling",
               "abft-encode"};
  EncodeOptions options;
  setup_abft_encode(app, options);
  std::optional<HostData<float>> input_f;
  std::optional<HostData<double>> input_d;
  app.callback([&] {  // checks that need no GPU, so bad input fails the same way without one; the file is read once
    std::int64_t rows = 0;
    if (!options.input.empty()) {
      try {
        if (options.common.precision == "double") {
          input_d = read_matrix<double>(options.input);
          rows = input_d->rows;
          options.sizes = {input_d->cols};
        } else {
          input_f = read_matrix<float>(options.input);
          rows = input_f->rows;
          options.sizes = {input_f->cols};
        }
      } catch (const std::exception& e) {
        throw CLI::ValidationError(e.what());
      }
    }
    if (!options.compare)
      for (auto n : options.sizes) {
        const std::string why = skinny::abft::cannot_encode(skinny::abft::backend_from_name(options.backend),
                                                            rows > 0 ? rows : n, n, options.density);
        if (!why.empty()) throw CLI::ValidationError("--backend " + options.backend + ": " + why);
      }
  });
  return run_app(app, argc, argv, options.common, [&] {
    return options.common.precision == "double" ? run_typed<double>(options, input_d)
                                                : run_typed<float>(options, input_f);
  });
}
