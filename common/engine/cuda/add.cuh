// Residual add: acc[i] += x[i].
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_ADD_CUH_
#define SPLITSPEC_COMMON_ENGINE_CUDA_ADD_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace splitspec::engine::cuda {

cudaError_t LaunchAdd(float* acc, const float* x, int64_t n, cudaStream_t stream);

}  // namespace splitspec::engine::cuda

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_ADD_CUH_
