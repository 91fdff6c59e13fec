// Embedding gather: out[t] = table[tokens[t]] as f32.
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_EMBEDDING_CUH_
#define SPLITSPEC_COMMON_ENGINE_CUDA_EMBEDDING_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace splitspec::engine::cuda {

// table: (vocab, dim) of `dtype` (engine::DType as int); tokens: n_tokens device ids (callers
// validate them); out: (n_tokens, dim) f32.
cudaError_t LaunchEmbed(const void* table, int dtype, const int32_t* tokens, int n_tokens, int64_t dim, float* out,
                        cudaStream_t stream);

}  // namespace splitspec::engine::cuda

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_EMBEDDING_CUH_
