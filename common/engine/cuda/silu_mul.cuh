// SwiGLU activation: out[t][i] = silu(gate[t][i]) * up[t][i], gate_up rows = [gate | up].
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_SILU_MUL_CUH_
#define SPLITSPEC_COMMON_ENGINE_CUDA_SILU_MUL_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace splitspec::engine::cuda {

// gate_up: (n_rows, 2 * n) f32; out: (n_rows, n) f32.
cudaError_t LaunchSiluMul(const float* gate_up, int64_t n_rows, int64_t n, float* out, cudaStream_t stream);

}  // namespace splitspec::engine::cuda

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_SILU_MUL_CUH_
