// Error-checking macros for CUDA runtime, cuBLAS and NCCL calls. Each evaluates the call once
// and, on failure, returns an absl::Status naming the call, the error and the file:line, so
// callers propagate failures instead of crashing. Usable from host code only.
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_CUDA_CHECK_H_
#define SPLITSPEC_COMMON_ENGINE_CUDA_CUDA_CHECK_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace splitspec::engine::cuda {

// "file:line: call failed: what".
inline absl::Status CallError(absl::StatusCode code, const char* file, int line, const char* call,
                              const char* what) {
  return absl::Status(code, absl::StrCat(file, ":", line, ": ", call, " failed: ", what));
}

}  // namespace splitspec::engine::cuda

// cudaError_t -> INTERNAL (RESOURCE_EXHAUSTED for out-of-memory).
#define CUDA_CHECK(call)                                                                              \
  do {                                                                                                \
    const cudaError_t splitspec_cuda_error = (call);                                                  \
    if (splitspec_cuda_error != cudaSuccess) {                                                        \
      return ::splitspec::engine::cuda::CallError(splitspec_cuda_error == cudaErrorMemoryAllocation   \
                                                      ? absl::StatusCode::kResourceExhausted          \
                                                      : absl::StatusCode::kInternal,                  \
                                                  __FILE__, __LINE__, #call,                          \
                                                  cudaGetErrorString(splitspec_cuda_error));          \
    }                                                                                                 \
  } while (0)

// cublasStatus_t -> INTERNAL.
#define CUBLAS_CHECK(call)                                                                             \
  do {                                                                                                 \
    const cublasStatus_t splitspec_cublas_status = (call);                                             \
    if (splitspec_cublas_status != CUBLAS_STATUS_SUCCESS) {                                            \
      return ::splitspec::engine::cuda::CallError(absl::StatusCode::kInternal, __FILE__, __LINE__,     \
                                                  #call, cublasGetStatusString(splitspec_cublas_status)); \
    }                                                                                                  \
  } while (0)

// ncclResult_t -> INTERNAL.
#define NCCL_CHECK(call)                                                                          \
  do {                                                                                            \
    const ncclResult_t splitspec_nccl_result = (call);                                            \
    if (splitspec_nccl_result != ncclSuccess) {                                                   \
      return ::splitspec::engine::cuda::CallError(absl::StatusCode::kInternal, __FILE__, __LINE__, \
                                                  #call, ncclGetErrorString(splitspec_nccl_result)); \
    }                                                                                             \
  } while (0)

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_CUDA_CHECK_H_
