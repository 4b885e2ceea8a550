// Tsm2Tuning: its cache key, and reading it from named settings (the programs' environment).
#include <skinny/gemm/tsm2_tuning.hpp>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace skinny::gemm {
namespace {

[[noreturn]] void refuse(const char* name, const std::string& value, const char* expected) {
  throw std::invalid_argument(std::string(name) + "=" + value + " is not valid: expected " + expected);
}

/// A whole number >= 0 (unset: 0).
int read_count(const char* name, const char* value) {
  if (value == nullptr || *value == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value, &end, 10);
  if (*end != '\0' || errno != 0 || v < 0 || v > 1 << 20) refuse(name, value, "a whole number >= 0");
  return static_cast<int>(v);
}

/// A fraction in [0, 1] (unset: 0).
double read_fraction(const char* name, const char* value) {
  if (value == nullptr || *value == '\0') return 0;
  char* end = nullptr;
  const double v = std::strtod(value, &end);
  if (*end != '\0' || !(v >= 0 && v <= 1)) refuse(name, value, "a number in [0, 1]");
  return v;
}

/// 0 or 1 (unset: false).
bool read_switch(const char* name, const char* value) {
  if (value == nullptr || *value == '\0') return false;
  const std::string v(value);
  if (v == "1") return true;
  if (v == "0") return false;
  refuse(name, v, "0 or 1");
}

}  // namespace

std::string Tsm2Tuning::key() const {
  return std::to_string(trial) + "/" + std::to_string(t1) + "/" + std::to_string(split) + "/" +
         std::to_string(max_t2) + "/" + std::to_string(partial_cap) + "/" +
         std::to_string(static_cast<int>(row_major_kernel)) + "/" + std::to_string(static_cast<int>(col_major_kernel)) +
         "/" + std::to_string(static_cast<int>(split_rule));
}

Tsm2Tuning tsm2_tuning_from(const std::function<const char*(const char*)>& lookup) {
  auto get = [&](const char* name) -> std::string {
    const char* v = lookup(name);
    return v ? v : "";
  };
  Tsm2Tuning t;
  t.trial = !read_switch("SKINNY_TSM2_NO_TRIAL", lookup("SKINNY_TSM2_NO_TRIAL"));
  t.t1 = read_count("SKINNY_TSM2_T1", lookup("SKINNY_TSM2_T1"));
  t.split = read_count("SKINNY_TSM2_SPLIT", lookup("SKINNY_TSM2_SPLIT"));
  t.max_t2 = read_count("SKINNY_TSM2_MAX_T2", lookup("SKINNY_TSM2_MAX_T2"));
  t.partial_cap = read_fraction("SKINNY_TSM2_PARTIAL_CAP", lookup("SKINNY_TSM2_PARTIAL_CAP"));
  t.verbose = read_switch("SKINNY_TSM2_VERBOSE", lookup("SKINNY_TSM2_VERBOSE"));

  const std::string rm = get("SKINNY_TSM2_RM_KERNEL");
  if (rm == "mma") t.row_major_kernel = Tsm2RowMajorKernel::mma;
  else if (rm == "ffma") t.row_major_kernel = Tsm2RowMajorKernel::ffma;
  else if (rm == "stream") t.row_major_kernel = Tsm2RowMajorKernel::stream;
  else if (!rm.empty()) refuse("SKINNY_TSM2_RM_KERNEL", rm, "mma, ffma or stream");

  const std::string cm = get("SKINNY_TSM2_CM_KERNEL");
  if (cm == "dmma") t.col_major_kernel = Tsm2ColMajorKernel::dmma;
  else if (cm == "tf32") t.col_major_kernel = Tsm2ColMajorKernel::tf32;
  else if (cm == "ffma") t.col_major_kernel = Tsm2ColMajorKernel::ffma;
  else if (!cm.empty()) refuse("SKINNY_TSM2_CM_KERNEL", cm, "dmma, tf32 or ffma");

  const std::string rule = get("SKINNY_TSM2_SPLIT_RULE");
  if (rule == "lean") t.split_rule = Tsm2SplitRule::lean;
  else if (!rule.empty() && rule != "all") refuse("SKINNY_TSM2_SPLIT_RULE", rule, "all or lean");
  return t;
}

}  // namespace skinny::gemm
