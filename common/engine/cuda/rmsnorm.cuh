// RMSNorm: out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight.
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_RMSNORM_CUH_
#define SPLITSPEC_COMMON_ENGINE_CUDA_RMSNORM_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace splitspec::engine::cuda {

// x, out: (n_rows, dim) f32 (may alias); weight: dim f32.
cudaError_t LaunchRmsNorm(const float* x, const float* weight, float eps, int64_t n_rows, int64_t dim, float* out,
                          cudaStream_t stream);

}  // namespace splitspec::engine::cuda

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_RMSNORM_CUH_
