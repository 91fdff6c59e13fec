// CUDA kernel emulation on the CPU: lets this folder's kernel sources (.cu) compile as ordinary
// C++ (g++ or clang++) and run with CUDA's execution model, so that a machine without a GPU
// runs the CUDA backend's own code in tests. A test harness, not a product backend: it is slow
// (every CUDA thread is a fiber) and shows correctness, never speed.
//
// Execution model, as CUDA defines it for what the kernels here use:
//  - a launch runs every block of its grid; the blocks run one after another (CUDA promises no
//    order between blocks, so a kernel that depends on one is wrong either way);
//  - the threads of a block run concurrently: each is a fiber with its own stack, switched at
//    every synchronisation point, so __syncthreads() is a real barrier (no thread passes it
//    before every live thread of the block reached it) and a thread that skips one reads what
//    the others had not written yet;
//  - warp collectives (__shfl*_sync, __ballot_sync, __any_sync, __all_sync, __syncwarp) are
//    lock-step: they complete when every lane named in the mask arrived with the same
//    collective, and each lane gets the value CUDA defines. A mask naming a lane that exited,
//    lanes meeting at different collectives, or a source lane outside the mask is reported as a
//    kernel fault (the launch fails with cudaErrorLaunchFailure, sticky as on a GPU), and so is
//    a deadlock (threads waiting at a barrier that others can never reach);
//  - __shared__ variables are per block; extern (dynamic) shared memory is reached through
//    DynamicSharedMemory<T>() (launch.cuh) and is filled with 0xff (NaN) at each block start, so
//    a read before any write shows up;
//  - atomics are atomic; __half / __nv_bfloat16 convert with round-to-nearest-even as CUDA's
//    __float2half_rn / __float2bfloat16_rn (NaN becomes the canonical 0x7fff of both).
// Under ThreadSanitizer (SPLITSPEC_CUDA_EMULATION_TSAN) every CUDA thread is a TSan fiber and
// the only happens-before edges between them are the ones CUDA gives: __syncthreads, __syncwarp,
// atomics, and the start and end of the launch. A missing barrier is then reported as a race.
//
// The supported subset (keep the kernels inside it; anything else fails to compile):
//  - qualifiers __global__ __device__ __host__ __forceinline__ __shared__ (static only: dynamic
//    shared memory via DynamicSharedMemory<T>()), __restrict__, __launch_bounds__;
//  - threadIdx, blockIdx, blockDim, gridDim (read only), warpSize, dim3, uint3, float4, uint4;
//  - __syncthreads, __syncwarp, __threadfence; the warp collectives above (values of at most 8
//    bytes, width a power of two up to 32);
//  - atomicAdd / atomicMax / atomicMin / atomicExch / atomicCAS on int, unsigned, unsigned long long
//    (atomicAdd and atomicExch on float too);
//  - __half, __nv_bfloat16 and their float conversions; the single-precision math of <cmath>
//    plus rsqrtf, and min / max;
//  - launches only through LaunchKernel (launch.cuh), never <<< >>>.
// Not modelled (docs/architecture.md lists them under "Needs a GPU"): timing, memory coalescing,
// out-of-bounds accesses on the device (the host heap does not fault where a GPU would), the
// weak ordering of plain global-memory accesses between blocks, cooperative groups, tensor cores.
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_EMULATION_KERNEL_MODEL_H_
#define SPLITSPEC_COMMON_ENGINE_CUDA_EMULATION_KERNEL_MODEL_H_

#include <math.h>

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "common/engine/cuda/emulation/runtime_api.h"

// ---- qualifiers ---------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Blocks run one at a time per process (launches are serialised), so a function-local static
// is exactly one block's shared variable.
#define __shared__ static

// ---- built-in variables ---------------------------------------------------------------------
#define threadIdx (::splitspec::cuda_emulation::ThreadIdx())
#define blockIdx (::splitspec::cuda_emulation::BlockIdx())
#define blockDim (::splitspec::cuda_emulation::BlockDim())
#define gridDim (::splitspec::cuda_emulation::GridDim())
constexpr int warpSize = 32;

struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};

// ---- math -----------------------------------------------------------------------------------
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }

// ---- 16-bit floating point --------------------------------------------------------------------
struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};

namespace splitspec::cuda_emulation {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float HalfBitsToFloat(uint16_t h) {
  const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0x1f) return mantissa != 0 ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);  // subnormal or zero
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

