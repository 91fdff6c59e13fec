// The warp-per-row matmul kernel and the cuBLAS input helpers (see matmul.cuh).
#include "common/engine/cuda/common.cuh"
#include "common/engine/cuda/launch.cuh"
#include "common/engine/cuda/matmul.cuh"

namespace splitspec::engine::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kTokenTile = 4;  // tokens sharing each weight load; accumulators stay per token

template <typename T>
__device__ __forceinline__ float ToFloat(T v);
template <>
__device__ __forceinline__ float ToFloat<float>(float v) { return v; }
template <>
__device__ __forceinline__ float ToFloat<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

// Lane l handles elements k = l, l + 32, l + 64, ... of every dot product in that order, for
// every token of the tile alike; the 32 partial sums are then combined by WarpSum. Neither
// depends on n_tokens or on which tile a token falls in.
template <typename T>
__global__ void MatMulWarpKernel(const float* x, const int32_t* rows, int64_t n_tokens, int64_t k, const T* w,
                                 int64_t n_out, const float* bias, float* out) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (n >= n_out) return;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokenTile;
  const int n_tile = static_cast<int>(min(static_cast<int64_t>(kTokenTile), n_tokens - t0));
  const float* x_rows[kTokenTile];
  for (int j = 0; j < kTokenTile; ++j) {
    const int64_t t = t0 + min(j, n_tile - 1);
    x_rows[j] = x + (rows != nullptr ? static_cast<int64_t>(rows[t]) : t) * k;
  }
  const T* w_row = w + n * k;
  float acc[kTokenTile] = {};
  for (int64_t i = lane; i < k; i += 32) {
    const float wv = ToFloat(w_row[i]);
#pragma unroll
    for (int j = 0; j < kTokenTile; ++j) acc[j] += wv * x_rows[j][i];
  }
  const float b = bias != nullptr ? bias[n] : 0.0f;
  for (int j = 0; j < n_tile; ++j) {
    const float sum = WarpSum(acc[j]);
    if (lane == 0) out[(t0 + j) * n_out + n] = bias != nullptr ? sum + b : sum;
  }
}

// The same product for 16-bit weights when k % 8 == 0: lane l reads 16-byte chunks
// l, l + 32, ... (8 weights each, element order within a chunk), which is what lets a decode
// step stream weights near the memory bandwidth. The path is chosen by dtype and k only, so
// batch invariance holds as in MatMulWarpKernel.
template <typename T>
__global__ void MatMulWarpVec8Kernel(const float* x, const int32_t* rows, int64_t n_tokens, int64_t k, const T* w,
                                     int64_t n_out, const float* bias, float* out) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (n >= n_out) return;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokenTile;
  const int n_tile = static_cast<int>(min(static_cast<int64_t>(kTokenTile), n_tokens - t0));
  const float4* x_rows[kTokenTile];
  for (int j = 0; j < kTokenTile; ++j) {
    const int64_t t = t0 + min(j, n_tile - 1);
    x_rows[j] = reinterpret_cast<const float4*>(x + (rows != nullptr ? static_cast<int64_t>(rows[t]) : t) * k);
  }
  const uint4* w_row = reinterpret_cast<const uint4*>(w + n * k);
  float acc[kTokenTile] = {};
  for (int64_t c = lane; c < k / 8; c += 32) {
    const uint4 raw = w_row[c];  // one 16-byte load
    // The 8 weights out of the loaded chunk by memcpy (register moves on the GPU): reading them
    // through a T* into the uint4 would break strict aliasing, which a host compiler exploits.
    T packed[8];
    memcpy(packed, &raw, sizeof(raw));
    float wf[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) wf[e] = ToFloat(packed[e]);
#pragma unroll
    for (int j = 0; j < kTokenTile; ++j) {
      const float4 lo = x_rows[j][2 * c];
      const float4 hi = x_rows[j][2 * c + 1];
      float a = acc[j];
      a += wf[0] * lo.x;
      a += wf[1] * lo.y;
      a += wf[2] * lo.z;
      a += wf[3] * lo.w;
      a += wf[4] * hi.x;
      a += wf[5] * hi.y;
      a += wf[6] * hi.z;
      a += wf[7] * hi.w;
      acc[j] = a;
    }
  }
  const float b = bias != nullptr ? bias[n] : 0.0f;
  for (int j = 0; j < n_tile; ++j) {
    const float sum = WarpSum(acc[j]);
    if (lane == 0) out[(t0 + j) * n_out + n] = bias != nullptr ? sum + b : sum;
  }
}

