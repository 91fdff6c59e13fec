// Helpers shared by the CUDA kernels of this folder: dtype loads and deterministic block
// reductions. Device code only; included by .cu files, never by host .cc files.
//
// Batch invariance (see backend.h): every kernel here computes an output element from its own
// token's inputs with a reduction whose shape depends only on the launch's fixed block size and
// the model shape, never on how many tokens are in the batch.
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_COMMON_CUH_
#define SPLITSPEC_COMMON_ENGINE_CUDA_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "common/engine/dtype.h"

namespace splitspec::engine::cuda {

// DType codes as the kernels see them: engine::DType values passed as int.
constexpr int kDTypeF32 = static_cast<int>(DType::kF32);
constexpr int kDTypeF16 = static_cast<int>(DType::kF16);
constexpr int kDTypeBF16 = static_cast<int>(DType::kBF16);
constexpr int kDTypeQ8_0 = static_cast<int>(DType::kQ8_0);

// The scale of block `block` of a Q8_0 row (dtype.h: the row's half scales come first).
__device__ __forceinline__ float Q8BlockScale(const uint8_t* row, int64_t block) {
  __half scale;
  memcpy(&scale, row + 2 * block, sizeof(scale));  // scales sit at even, not 4-byte, offsets
  return __half2float(scale);
}

// Weight `col` of a Q8_0 row of `cols` weights: its int8 value times its block's scale (exact).
__device__ __forceinline__ float LoadQ8AsFloat(const uint8_t* row, int64_t cols, int64_t col) {
  const int8_t* values = reinterpret_cast<const int8_t*>(row + 2 * (cols / kQ8BlockSize));
  return static_cast<float>(values[col]) * Q8BlockScale(row, col / kQ8BlockSize);
}

__device__ __forceinline__ float LoadAsFloat(const void* base, int64_t i, int dtype) {
  if (dtype == kDTypeF16) return __half2float(static_cast<const __half*>(base)[i]);
  if (dtype == kDTypeBF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum (or max) over a block whose size is a multiple of 32 (at most 1024). `scratch` holds 32
// floats of shared memory. Every thread gets the result. The order is fixed by blockDim.
template <bool kMax>
__device__ __forceinline__ float BlockReduce(float v, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int n_warps = blockDim.x / 32;
  v = kMax ? WarpMax(v) : WarpSum(v);
  __syncthreads();  // scratch may still be read from a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < n_warps ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
  r = kMax ? WarpMax(r) : WarpSum(r);
  return r;
}

}  // namespace splitspec::engine::cuda

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_COMMON_CUH_
