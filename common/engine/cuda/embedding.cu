// Embedding gather kernel: one block per token, threads stride over the hidden dimension.
#include "common/engine/cuda/common.cuh"
#include "common/engine/cuda/embedding.cuh"
#include "common/engine/cuda/launch.cuh"

namespace splitspec::engine::cuda {
namespace {

__global__ void EmbedKernel(const void* table, int dtype, const int32_t* tokens, int64_t dim, float* out) {
  const int64_t t = blockIdx.x;
  if (dtype == kDTypeQ8_0) {
    const uint8_t* row = static_cast<const uint8_t*>(table) + tokens[t] * (dim / kQ8BlockSize) * kQ8BlockBytes;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) out[t * dim + i] = LoadQ8AsFloat(row, dim, i);
    return;
  }
  const int64_t base = static_cast<int64_t>(tokens[t]) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) out[t * dim + i] = LoadAsFloat(table, base + i, dtype);
}

}  // namespace

cudaError_t LaunchEmbed(const void* table, int dtype, const int32_t* tokens, int n_tokens, int64_t dim, float* out,
                        cudaStream_t stream) {
  if (n_tokens == 0) return cudaSuccess;
  return LaunchKernel(EmbedKernel, n_tokens, 256, 0, stream, table, dtype, tokens, dim, out);
}

}  // namespace splitspec::engine::cuda
