// A CPU stand-in for the cuBLAS entry points the CUDA backend calls (the emulation build only;
// a GPU build links the real cuBLAS). Semantics are cuBLAS's: column-major matrices, op(A) and
// op(B) by transpose flags (CUBLAS_OP_C = CUBLAS_OP_T for real types), leading dimensions, host
// pointers for alpha and beta, C not read when beta is 0. Argument checks return what cuBLAS
// returns (INVALID_VALUE for negative sizes or too-small leading dimensions, NOT_SUPPORTED for
// type combinations its GemmEx table lacks). Operands must lie inside device allocations: an
// operand that does not (a leading dimension too large for its buffer, a host pointer) would
// read out of bounds on a GPU; here it returns EXECUTION_FAILED and says which operand.
// Compute types 32F (and its FAST_16F/16BF/TF32 variants, computed at full f32 here) accumulate
// in f32 in increasing k order.
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_EMULATION_CUBLAS_API_H_
#define SPLITSPEC_COMMON_ENGINE_CUDA_EMULATION_CUBLAS_API_H_

#include "common/engine/cuda/emulation/runtime_api.h"

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};

enum cublasOperation_t {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
};

enum cublasComputeType_t {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  CUBLAS_COMPUTE_64F = 70,
};

enum cublasGemmAlgo_t {
  CUBLAS_GEMM_DEFAULT = -1,
  CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99,
};

struct cublasContext;
using cublasHandle_t = cublasContext*;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
const char* cublasGetStatusString(cublasStatus_t status);

// C (m x n, ldc) = alpha * op(A) (m x k) * op(B) (k x n) + beta * C.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_EMULATION_CUBLAS_API_H_
