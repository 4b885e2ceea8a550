// The ONE table of algorithms. Dispatch, the command line's --algo/--backend choices, the benchmarks and
// the parameterised tests all iterate it; adding a kernel means adding its row here and nowhere else.
#include "kernels/launchers.hpp"
#include "problem.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>

namespace skinny::gemm {
namespace detail {
namespace {

const Algorithm kRegistry[] = {
    {"cublas", Algo::cublas, "cuBLAS cublasGemmEx (fp32 math for float; TF32 when the call allows it)", cublas_can_implement,
     cublas_launch},
    {"naive", Algo::naive, "01: one thread per C element, uncoalesced", naive_can_implement, naive_launch},
    {"coalesced", Algo::coalesced, "02: one thread per C element, coalesced B and C", coalesced_can_implement,
     coalesced_launch},
    {"smem", Algo::smem_tiled, "03: 32x32 tiles of A and B in shared memory", smem_tiled_can_implement,
     smem_tiled_launch},
    {"blocktile1d", Algo::blocktile_1d, "04: 64x64x8 tiles, 8 results per thread", blocktile_1d_can_implement,
     blocktile_1d_launch},
    {"blocktile2d", Algo::blocktile_2d, "05: 128x128x8 tiles, 8x8 results per thread", blocktile_2d_can_implement,
     blocktile_2d_launch},
    {"vectorized", Algo::vectorized, "06: 05 with 16-byte loads, transposed As, register prefetch",
     vectorized_can_implement, vectorized_launch},
    {"wmma", Algo::wmma, "07: WMMA 16x16x16 tensor cores, f16 in, f32 accumulate and out", wmma_can_implement,
     wmma_launch},
    {"tsm2_v0", Algo::tsm2_v0, "TSM2 V0: thread per row, inner products", tsm2_v0_can_implement, tsm2_v0_launch},
    {"tsm2_v1", Algo::tsm2_v1, "TSM2 V1: outer products", tsm2_v1_can_implement, tsm2_v1_launch},
    {"tsm2_v2", Algo::tsm2_v2, "TSM2 V2: V1 + B tiles in shared memory", tsm2_v2_can_implement, tsm2_v2_launch},
    {"tsm2_v3", Algo::tsm2_v3, "TSM2 V3: V2 + prefetching of A and B", tsm2_v3_can_implement, tsm2_v3_launch},
    {"tsm2", Algo::tsm2, "TSM2 for the H100: wide loads, split inner dimension, model-chosen parameters",
     tsm2_can_implement, tsm2_launch},
};

}  // namespace

const Algorithm* registry_begin() { return std::begin(kRegistry); }
const Algorithm* registry_end() { return std::end(kRegistry); }

const Algorithm& find_algorithm(Algo algo) {
  const auto it = std::find_if(registry_begin(), registry_end(), [&](const Algorithm& a) { return a.algo == algo; });
  if (it == registry_end()) throw std::invalid_argument("gemm: algorithm is not in the registry: " +
                                                        std::to_string(static_cast<int>(algo)));
  return *it;
}

}  // namespace detail

const std::vector<AlgoInfo>& algorithms() {
  static const std::vector<AlgoInfo> infos = [] {
    std::vector<AlgoInfo> v;
    for (auto it = detail::registry_begin(); it != detail::registry_end(); ++it)
      v.push_back({it->name, it->algo, it->summary});
    return v;
  }();
  return infos;
}

std::string_view to_string(Algo a) {
  if (a == Algo::automatic) return "auto";
  return detail::find_algorithm(a).name;
}

std::vector<std::string> algo_names() {
  std::vector<std::string> names{"auto"};
  for (const auto& info : algorithms()) names.emplace_back(info.name);
  return names;
}

Algo algo_from_name(std::string_view name) {
  if (name == "auto") return Algo::automatic;
  for (const auto& info : algorithms())
    if (info.name == name) return info.algo;
  std::string valid;
  for (const auto& n : algo_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown GEMM algorithm '" + std::string(name) + "' (valid: " + valid + ")");
}

std::string_view to_string(DType t) {
  switch (t) {
    case DType::f16: return "f16";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
  }
  return "?";
}

}  // namespace skinny::gemm