// Q8_0 weights (dtype.h) against activations quantized the same way, per token and block of
// 32, by the rule of the CPU kernel (cpu/matmul_q8.cc): d = max|x| / 127, q = x * 127 / max|x|
// rounded half to even, within [-127, 127]; a block holding an inf or NaN gets a NaN scale
// (and zero values), so its products are NaN as the F32 kernels' would be. One thread a block.
__global__ void QuantizeRowsQ8Kernel(const float* x, const int32_t* rows, int64_t k, int8_t* values, float* scales) {
  const int64_t t = blockIdx.x;
  const int64_t n_blocks = k / kQ8BlockSize;
  const float* src = x + (rows != nullptr ? static_cast<int64_t>(rows[t]) : t) * k;
  for (int64_t b = threadIdx.x; b < n_blocks; b += blockDim.x) {
    const float* xb = src + b * kQ8BlockSize;
    int8_t* qb = values + t * k + b * kQ8BlockSize;
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < kQ8BlockSize; ++i) {
      amax = fmaxf(amax, fabsf(xb[i]));
      finite = finite && isfinite(xb[i]);  // fmaxf would drop a NaN
    }
    const float inverse = amax == 0.0f ? 0.0f : 127.0f / amax;
    for (int i = 0; i < kQ8BlockSize; ++i) {
      qb[i] = finite ? static_cast<int8_t>(fminf(fmaxf(rintf(xb[i] * inverse), -127.0f), 127.0f)) : 0;
    }
    scales[t * n_blocks + b] = finite ? amax / 127.0f : NAN;
  }
}

// Four int8 products summed into `acc`: exact in int32 however it is computed (dp4a on the GPU).
__device__ __forceinline__ int32_t Dot4(int32_t a, int32_t b, int32_t acc) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
  return __dp4a(a, b, acc);
#else
  for (int i = 0; i < 4; ++i) {
    acc += static_cast<int32_t>(static_cast<int8_t>(a >> (8 * i))) * static_cast<int8_t>(b >> (8 * i));
  }
  return acc;
#endif
}

// The 32 int8 values of a block as eight words: two 16-byte loads when `p` is 16-byte aligned,
// else four bytes at a time (by memcpy: the compiler splits what it cannot prove aligned).
template <bool kAligned16>
__device__ __forceinline__ void LoadBlock(const int8_t* p, int32_t words[8]) {
  if constexpr (kAligned16) {
    const uint4 lo = reinterpret_cast<const uint4*>(p)[0];
    const uint4 hi = reinterpret_cast<const uint4*>(p)[1];
    memcpy(words, &lo, sizeof(lo));
    memcpy(words + 4, &hi, sizeof(hi));
  } else {
    for (int i = 0; i < 8; ++i) memcpy(&words[i], p + 4 * i, sizeof(int32_t));
  }
}

// One warp per weight row, as MatMulWarpKernel: lane l takes blocks l, l + 32, ...; a block's
// 32 products are an exact integer, which becomes f32 times the two scales and is added to the
// lane's sum for its token, blocks in order; WarpSum then reduces the lanes. A token's result
// depends only on its own row, so batching never changes it, and the load width (kAligned16:
// the row's values start 16-byte aligned, a multiple of 8 blocks a row) never changes a bit.
// The activations' blocks always are aligned (their rows are k bytes, k a multiple of 32).
template <bool kAligned16>
__global__ void MatMulQ8WarpKernel(const int8_t* x_values, const float* x_scales, int64_t n_tokens, int64_t k,
                                   const uint8_t* w, int64_t n_out, const float* bias, float* out) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (n >= n_out) return;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokenTile;
  const int n_tile = static_cast<int>(min(static_cast<int64_t>(kTokenTile), n_tokens - t0));
  const int64_t n_blocks = k / kQ8BlockSize;
  int64_t tokens[kTokenTile];
  for (int j = 0; j < kTokenTile; ++j) tokens[j] = t0 + min(j, n_tile - 1);
  const uint8_t* row = w + n * n_blocks * kQ8BlockBytes;
  const int8_t* w_values = reinterpret_cast<const int8_t*>(row + 2 * n_blocks);
  float acc[kTokenTile] = {};
  for (int64_t b = lane; b < n_blocks; b += 32) {
    const float w_scale = Q8BlockScale(row, b);
    int32_t w_words[8];
    LoadBlock<kAligned16>(w_values + b * kQ8BlockSize, w_words);
#pragma unroll
    for (int j = 0; j < kTokenTile; ++j) {
      int32_t x_words[8];
      LoadBlock<true>(x_values + tokens[j] * k + b * kQ8BlockSize, x_words);
      int32_t sum = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) sum = Dot4(w_words[i], x_words[i], sum);
      acc[j] += static_cast<float>(sum) * (w_scale * x_scales[tokens[j] * n_blocks + b]);
    }
  }
  const float bias_n = bias != nullptr ? bias[n] : 0.0f;
  for (int j = 0; j < n_tile; ++j) {
    const float sum = WarpSum(acc[j]);
    if (lane == 0) out[(t0 + j) * n_out + n] = bias != nullptr ? sum + bias_n : sum;
  }
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__global__ void GatherConvertKernel(const float* x, const int32_t* rows, int64_t k, T* dst) {
  const int64_t t = blockIdx.x;
  const float* src = x + (rows != nullptr ? static_cast<int64_t>(rows[t]) : t) * k;
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x) dst[t * k + i] = FromFloat<T>(src[i]);
}

__global__ void AddBiasKernel(float* out, const float* bias, int64_t n_elements, int64_t n_out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n_elements) out[i] += bias[i % n_out];
}

