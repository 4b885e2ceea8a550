#include "app_main.hpp"

#include "build_info.hpp"

#include <skinny/gemm/context.hpp>
#include <skinny/gemm/errors.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <stdexcept>

namespace skinny::apps {

void add_common_options(CLI::App& app, CommonOptions& options, const std::vector<std::string>& precisions) {
  const std::string group = "Common";
  app.add_option("--precision", options.precision, "Element type")
      ->check(CLI::IsMember(precisions))
      ->capture_default_str()
      ->group(group);
  app.add_option("--json", options.json, "Write the results to this JSON file")->group(group);
  app.add_option("--seed", options.seed, "Seed of the random inputs")->capture_default_str()->group(group);
  app.add_option("--device", options.device, "CUDA device ordinal")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->group(group);
}

int run_app(CLI::App& app, int argc, char** argv, const CommonOptions& options, const std::function<int()>& body) {
  const std::string program = app.get_name();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return e.get_exit_code() != 0 ? e.get_exit_code() : 2;
  }
  try {
    if (!options.json.empty()) check_writable(options.json);
    gemm::tsm2_tuning_from(std::getenv);  // a bad SKINNY_TSM2_* value is refused before any GPU work
    const int devices = cuda_device_count();
    if (devices == 0) {
      std::cerr << program << ": error: no CUDA device found (this program needs an NVIDIA GPU and driver)\n";
      return kExitNoDevice;
    }
    if (options.device >= devices)
      throw std::invalid_argument("--device " + std::to_string(options.device) + " does not exist (" +
                                  std::to_string(devices) + " device(s) found)");
    SKINNY_CUDA_TRY(cudaSetDevice(options.device));
    return body();
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
}

void apply_environment_tuning(Context& ctx) { ctx.set_tsm2_tuning(gemm::tsm2_tuning_from(std::getenv)); }

std::string memory_advice(const CommonOptions& options, const std::string& smaller) {
  return options.precision == "double" ? "; use --precision float (half the memory) or " + smaller : "; use " + smaller;
}

void require_gpu_memory(double bytes, const std::string& what, const std::string& advice) {
  std::size_t free_bytes = 0, total_bytes = 0;
  SKINNY_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (bytes <= 0.95 * double(free_bytes)) return;
  char msg[256];
  std::snprintf(msg, sizeof msg, "%s needs %.2f GiB on the GPU but %.2f GiB are free%s", what.c_str(),
                bytes / (1 << 30), double(free_bytes) / (1 << 30), advice.c_str());
  throw std::runtime_error(msg);
}

std::string device_name() {
  int device = 0;
  cudaDeviceProp props{};
  SKINNY_CUDA_TRY(cudaGetDevice(&device));
  SKINNY_CUDA_TRY(cudaGetDeviceProperties(&props, device));
  return props.name;
}

void write_environment(JsonWriter& json) {
  int device = 0, driver = 0, runtime = 0;
  cudaDeviceProp props{};
  SKINNY_CUDA_TRY(cudaGetDevice(&device));
  SKINNY_CUDA_TRY(cudaGetDeviceProperties(&props, device));
  SKINNY_CUDA_TRY(cudaDriverGetVersion(&driver));
  SKINNY_CUDA_TRY(cudaRuntimeGetVersion(&runtime));
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  json.key("device").begin_object();
  json.field("name", props.name)
      .field("compute_capability", std::to_string(props.major) + "." + std::to_string(props.minor))
      .field("multiprocessors", props.multiProcessorCount)
      .field("memory_bytes", std::uint64_t(props.totalGlobalMem))
      .field("l2_bytes", props.l2CacheSize)
      .field("driver_version", driver)
      .field("runtime_version", runtime);
  json.end_object();
  json.field("date", date).field("git_commit", kGitCommit);
}

}  // namespace skinny::apps
