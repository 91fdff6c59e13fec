// SiLU-mul kernel: one thread per output element, the CPU backend's formula
// gate / (1 + exp(-gate)) * up.
#include "common/engine/cuda/launch.cuh"
#include "common/engine/cuda/silu_mul.cuh"

namespace splitspec::engine::cuda {
namespace {

__global__ void SiluMulKernel(const float* gate_up, int64_t n_elements, int64_t n, float* out) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= n_elements) return;
  const int64_t t = index / n;
  const int64_t i = index % n;
  const float gate = gate_up[t * 2 * n + i];
  const float up = gate_up[t * 2 * n + n + i];
  out[index] = gate / (1.0f + expf(-gate)) * up;
}

}  // namespace

cudaError_t LaunchSiluMul(const float* gate_up, int64_t n_rows, int64_t n, float* out, cudaStream_t stream) {
  const int64_t n_elements = n_rows * n;
  if (n_elements == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  return LaunchKernel(SiluMulKernel, static_cast<unsigned>((n_elements + kThreads - 1) / kThreads), kThreads, 0, stream,
                      gate_up, n_elements, n, out);
}

}  // namespace splitspec::engine::cuda
