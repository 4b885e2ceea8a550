// The cuBLAS backend: one cublasGemmEx_64 call for every element-type combination.
#include "kernels/launchers.hpp"

#include <skinny/gemm/errors.hpp>

#include <cublas_v2.h>

namespace skinny::gemm::detail {

Support cublas_can_implement(const Problem& p) {
  const bool same = p.in_type == p.out_type && p.in_type != DType::f16;
  const bool mixed = p.in_type == DType::f16 && p.out_type == DType::f32;
  if (!same && !mixed)
    return Support::no("cublas: unsupported types " + std::string(to_string(p.in_type)) + " -> " +
                       std::string(to_string(p.out_type)));
  return Support::yes();
}

void cublas_launch(const Problem& p, Context& ctx) {
  // cuBLAS is column-major. Our row-major C (m x n) is the column-major C^T (n x m) = B^T A^T, and a
  // row-major operand read column-major is its own transpose: a row-major B needs no op, a column-major
  // one needs CUBLAS_OP_T (likewise A).
  const cublasOperation_t op_b = p.b_layout == Layout::row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t op_a = p.a_layout == Layout::row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cudaDataType_t in = p.in_type == DType::f64 ? CUDA_R_64F : p.in_type == DType::f16 ? CUDA_R_16F : CUDA_R_32F;
  const cudaDataType_t out = p.out_type == DType::f64 ? CUDA_R_64F : CUDA_R_32F;
  const float alpha_f = float(p.alpha), beta_f = float(p.beta);
  const bool f64 = p.out_type == DType::f64;
  // CUBLAS_COMPUTE_32F keeps float GEMMs in fp32 arithmetic (no TF32 tensor cores) unless the caller
  // allowed TF32.
  const cublasComputeType_t compute = f64              ? CUBLAS_COMPUTE_64F
                                      : p.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                     : CUBLAS_COMPUTE_32F;
  const void* alpha = f64 ? static_cast<const void*>(&p.alpha) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&p.beta) : &beta_f;
  SKINNY_CUBLAS_TRY(cublasGemmEx_64(ctx.cublas(), op_b, op_a, p.n, p.m, p.k, alpha, p.b, in, p.ldb, p.a, in, p.lda,
                                    beta, p.c, out, p.ldc, compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace skinny::gemm::detail
