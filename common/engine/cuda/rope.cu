// RoPE kernel: one thread per (token, head, pair). The angle is computed in f32 exactly as the
// CPU backend does (position * inv_freq); cosf/sinf may differ from libm by an ulp or two,
// which the conformance tests' tolerance covers.
#include "common/engine/cuda/launch.cuh"
#include "common/engine/cuda/rope.cuh"

namespace splitspec::engine::cuda {
namespace {

__global__ void RopeKernel(float* x, int64_t n_pairs, int n_heads, int head_dim, const float* inv_freq,
                           const int32_t* positions) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= n_pairs) return;
  const int half = head_dim / 2;
  const int i = static_cast<int>(index % half);
  const int64_t head = index / half;  // token * n_heads + h
  const int64_t t = head / n_heads;
  const float angle = static_cast<float>(positions[t]) * inv_freq[i];
  const float c = cosf(angle);
  const float s = sinf(angle);
  float* h = x + head * head_dim;
  const float a = h[i];
  const float b = h[i + half];
  h[i] = a * c - b * s;
  h[i + half] = b * c + a * s;
}

}  // namespace

cudaError_t LaunchRope(float* x, int64_t n_tokens, int n_heads, int head_dim, const float* inv_freq,
                       const int32_t* positions, cudaStream_t stream) {
  const int64_t n_pairs = n_tokens * n_heads * (head_dim / 2);
  if (n_pairs == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  return LaunchKernel(RopeKernel, static_cast<unsigned>((n_pairs + kThreads - 1) / kThreads), kThreads, 0, stream, x,
                      n_pairs, n_heads, head_dim, inv_freq, positions);
}

}  // namespace splitspec::engine::cuda
