// Residual add kernel: one thread per element.
#include "common/engine/cuda/add.cuh"
#include "common/engine/cuda/launch.cuh"

namespace splitspec::engine::cuda {
namespace {

__global__ void AddKernel(float* acc, const float* x, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) acc[i] += x[i];
}

}  // namespace

cudaError_t LaunchAdd(float* acc, const float* x, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  return LaunchKernel(AddKernel, static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream, acc, x, n);
}

}  // namespace splitspec::engine::cuda
