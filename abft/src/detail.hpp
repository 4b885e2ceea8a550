// Internal pieces of the ABFT layer.
#pragma once

#include <skinny/abft/abft.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace skinny::abft::detail {

/// The fused encoder: one read of A; requires density 0 or a multiple of kFusedBand.
constexpr std::int64_t kFusedBand = 512;

/// square: encodes A o A instead (each element squared as it is read; the rounding threshold's P).
template <class T>
void fused_encode(const T* a, std::int64_t m, std::int64_t n, std::int64_t lda, std::int64_t density, T* row_checksums,
                  T* col_checksums, void* workspace, cudaStream_t stream, bool square = false);
/// Workspace bytes fused_encode needs for an m x n matrix.
std::size_t fused_workspace_bytes(std::int64_t m, std::int64_t n, int elem_bytes);

/// One comparison of checksums: carried (from the encoded operands), computed (from C), and the threshold.
struct Checks {
  std::vector<double> carried_e, carried_w, computed_e, computed_w, tau_e, tau_w;
};

/// The decision of verification, from the column checks (one per column of C) and the row checks (one
/// per row): which element, if any, to correct. Pure host logic, tested on the CPU.
Report analyze(const Checks& cols, const Checks& rows);

}  // namespace skinny::abft::detail