inline uint16_t FloatToHalfBitsRn(float f) {
  const uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0x7fff;                 // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;        // >= 65520 rounds to infinity
  if (magnitude < 0x38800000u) {                              // below 2^-14: a subnormal result
    // Scaling by 2^24 is exact; nearbyint rounds half to even in the default rounding mode.
    return sign | static_cast<uint16_t>(std::nearbyint(std::fabs(f) * 16777216.0f));
  }
  const uint32_t rebiased = magnitude - (112u << 23);  // exponent bias 127 -> 15
  return sign | static_cast<uint16_t>((rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13);
}

inline float Bf16BitsToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t FloatToBf16BitsRn(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace splitspec::cuda_emulation

inline float __half2float(__half h) { return splitspec::cuda_emulation::HalfBitsToFloat(h.bits); }
inline __half __float2half_rn(float f) { return __half{splitspec::cuda_emulation::FloatToHalfBitsRn(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return splitspec::cuda_emulation::Bf16BitsToFloat(b.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16{splitspec::cuda_emulation::FloatToBf16BitsRn(f)};
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }

// ---- synchronisation and warp collectives -------------------------------------------------------
namespace splitspec::cuda_emulation {

uint3 ThreadIdx();
uint3 BlockIdx();
dim3 BlockDim();
dim3 GridDim();

enum class WarpOp { kShflIdx, kShflUp, kShflDown, kShflXor, kBallot, kSync };

// Every warp collective: the lane's 8-byte value in, its result out.
uint64_t WarpCollective(WarpOp op, unsigned mask, uint64_t value, int param, int width);
void BlockBarrier();
// Reports a use of the emulated device outside the supported subset as a kernel fault.
void KernelFault(const char* what);

template <typename T>
T Shuffle(WarpOp op, unsigned mask, T value, int param, int width) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "warp collectives move values of <= 8 bytes");
  uint64_t in = 0;
  std::memcpy(&in, &value, sizeof(T));
  const uint64_t out = WarpCollective(op, mask, in, param, width);
  T result;
  std::memcpy(&result, &out, sizeof(T));
  return result;
}

// The emulated device's shared-memory arena of the running block (dynamic shared memory).
void* DynamicSharedBase();

}  // namespace splitspec::cuda_emulation

inline void __syncthreads() { splitspec::cuda_emulation::BlockBarrier(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  splitspec::cuda_emulation::WarpCollective(splitspec::cuda_emulation::WarpOp::kSync, mask, 0, 0, 32);
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

template <typename T>
T __shfl_sync(unsigned mask, T value, int src_lane, int width = warpSize) {
  return splitspec::cuda_emulation::Shuffle(splitspec::cuda_emulation::WarpOp::kShflIdx, mask, value, src_lane, width);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
  return splitspec::cuda_emulation::Shuffle(splitspec::cuda_emulation::WarpOp::kShflUp, mask, value,
                                            static_cast<int>(delta), width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
  return splitspec::cuda_emulation::Shuffle(splitspec::cuda_emulation::WarpOp::kShflDown, mask, value,
                                            static_cast<int>(delta), width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = warpSize) {
  return splitspec::cuda_emulation::Shuffle(splitspec::cuda_emulation::WarpOp::kShflXor, mask, value, lane_mask,
                                            width);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return static_cast<unsigned>(splitspec::cuda_emulation::WarpCollective(
      splitspec::cuda_emulation::WarpOp::kBallot, mask, predicate != 0 ? 1 : 0, 0, 32));
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) == mask; }

// ---- atomics (device-wide; relaxed as CUDA's) ----------------------------------------------------
#define SPLITSPEC_EMULATED_INTEGER_ATOMICS(T)                                                               \
  inline T atomicAdd(T* address, T value) { return __atomic_fetch_add(address, value, __ATOMIC_RELAXED); } \
  inline T atomicExch(T* address, T value) { return __atomic_exchange_n(address, value, __ATOMIC_RELAXED); } \
  inline T atomicCAS(T* address, T compare, T value) {                                                     \
    __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);      \
    return compare;                                                                                        \
  }                                                                                                        \
  inline T atomicMax(T* address, T value) {                                                                \
    T old = __atomic_load_n(address, __ATOMIC_RELAXED);                                                    \
    while (old < value &&                                                                                  \
           !__atomic_compare_exchange_n(address, &old, value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { \
    }                                                                                                      \
    return old;                                                                                            \
  }                                                                                                        \
  inline T atomicMin(T* address, T value) {                                                                \
    T old = __atomic_load_n(address, __ATOMIC_RELAXED);                                                    \
    while (old > value &&                                                                                  \
           !__atomic_compare_exchange_n(address, &old, value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { \
    }                                                                                                      \
    return old;                                                                                            \
  }
SPLITSPEC_EMULATED_INTEGER_ATOMICS(int)
SPLITSPEC_EMULATED_INTEGER_ATOMICS(unsigned)
SPLITSPEC_EMULATED_INTEGER_ATOMICS(unsigned long long)
#undef SPLITSPEC_EMULATED_INTEGER_ATOMICS

inline float atomicAdd(float* address, float value) {
  float old;
  __atomic_load(address, &old, __ATOMIC_RELAXED);
  float updated = old + value;
  while (!__atomic_compare_exchange(address, &old, &updated, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    updated = old + value;
  }
  return old;
}
inline float atomicExch(float* address, float value) {
  float old;
  __atomic_exchange(address, &value, &old, __ATOMIC_RELAXED);
  return old;
}

// ---- launches -------------------------------------------------------------------------------------
namespace splitspec::cuda_emulation {

// One launch, type-erased: `run_thread` runs the kernel body for the calling CUDA thread.
struct KernelLaunch {
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes = 0;
  cudaStream_t stream = nullptr;
  void (*run_thread)(const void* payload) = nullptr;
  const void* payload = nullptr;
};

// Runs the launch (or, inside a stream capture, records it with `arguments`, which keeps the
// payload alive for replays); the result is what cudaGetLastError would report right after a
// launch on a GPU.
cudaError_t Launch(const KernelLaunch& launch, std::shared_ptr<const void> arguments);
// Runs every block of a validated launch now (the executor).
cudaError_t RunKernel(const KernelLaunch& launch);

template <typename... Params>
struct KernelCall {
  void (*kernel)(Params...);
  std::tuple<std::decay_t<Params>...> args;
  // Every CUDA thread gets its own copy of the arguments, as kernels receive them by value.
  static void RunThread(const void* payload) {
    const auto* call = static_cast<const KernelCall*>(payload);
    std::apply(call->kernel, call->args);
  }
};

template <typename... Params, typename... Args>
cudaError_t LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                         Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel argument count");
  auto call = std::make_shared<KernelCall<Params...>>(
      KernelCall<Params...>{kernel, std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)});
  const KernelLaunch launch{grid, block, shared_bytes, stream, &KernelCall<Params...>::RunThread, call.get()};
  return Launch(launch, std::move(call));
}

}  // namespace splitspec::cuda_emulation

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_EMULATION_KERNEL_MODEL_H_
