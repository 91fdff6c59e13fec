// The one way this folder's kernels are launched and reach dynamic shared memory, so that the
// same sources build with nvcc (GPU) and as plain C++ over the CPU emulation
// (SPLITSPEC_CUDA_EMULATION, see emulation/kernel_model.h for the supported subset).
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_LAUNCH_CUH_
#define SPLITSPEC_COMMON_ENGINE_CUDA_LAUNCH_CUH_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace splitspec::engine::cuda {

// kernel<<<grid, block, shared_bytes, stream>>>(args...), then the launch's error (what
// cudaGetLastError reports right after it).
template <typename... Params, typename... Args>
cudaError_t LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                         Args&&... args) {
#if defined(SPLITSPEC_CUDA_EMULATION)
  return ::splitspec::cuda_emulation::LaunchKernel(kernel, grid, block, shared_bytes, stream,
                                                   std::forward<Args>(args)...);
#else
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  return cudaGetLastError();
#endif
}

// The block's dynamic shared memory (the launch's shared_bytes), 16-byte aligned.
template <typename T>
__device__ __forceinline__ T* DynamicSharedMemory() {
#if defined(SPLITSPEC_CUDA_EMULATION)
  return static_cast<T*>(::splitspec::cuda_emulation::DynamicSharedBase());
#else
  extern __shared__ float4 splitspec_dynamic_shared[];
  return reinterpret_cast<T*>(splitspec_dynamic_shared);
#endif
}

}  // namespace splitspec::engine::cuda

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_LAUNCH_CUH_
