// Internal pieces of the ABFT layer.
#pragma once

#include <skinny/abft/abft.hpp>
#include <skinny/gemm/host_device.hpp>

#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

namespace skinny::abft::detail {

/// The fused encoder: one read of A; requires density 0 or a multiple of kFusedBand.
constexpr std::int64_t kFusedBand = 512;

template <class T>
void fused_encode(const T* a, std::int64_t m, std::int64_t n, std::int64_t lda, std::int64_t density, T* row_checksums,
                  T* col_checksums, void* workspace, cudaStream_t stream);
/// Workspace bytes fused_encode needs for an m x n matrix.
std::size_t fused_workspace_bytes(std::int64_t m, std::int64_t n, int elem_bytes);

/// |difference| / threshold: 0 for an exact match (whatever the threshold), NaN when either is not finite
/// (a threshold whose magnitudes overflowed). One definition for the GPU's comparison and the host's.
SKINNY_HOST_DEVICE inline double check_ratio(double difference, double tau) {
  if (!(fabs(tau) <= DBL_MAX)) return NAN;
  return difference == 0 ? 0 : fabs(difference) / tau;
}

/// The verdict of a check from its plain and weighted ratios: the larger (NaN when the plain one is, and
/// then the check fails: !(worst <= 1)).
SKINNY_HOST_DEVICE inline double worst_ratio(double plain, double weighted) { return plain < weighted ? weighted : plain; }

/// One comparison of checksums: carried (from the encoded operands), computed (from C), and the threshold.
struct Checks {
  std::vector<double> carried_e, carried_w, computed_e, computed_w, tau_e, tau_w;
};

/// The decision of verification, from the column checks (one per column of C) and the row checks (one
/// per row): which element, if any, to correct. Pure host logic, tested on the CPU.
Report analyze(const Checks& cols, const Checks& rows);

}  // namespace skinny::abft::detail
