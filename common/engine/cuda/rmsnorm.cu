// RMSNorm kernel: one block of a fixed 256 threads per row, so each row's sum of squares is
// reduced in the same order whatever the number of rows (batch invariance).
#include "common/engine/cuda/common.cuh"
#include "common/engine/cuda/launch.cuh"
#include "common/engine/cuda/rmsnorm.cuh"

namespace splitspec::engine::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void RmsNormKernel(const float* x, const float* weight, float eps, int64_t dim, float* out) {
  __shared__ float scratch[32];
  const float* in = x + blockIdx.x * dim;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += in[i] * in[i];
  sum = BlockReduce<false>(sum, scratch);
  const float inv_rms = rsqrtf(sum / static_cast<float>(dim) + eps);
  float* dst = out + blockIdx.x * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = (in[i] * inv_rms) * weight[i];
}

}  // namespace

cudaError_t LaunchRmsNorm(const float* x, const float* weight, float eps, int64_t n_rows, int64_t dim, float* out,
                          cudaStream_t stream) {
  if (n_rows == 0) return cudaSuccess;
  return LaunchKernel(RmsNormKernel, static_cast<unsigned>(n_rows), kThreads, 0, stream, x, weight, eps, dim, out);
}

}  // namespace splitspec::engine::cuda
