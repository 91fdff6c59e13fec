// Argmax and softmax kernels: one block of 256 threads per row, fixed-order reductions.
#include "common/engine/cuda/common.cuh"
#include "common/engine/cuda/launch.cuh"
#include "common/engine/cuda/sampling.cuh"

namespace splitspec::engine::cuda {
namespace {

constexpr int kThreads = 256;

// (value, index) ordering for argmax: larger value first, then lower index.
__device__ __forceinline__ bool Better(float v, int32_t i, float best_v, int32_t best_i) {
  return v > best_v || (v == best_v && i < best_i);
}

__global__ void ArgmaxKernel(const float* logits, int64_t vocab, int32_t* out) {
  __shared__ float values[kThreads];
  __shared__ int32_t indices[kThreads];
  const float* row = logits + blockIdx.x * vocab;
  float best_v = -INFINITY;
  int32_t best_i = INT32_MAX;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = row[i];
    if (!isnan(v) && (best_i == INT32_MAX || Better(v, static_cast<int32_t>(i), best_v, best_i))) {
      best_v = v;
      best_i = static_cast<int32_t>(i);
    }
  }
  values[threadIdx.x] = best_v;
  indices[threadIdx.x] = best_i;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      const float v = values[threadIdx.x + stride];
      const int32_t i = indices[threadIdx.x + stride];
      if (i != INT32_MAX && (indices[threadIdx.x] == INT32_MAX || Better(v, i, values[threadIdx.x], indices[threadIdx.x]))) {
        values[threadIdx.x] = v;
        indices[threadIdx.x] = i;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = indices[0] == INT32_MAX ? 0 : indices[0];
}

__global__ void SoftmaxKernel(const float* logits, int64_t vocab, float inv_temperature, float* probs) {
  __shared__ float scratch[32];
  const float* row = logits + blockIdx.x * vocab;
  float* dst = probs + blockIdx.x * vocab;
  float local_max = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) local_max = fmaxf(local_max, row[i] * inv_temperature);
  const float max_value = BlockReduce<true>(local_max, scratch);
  float local_sum = 0.0f;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float e = expf(row[i] * inv_temperature - max_value);
    dst[i] = e;
    local_sum += e;
  }
  const float inv_sum = 1.0f / BlockReduce<false>(local_sum, scratch);
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) dst[i] *= inv_sum;
}

}  // namespace

cudaError_t LaunchArgmax(const float* logits, int64_t n_rows, int64_t vocab, int32_t* out, cudaStream_t stream) {
  if (n_rows == 0) return cudaSuccess;
  return LaunchKernel(ArgmaxKernel, static_cast<unsigned>(n_rows), kThreads, 0, stream, logits, vocab, out);
}

cudaError_t LaunchSoftmax(const float* logits, int64_t n_rows, int64_t vocab, float temperature, float* probs,
                          cudaStream_t stream) {
  if (n_rows == 0) return cudaSuccess;
  if (!(temperature > 0.0f)) return cudaErrorInvalidValue;
  return LaunchKernel(SoftmaxKernel, static_cast<unsigned>(n_rows), kThreads, 0, stream, logits, vocab,
                      1.0f / temperature, probs);
}

}  // namespace splitspec::engine::cuda
