// Rotary embedding, Llama's half-split rotation: pairs (i, i + head_dim / 2) of each head.
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_ROPE_CUH_
#define SPLITSPEC_COMMON_ENGINE_CUDA_ROPE_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace splitspec::engine::cuda {

// x: (n_tokens, n_heads * head_dim) f32, rotated in place by positions[t] (device array);
// inv_freq: head_dim / 2 device floats.
cudaError_t LaunchRope(float* x, int64_t n_tokens, int n_heads, int head_dim, const float* inv_freq,
                       const int32_t* positions, cudaStream_t stream);

}  // namespace splitspec::engine::cuda

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_ROPE_CUH_
