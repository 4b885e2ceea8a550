// What every skinny program does at its boundary: parse with CLI11, report any error as ONE line on
// stderr with a non-zero exit, select the device, and describe the machine for JSON output.
#pragma once

#include "files.hpp"
#include "json_writer.hpp"

#include <CLI/CLI.hpp>
#include <skinny/gemm/context.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace skinny::apps {

/// Exit code for "no CUDA device": non-zero like every error, and distinct so test drivers can skip.
constexpr int kExitNoDevice = 77;

/// Flags every program shares (one definition, one group in --help).
struct CommonOptions {
  std::string precision = "float";
  std::string json;  ///< write results here as JSON when non-empty
  std::uint64_t seed = 42;
  int device = 0;
};

/// Adds --precision (restricted to `precisions`), --json, --seed and --device in a "Common" group.
void add_common_options(CLI::App& app, CommonOptions& options, const std::vector<std::string>& precisions);

/// Parses argv, then runs `body`. Parse errors, std::exception and a missing GPU each become one line
/// "<program>: error: <what>" on stderr and a non-zero exit code. --help prints help and exits 0.
/// `needs_device`: check for a CUDA device and select options.device before `body`.
int run_app(CLI::App& app, int argc, char** argv, const CommonOptions& options, const std::function<int()>& body);

/// Sets ctx's TSM2 tuning from the SKINNY_TSM2_* environment variables (skinny/gemm/tsm2_tuning.hpp):
/// the programs' override for experiments; the library reads no environment. run_app checks them first.
void apply_environment_tuning(Context& ctx);

/// The advice of require_gpu_memory for a run that is too large: "; use <smaller>", and --precision float
/// first when the run is in double (only what would help this run).
std::string memory_advice(const CommonOptions& options, const std::string& smaller);

/// Throws "<what> needs X GiB on the GPU but Y GiB are free<advice>" unless `bytes` fit in 95 % of
/// the current device's free memory (checked before allocating, so the error is one clear line).
void require_gpu_memory(double bytes, const std::string& what, const std::string& advice = "");

/// Writes "device": {...} (name, SMs, memory, driver/runtime versions), "date" (UTC) and "git_commit".
void write_environment(JsonWriter& json);

/// "NVIDIA H100 80GB HBM3" and friends, for table headers.
std::string device_name();

}  // namespace skinny::apps
