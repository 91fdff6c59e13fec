// Weight-times-activations products: out (T, n_out) = x[rows] (T, K) W^T (n_out, K) (+ bias).
//
// Two paths. LaunchMatMulWarp is ours: one warp per output row, each token's dot product
// walked by the lanes in a fixed order and reduced by a fixed shuffle tree, so a result never
// depends on how many tokens share the launch (the batch invariance backend.h asks for; decode
// and small verify batches are weight-bandwidth bound, where a GEMV-shaped kernel suffices).
// The cuBLAS path (GEMM with F32 accumulation, driven from cuda_backend.cc) is faster for big
// prefills but cuBLAS picks algorithms by shape, so it is not batch invariant; these helpers
// prepare its inputs.
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_MATMUL_CUH_
#define SPLITSPEC_COMMON_ENGINE_CUDA_MATMUL_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace splitspec::engine::cuda {

// x: f32 rows of width k (16-byte aligned rows when k % 8 == 0, as cudaMalloc'd tensors are); rows: n_tokens device indices into x, or nullptr for rows 0..T-1;
// w: (n_out, k) of `dtype`; bias: n_out f32 or nullptr; out: (n_tokens, n_out) f32.
cudaError_t LaunchMatMulWarp(const float* x, const int32_t* rows, int64_t n_tokens, int64_t k, const void* w,
                             int dtype, int64_t n_out, const float* bias, float* out, cudaStream_t stream);

// The same product for Q8_0 weights (k a multiple of 32): x[rows] quantized per token and block
// of 32 into `scratch` (Q8ActivationBytes(n_tokens, k) bytes, 16-byte aligned), then int8 dot
// products per block. One path for decode and prefill alike (cuBLAS has no Q8_0 GEMM).
size_t Q8ActivationBytes(int64_t n_tokens, int64_t k);
cudaError_t LaunchMatMulQ8(const float* x, const int32_t* rows, int64_t n_tokens, int64_t k, const void* w,
                           int64_t n_out, const float* bias, float* out, void* scratch, cudaStream_t stream);

// dst (n_tokens, k) of `dtype` = x[rows] converted (round to nearest even), for cuBLAS.
cudaError_t LaunchGatherConvert(const float* x, const int32_t* rows, int64_t n_tokens, int64_t k, int dtype,
                                void* dst, cudaStream_t stream);

// out[t][n] += bias[n].
cudaError_t LaunchAddBias(float* out, const float* bias, int64_t n_tokens, int64_t n_out, cudaStream_t stream);

}  // namespace splitspec::engine::cuda

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_MATMUL_CUH_
