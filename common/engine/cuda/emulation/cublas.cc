// The cuBLAS stand-in (see cublas_api.h).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "common/engine/cuda/emulation/cublas_api.h"
#include "common/engine/cuda/emulation/kernel_model.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace {

using splitspec::cuda_emulation::Bf16BitsToFloat;
using splitspec::cuda_emulation::FloatToBf16BitsRn;
using splitspec::cuda_emulation::FloatToHalfBitsRn;
using splitspec::cuda_emulation::HalfBitsToFloat;

size_t ElementBytes(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

float Load(const void* base, int64_t i, cudaDataType_t type) {
  if (type == CUDA_R_16F) return HalfBitsToFloat(static_cast<const uint16_t*>(base)[i]);
  if (type == CUDA_R_16BF) return Bf16BitsToFloat(static_cast<const uint16_t*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

void Store(void* base, int64_t i, cudaDataType_t type, float value) {
  if (type == CUDA_R_16F) {
    static_cast<uint16_t*>(base)[i] = FloatToHalfBitsRn(value);
  } else if (type == CUDA_R_16BF) {
    static_cast<uint16_t*>(base)[i] = FloatToBf16BitsRn(value);
  } else {
    static_cast<float*>(base)[i] = value;
  }
}

// cublasGemmEx's table for the f32 compute types (real types): A/B and C type pairs.
bool SupportedTypes(cudaDataType_t ab, cudaDataType_t b, cudaDataType_t c) {
  if (ab != b) return false;
  if (ab == CUDA_R_32F) return c == CUDA_R_32F;
  if (ab == CUDA_R_16F) return c == CUDA_R_16F || c == CUDA_R_32F;
  if (ab == CUDA_R_16BF) return c == CUDA_R_16BF || c == CUDA_R_32F;
  return false;
}

bool F32Compute(cublasComputeType_t type) {
  return type == CUBLAS_COMPUTE_32F || type == CUBLAS_COMPUTE_32F_PEDANTIC || type == CUBLAS_COMPUTE_32F_FAST_16F ||
         type == CUBLAS_COMPUTE_32F_FAST_16BF || type == CUBLAS_COMPUTE_32F_FAST_TF32;
}

// A column-major rows x cols operand with leading dimension ld spans ld * (cols - 1) + rows
// elements; it must lie inside one device allocation.
bool OperandInDeviceMemory(const char* name, const void* base, int rows, int cols, int ld, cudaDataType_t type) {
  if (rows == 0 || cols == 0) return true;
  const size_t elements = static_cast<size_t>(ld) * (cols - 1) + rows;
  if (splitspec::cuda_emulation::IsDeviceRange(base, elements * ElementBytes(type))) return true;
  std::fprintf(stderr,
               "cuda emulation: cublasGemmEx operand %s (%d x %d, ld %d) is not inside one device allocation: "
               "a GPU would read or write out of bounds\n",
               name, rows, cols, ld);
  return false;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  (void)algo;  // every algorithm computes the same product; only its rounding order differs
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const auto valid_op = [](cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; };
  if (!valid_op(transa) || !valid_op(transb) || m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const bool a_transposed = transa != CUBLAS_OP_N;
  const bool b_transposed = transb != CUBLAS_OP_N;
  // Stored shapes (column-major): A is m x k, or k x m when transposed; B is k x n, or n x k.
  const int a_rows = a_transposed ? k : m, a_cols = a_transposed ? m : k;
  const int b_rows = b_transposed ? n : k, b_cols = b_transposed ? k : n;
  if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (!F32Compute(computeType) || !SupportedTypes(Atype, Btype, Ctype)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  if (splitspec::cuda_emulation::StickyError() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  if (!OperandInDeviceMemory("A", A, a_rows, a_cols, lda, Atype) ||
      !OperandInDeviceMemory("B", B, b_rows, b_cols, ldb, Btype) ||
      !OperandInDeviceMemory("C", C, m, n, ldc, Ctype)) {
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  const float a_scale = *static_cast<const float*>(alpha);
  const float c_scale = *static_cast<const float*>(beta);
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      float sum = 0.0f;
      for (int l = 0; l < k; ++l) {
        const int64_t a_at = a_transposed ? l + static_cast<int64_t>(i) * lda : i + static_cast<int64_t>(l) * lda;
        const int64_t b_at = b_transposed ? j + static_cast<int64_t>(l) * ldb : l + static_cast<int64_t>(j) * ldb;
        sum += Load(A, a_at, Atype) * Load(B, b_at, Btype);
      }
      const int64_t c_at = i + static_cast<int64_t>(j) * ldc;
      // beta == 0: C is output only (it may hold NaN), as in cuBLAS.
      const float result = c_scale == 0.0f ? a_scale * sum : a_scale * sum + c_scale * Load(C, c_at, Ctype);
      Store(C, c_at, Ctype, result);
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}
