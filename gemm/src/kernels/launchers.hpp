// Each algorithm's can_implement and launch, defined one per file and collected by registry.cu.
#pragma once

#include "../problem.hpp"

namespace skinny::gemm::detail {

#define SKINNY_DECLARE_ALGORITHM(name)             \
  Support name##_can_implement(const Problem& p); \
  void name##_launch(const Problem& p, Context& ctx);

SKINNY_DECLARE_ALGORITHM(cublas)
SKINNY_DECLARE_ALGORITHM(naive)
SKINNY_DECLARE_ALGORITHM(coalesced)
SKINNY_DECLARE_ALGORITHM(smem_tiled)
SKINNY_DECLARE_ALGORITHM(blocktile_1d)
SKINNY_DECLARE_ALGORITHM(blocktile_2d)
SKINNY_DECLARE_ALGORITHM(vectorized)
SKINNY_DECLARE_ALGORITHM(wmma)
SKINNY_DECLARE_ALGORITHM(tsm2_v0)
SKINNY_DECLARE_ALGORITHM(tsm2_v1)
SKINNY_DECLARE_ALGORITHM(tsm2_v2)
SKINNY_DECLARE_ALGORITHM(tsm2_v3)
SKINNY_DECLARE_ALGORITHM(tsm2)

#undef SKINNY_DECLARE_ALGORITHM

}  // namespace skinny::gemm::detail
