// The CUDA emulation's execution model (common/engine/cuda/emulation/kernel_model.h), checked
// with small kernels: barriers are real, warp collectives are lock-step with CUDA's lane
// arithmetic, misuse is a kernel fault (sticky until cudaDeviceReset), launch configurations
// are validated as on a GPU, the 16-bit conversions agree with the engine's, and the emulated
// runtime refuses what a GPU refuses. Emulation build only.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/engine/cuda/launch.cuh"
#include "common/engine/dtype.h"

namespace splitspec::engine::cuda {
namespace {

constexpr int kBlock = 256;

// out[b * kBlock + t] = the value thread t + 1 of block b stored (wrapping), read after a
// barrier, or without one when `with_barrier` is false.
__global__ void NeighbourKernel(int* out, bool with_barrier) {
  __shared__ int values[kBlock];
  const int t = threadIdx.x;
  values[t] = static_cast<int>(blockIdx.x) * 1000 + t;
  if (with_barrier) __syncthreads();
  out[blockIdx.x * kBlock + t] = values[(t + 1) % kBlock];
}

std::vector<int> RunNeighbour(bool with_barrier, int blocks) {
  int* out = nullptr;
  EXPECT_EQ(cudaMalloc(&out, blocks * kBlock * sizeof(int)), cudaSuccess);
  EXPECT_EQ(LaunchKernel(NeighbourKernel, blocks, kBlock, 0, nullptr, out, with_barrier), cudaSuccess);
  std::vector<int> host(blocks * kBlock);
  EXPECT_EQ(cudaMemcpy(host.data(), out, host.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(out);
  return host;
}

TEST(CudaEmulationTest, SyncthreadsIsABarrierAndSharedMemoryIsPerBlock) {
  const std::vector<int> out = RunNeighbour(true, 3);
  for (int b = 0; b < 3; ++b) {
    for (int t = 0; t < kBlock; ++t) ASSERT_EQ(out[b * kBlock + t], b * 1000 + (t + 1) % kBlock) << b << " " << t;
  }
}

#if !defined(__SANITIZE_THREAD__)  // the same kernel is a data race, which TSan reports by design
TEST(CudaEmulationTest, AMissingBarrierReadsWhatOtherThreadsHaveNotWrittenYet) {
  const std::vector<int> out = RunNeighbour(false, 2);
  int stale = 0;
  for (int t = 0; t < kBlock; ++t) stale += out[kBlock + t] != 1000 + (t + 1) % kBlock;
  EXPECT_GT(stale, 0) << "threads must run concurrently, not one after another";
}
#endif

struct ShuffleResults {
  int xor1, xor16, up3, down5, idx7, idx_width8, ballot;
  int any, all;
};

__global__ void ShuffleKernel(ShuffleResults* out) {
  const int lane = threadIdx.x % 32;
  const int v = 100 + lane;
  ShuffleResults r;
  r.xor1 = __shfl_xor_sync(0xffffffffu, v, 1);
  r.xor16 = __shfl_xor_sync(0xffffffffu, v, 16);
  r.up3 = __shfl_up_sync(0xffffffffu, v, 3);
  r.down5 = __shfl_down_sync(0xffffffffu, v, 5);
  r.idx7 = __shfl_sync(0xffffffffu, v, 7);
  r.idx_width8 = __shfl_sync(0xffffffffu, v, 2, 8);
  r.ballot = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
  r.any = __any_sync(0xffffffffu, lane == 31);
  r.all = __all_sync(0xffffffffu, lane < 31);
  out[threadIdx.x] = r;
}

TEST(CudaEmulationTest, WarpCollectivesFollowCudasLaneArithmetic) {
  ShuffleResults* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 64 * sizeof(ShuffleResults)), cudaSuccess);
  ASSERT_EQ(LaunchKernel(ShuffleKernel, 1, 64, 0, nullptr, out), cudaSuccess);
  std::vector<ShuffleResults> host(64);
  ASSERT_EQ(cudaMemcpy(host.data(), out, 64 * sizeof(ShuffleResults), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(out);
  unsigned ballot = 0;
  for (int lane = 0; lane < 32; lane += 3) ballot |= 1u << lane;
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    const ShuffleResults& r = host[t];
    EXPECT_EQ(r.xor1, 100 + (lane ^ 1)) << t;
    EXPECT_EQ(r.xor16, 100 + (lane ^ 16)) << t;
    EXPECT_EQ(r.up3, 100 + (lane >= 3 ? lane - 3 : lane)) << t;
    EXPECT_EQ(r.down5, 100 + (lane + 5 < 32 ? lane + 5 : lane)) << t;
    EXPECT_EQ(r.idx7, 107) << t;
    EXPECT_EQ(r.idx_width8, 100 + lane / 8 * 8 + 2) << t;
    EXPECT_EQ(static_cast<unsigned>(r.ballot), ballot) << t;
    EXPECT_EQ(r.any, 1) << t;
    EXPECT_EQ(r.all, 0) << t;
  }
}

__global__ void AtomicKernel(int* counter, float* sum) {
  atomicAdd(counter, 1);
  atomicAdd(sum, 0.5f);
}

TEST(CudaEmulationTest, AtomicsCountEveryThreadOfEveryBlock) {
  int* counter = nullptr;
  float* sum = nullptr;
  ASSERT_EQ(cudaMalloc(&counter, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&sum, sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(counter, 0, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(sum, 0, sizeof(float)), cudaSuccess);
  ASSERT_EQ(LaunchKernel(AtomicKernel, 5, 96, 0, nullptr, counter, sum), cudaSuccess);
  int count = 0;
  float total = 0;
  ASSERT_EQ(cudaMemcpy(&count, counter, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&total, sum, sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(count, 5 * 96);
  EXPECT_EQ(total, 5 * 96 * 0.5f);
  cudaFree(counter);
  cudaFree(sum);
}

__global__ void DynamicSharedKernel(float* out) {
  float* shared = DynamicSharedMemory<float>();
  out[threadIdx.x] = shared[threadIdx.x];  // never written: reads the block's initial contents
}

TEST(CudaEmulationTest, DynamicSharedMemoryStartsAsNaN) {
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 32 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(LaunchKernel(DynamicSharedKernel, 1, 32, 32 * sizeof(float), nullptr, out), cudaSuccess);
  std::vector<float> host(32);
  ASSERT_EQ(cudaMemcpy(host.data(), out, 32 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (float v : host) EXPECT_TRUE(std::isnan(v));
  cudaFree(out);
}

__global__ void EmptyKernel() {}

TEST(CudaEmulationTest, LaunchConfigurationsAreValidatedAsOnAGpu) {
  EXPECT_EQ(LaunchKernel(EmptyKernel, 1, 1025, 0, nullptr), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "configuration errors are not sticky";
  EXPECT_EQ(LaunchKernel(EmptyKernel, 0, 32, 0, nullptr), cudaErrorInvalidConfiguration);
  EXPECT_EQ(LaunchKernel(EmptyKernel, dim3(1, 65536), 32, 0, nullptr), cudaErrorInvalidConfiguration);
  EXPECT_EQ(LaunchKernel(EmptyKernel, 1, 32, 64 * 1024, nullptr), cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT_EQ(LaunchKernel(EmptyKernel, 1, dim3(32, 32), 48 * 1024, nullptr), cudaSuccess);
}

// Lanes 16..31 of warp 0 leave; 0..15 then shuffle with a full mask.
__global__ void ExitedLaneShuffleKernel(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}

// Half a warp waits at __syncthreads, the other half at a full-warp shuffle: neither completes.
__global__ void DeadlockKernel(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
  }
}

TEST(CudaEmulationTest, MisusedCollectivesAreStickyKernelFaults) {
  int* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 32 * sizeof(int)), cudaSuccess);
  EXPECT_EQ(LaunchKernel(ExitedLaneShuffleKernel, 1, 32, 0, nullptr, out), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure) << "kernel faults stay until the device is reset";
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, 32 * sizeof(int)), cudaSuccess);
  EXPECT_EQ(LaunchKernel(DeadlockKernel, 1, 32, 0, nullptr, out), cudaErrorLaunchFailure);
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  // The fibers are usable again.
  const std::vector<int> ok = RunNeighbour(true, 1);
  EXPECT_EQ(ok[0], 1);
}

TEST(CudaEmulationTest, HalfAndBfloat16ConversionsAgreeWithTheEngine) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float from_half = __half2float(__half{h}), expected_half = F16ToF32(h);
    const float from_bf16 = __bfloat162float(__nv_bfloat16{h}), expected_bf16 = BF16ToF32(h);
    if (std::isnan(expected_half)) {
      EXPECT_TRUE(std::isnan(from_half)) << bits;
    } else {
      EXPECT_EQ(std::memcmp(&from_half, &expected_half, 4), 0) << bits;
    }
    if (std::isnan(expected_bf16)) {
      EXPECT_TRUE(std::isnan(from_bf16)) << bits;
    } else {
      EXPECT_EQ(std::memcmp(&from_bf16, &expected_bf16, 4), 0) << bits;
    }
  }
  // float -> 16 bits, round to nearest even: every float bit pattern in steps that cross every
  // rounding boundary class (subnormal, normal, overflow, ties).
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4093) {
    float f;
    const uint32_t b32 = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b32, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(__float2half_rn(f).bits, F32ToF16(f)) << std::hexfloat << f;
    ASSERT_EQ(__float2bfloat16_rn(f).bits, F32ToBF16(f)) << std::hexfloat << f;
  }
  for (float tie : {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 0x1p-25f, 3 * 0x1p-25f, 1.0f + 0x1p-8f, 65520.0f}) {
    EXPECT_EQ(__float2half_rn(tie).bits, F32ToF16(tie)) << std::hexfloat << tie;
    EXPECT_EQ(__float2bfloat16_rn(tie).bits, F32ToBF16(tie)) << std::hexfloat << tie;
  }
}

TEST(CudaEmulationTest, RuntimeRefusesHostPointersAndOutOfRangeCopies) {
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  std::vector<uint8_t> host(128);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 64, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 65, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 64, 64, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemsetAsync(host.data(), 0, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaSetDevice(1), cudaErrorInvalidDevice);
  cudaGetLastError();
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

TEST(CudaEmulationTest, StreamCaptureRefusesAllocationAndReplaysLaunches) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  int* counter = nullptr;
  float* sum = nullptr;
  ASSERT_EQ(cudaMalloc(&counter, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&sum, sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(counter, 0, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void* refused = nullptr;
  EXPECT_EQ(cudaMalloc(&refused, 16), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();

  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(LaunchKernel(AtomicKernel, 2, 32, 0, stream, counter, sum), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  int count = -1;
  ASSERT_EQ(cudaMemcpy(&count, counter, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(count, 0) << "capturing records, it does not run";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&count, counter, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(count, 2 * 2 * 32);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace splitspec::engine::cuda