// Bytes of the quantized activations' int8 values, rounded up so that their scales, which
// follow them in the scratch buffer, start 16-byte aligned.
size_t Q8ValueBytes(int64_t n_tokens, int64_t k) { return (static_cast<size_t>(n_tokens * k) + 15) / 16 * 16; }

}  // namespace

cudaError_t LaunchMatMulWarp(const float* x, const int32_t* rows, int64_t n_tokens, int64_t k, const void* w,
                             int dtype, int64_t n_out, const float* bias, float* out, cudaStream_t stream) {
  if (n_tokens == 0 || n_out == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((n_out + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>((n_tokens + kTokenTile - 1) / kTokenTile));
  const int threads = 32 * kWarpsPerBlock;
  // 16-byte weight chunks need k % 8 == 0 (then every row, and every x row, stays aligned).
  if (k % 8 == 0 && dtype == kDTypeF16) {
    return LaunchKernel(MatMulWarpVec8Kernel<__half>, grid, threads, 0, stream, x, rows, n_tokens, k,
                        static_cast<const __half*>(w), n_out, bias, out);
  }
  if (k % 8 == 0 && dtype == kDTypeBF16) {
    return LaunchKernel(MatMulWarpVec8Kernel<__nv_bfloat16>, grid, threads, 0, stream, x, rows, n_tokens, k,
                        static_cast<const __nv_bfloat16*>(w), n_out, bias, out);
  }
  switch (dtype) {
    case kDTypeF16:
      return LaunchKernel(MatMulWarpKernel<__half>, grid, threads, 0, stream, x, rows, n_tokens, k,
                          static_cast<const __half*>(w), n_out, bias, out);
    case kDTypeBF16:
      return LaunchKernel(MatMulWarpKernel<__nv_bfloat16>, grid, threads, 0, stream, x, rows, n_tokens, k,
                          static_cast<const __nv_bfloat16*>(w), n_out, bias, out);
    default:
      return LaunchKernel(MatMulWarpKernel<float>, grid, threads, 0, stream, x, rows, n_tokens, k,
                          static_cast<const float*>(w), n_out, bias, out);
  }
}

size_t Q8ActivationBytes(int64_t n_tokens, int64_t k) {
  return Q8ValueBytes(n_tokens, k) + static_cast<size_t>(n_tokens * (k / kQ8BlockSize)) * sizeof(float);
}

cudaError_t LaunchMatMulQ8(const float* x, const int32_t* rows, int64_t n_tokens, int64_t k, const void* w,
                           int64_t n_out, const float* bias, float* out, void* scratch, cudaStream_t stream) {
  if (n_tokens == 0 || n_out == 0) return cudaSuccess;
  auto* values = static_cast<int8_t*>(scratch);
  auto* scales = reinterpret_cast<float*>(values + Q8ValueBytes(n_tokens, k));
  cudaError_t error = LaunchKernel(QuantizeRowsQ8Kernel, static_cast<unsigned>(n_tokens), 128, 0, stream, x, rows, k,
                                   values, scales);
  if (error != cudaSuccess) return error;
  const dim3 grid(static_cast<unsigned>((n_out + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>((n_tokens + kTokenTile - 1) / kTokenTile));
  const auto* weights = static_cast<const uint8_t*>(w);
  // Rows of a multiple of 8 blocks keep every row's values 16-byte aligned (cudaMalloc'd base).
  if ((k / kQ8BlockSize) % 8 == 0) {
    return LaunchKernel(MatMulQ8WarpKernel<true>, grid, 32 * kWarpsPerBlock, 0, stream, values, scales, n_tokens, k,
                        weights, n_out, bias, out);
  }
  return LaunchKernel(MatMulQ8WarpKernel<false>, grid, 32 * kWarpsPerBlock, 0, stream, values, scales, n_tokens, k,
                      weights, n_out, bias, out);
}

cudaError_t LaunchGatherConvert(const float* x, const int32_t* rows, int64_t n_tokens, int64_t k, int dtype,
                                void* dst, cudaStream_t stream) {
  if (n_tokens == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(n_tokens);
  switch (dtype) {
    case kDTypeF16:
      return LaunchKernel(GatherConvertKernel<__half>, blocks, 256, 0, stream, x, rows, k, static_cast<__half*>(dst));
    case kDTypeBF16:
      return LaunchKernel(GatherConvertKernel<__nv_bfloat16>, blocks, 256, 0, stream, x, rows, k,
                          static_cast<__nv_bfloat16*>(dst));
    default:
      return LaunchKernel(GatherConvertKernel<float>, blocks, 256, 0, stream, x, rows, k, static_cast<float*>(dst));
  }
}

cudaError_t LaunchAddBias(float* out, const float* bias, int64_t n_tokens, int64_t n_out, cudaStream_t stream) {
  const int64_t n = n_tokens * n_out;
  if (n == 0) return cudaSuccess;
  return LaunchKernel(AddBiasKernel, static_cast<unsigned>((n + 255) / 256), 256, 0, stream, out, bias, n, n_out);
}

}  // namespace splitspec::engine::cuda
