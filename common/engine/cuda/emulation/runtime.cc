// The emulated CUDA runtime (see runtime_api.h): device memory as registered host memory,
// streams that execute at enqueue, events, stream capture into replayable graphs, and CUDA's
// error reporting (per-thread last error, sticky kernel faults).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/engine/cuda/emulation/kernel_model.h"

struct CUstream_st {
  bool capturing = false;
  bool capture_invalidated = false;
  CUgraph_st* graph = nullptr;  // being captured into
};
struct CUevent_st {
  std::chrono::steady_clock::time_point time;
  bool recorded = false;
};
struct CUgraph_st {
  std::vector<std::function<cudaError_t()>> nodes;
};
struct CUgraphExec_st {
  std::vector<std::function<cudaError_t()>> nodes;
};

namespace splitspec::cuda_emulation {
namespace {

// The emulated device's memory size: SPLITSPEC_CUDA_EMULATION_MEMORY_MB, default 4096, so an
// out-of-memory path can be exercised like a GPU's.
size_t DeviceMemoryLimit() {
  static const size_t limit = [] {
    const char* env = std::getenv("SPLITSPEC_CUDA_EMULATION_MEMORY_MB");
    const long long mb = env != nullptr ? std::atoll(env) : 4096;
    return static_cast<size_t>(mb > 0 ? mb : 4096) << 20;
  }();
  return limit;
}

struct DeviceState {
  std::mutex mutex;
  std::map<uintptr_t, size_t> allocations;  // start -> bytes
  size_t allocated = 0;
  std::set<cudaStream_t> streams;
  int capturing_streams = 0;
  std::string sticky_message;
};

DeviceState& Device() {
  static DeviceState* state = new DeviceState;  // outlives static destructors of other files
  return *state;
}

std::atomic<bool> g_sticky{false};
thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t Fail(cudaError_t error) {
  if (error != cudaSuccess) t_last_error = error;
  return error;
}

bool IsDeviceRangeLocked(DeviceState& device, const void* pointer, size_t bytes) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  auto it = device.allocations.upper_bound(address);
  if (it == device.allocations.begin()) return false;
  --it;
  return address >= it->first && address + bytes <= it->first + it->second && address + bytes >= address;
}

// Calls a stream capture refuses (they would synchronise or allocate) invalidate every
// capture in progress, as with cudaStreamCaptureModeGlobal / ThreadLocal on a GPU.
bool RefusedByCapture() {
  DeviceState& device = Device();
  std::lock_guard<std::mutex> lock(device.mutex);
  if (device.capturing_streams == 0) return false;
  for (cudaStream_t stream : device.streams) {
    if (stream->capturing) stream->capture_invalidated = true;
  }
  return true;
}

bool ValidStream(cudaStream_t stream) {
  if (stream == nullptr) return true;
  DeviceState& device = Device();
  std::lock_guard<std::mutex> lock(device.mutex);
  return device.streams.count(stream) != 0;
}

// Checks a copy's device sides and performs it (now, or at graph replay).
cudaError_t CheckCopy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  DeviceState& device = Device();
  std::lock_guard<std::mutex> lock(device.mutex);
  const bool dst_device = IsDeviceRangeLocked(device, dst, bytes);
  const bool src_device = IsDeviceRangeLocked(device, src, bytes);
  switch (kind) {
    case cudaMemcpyHostToDevice: return dst_device ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost: return src_device ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice: return dst_device && src_device ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyHostToHost: return cudaSuccess;
    case cudaMemcpyDefault: return cudaSuccess;
  }
  return cudaErrorInvalidValue;
}

}  // namespace

bool IsDeviceRange(const void* pointer, size_t bytes) {
  DeviceState& device = Device();
  std::lock_guard<std::mutex> lock(device.mutex);
  return IsDeviceRangeLocked(device, pointer, bytes);
}

void SetStickyError(const char* what) {
  std::fprintf(stderr, "cuda emulation: %s\n", what);
  DeviceState& device = Device();
  std::lock_guard<std::mutex> lock(device.mutex);
  if (device.sticky_message.empty()) device.sticky_message = what;
  g_sticky = true;
}

cudaError_t StickyError() { return g_sticky ? cudaErrorLaunchFailure : cudaSuccess; }

cudaError_t Launch(const KernelLaunch& launch, std::shared_ptr<const void> arguments) {
  if (g_sticky) return Fail(cudaErrorLaunchFailure);
  if (!ValidStream(launch.stream)) return Fail(cudaErrorInvalidResourceHandle);
  if (launch.stream != nullptr && launch.stream->capturing) {
    KernelLaunch recorded = launch;
    launch.stream->graph->nodes.push_back([recorded, arguments]() { return RunKernel(recorded); });
    return cudaSuccess;
  }
  return Fail(RunKernel(launch));
}

}  // namespace splitspec::cuda_emulation

using splitspec::cuda_emulation::Device;
using splitspec::cuda_emulation::DeviceMemoryLimit;
using splitspec::cuda_emulation::DeviceState;
using splitspec::cuda_emulation::Fail;
using splitspec::cuda_emulation::g_sticky;
using splitspec::cuda_emulation::t_last_error;

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure (emulated kernel fault; see stderr)";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched: return "the capture was not initiated in this stream";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  if (g_sticky) return cudaErrorLaunchFailure;
  const cudaError_t error = t_last_error;
  t_last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() { return g_sticky ? cudaErrorLaunchFailure : t_last_error; }

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return Fail(cudaErrorInvalidValue);
  *count = 1;  // the emulated device
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : Fail(cudaErrorInvalidDevice); }

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return Fail(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (splitspec::cuda_emulation::RefusedByCapture()) return Fail(cudaErrorStreamCaptureUnsupported);
  return g_sticky ? cudaErrorLaunchFailure : cudaSuccess;
}

cudaError_t cudaDeviceReset() {
  DeviceState& device = Device();
  std::lock_guard<std::mutex> lock(device.mutex);
  for (auto& [start, bytes] : device.allocations) std::free(reinterpret_cast<void*>(start));
  device.allocations.clear();
  device.allocated = 0;
  device.sticky_message.clear();
  g_sticky = false;
  t_last_error = cudaSuccess;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  if (g_sticky) return cudaErrorLaunchFailure;
  if (pointer == nullptr) return Fail(cudaErrorInvalidValue);
  if (splitspec::cuda_emulation::RefusedByCapture()) return Fail(cudaErrorStreamCaptureUnsupported);
  DeviceState& device = Device();
  std::lock_guard<std::mutex> lock(device.mutex);
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  if (device.allocated + rounded > DeviceMemoryLimit()) return Fail(cudaErrorMemoryAllocation);
  void* memory = std::aligned_alloc(256, rounded);  // cudaMalloc aligns to at least 256 bytes
  if (memory == nullptr) return Fail(cudaErrorMemoryAllocation);
  device.allocations[reinterpret_cast<uintptr_t>(memory)] = bytes;
  device.allocated += rounded;
  *pointer = memory;
  return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) {
  if (pointer == nullptr) return cudaSuccess;
  if (splitspec::cuda_emulation::RefusedByCapture()) return Fail(cudaErrorStreamCaptureUnsupported);
  DeviceState& device = Device();
  std::lock_guard<std::mutex> lock(device.mutex);
  auto it = device.allocations.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == device.allocations.end()) return Fail(cudaErrorInvalidValue);
  device.allocated -= (std::max<size_t>(it->second, 1) + 255) / 256 * 256;
  device.allocations.erase(it);
  std::free(pointer);
  return g_sticky ? cudaErrorLaunchFailure : cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (splitspec::cuda_emulation::RefusedByCapture()) return Fail(cudaErrorStreamCaptureUnsupported);
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (g_sticky) return cudaErrorLaunchFailure;
  if (!splitspec::cuda_emulation::ValidStream(stream)) return Fail(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (const cudaError_t error = splitspec::cuda_emulation::CheckCopy(dst, src, bytes, kind); error != cudaSuccess) {
    return Fail(error);
  }
  if (stream != nullptr && stream->capturing) {
    if (kind != cudaMemcpyDeviceToDevice) {  // host memory in a capture: refused (pageable) here
      stream->capture_invalidated = true;
      return Fail(cudaErrorStreamCaptureUnsupported);
    }
    stream->graph->nodes.push_back([dst, src, bytes]() {
      std::memmove(dst, src, bytes);
      return cudaSuccess;
    });
    return cudaSuccess;
  }
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  if (splitspec::cuda_emulation::RefusedByCapture()) return Fail(cudaErrorStreamCaptureUnsupported);
  return cudaMemsetAsync(dst, value, bytes, nullptr);
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (g_sticky) return cudaErrorLaunchFailure;
  if (!splitspec::cuda_emulation::ValidStream(stream)) return Fail(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (!splitspec::cuda_emulation::IsDeviceRange(dst, bytes)) return Fail(cudaErrorInvalidValue);
  if (stream != nullptr && stream->capturing) {
    stream->graph->nodes.push_back([dst, value, bytes]() {
      std::memset(dst, value, bytes);
      return cudaSuccess;
    });
    return cudaSuccess;
  }
  std::memset(dst, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (stream == nullptr || flags > cudaStreamNonBlocking) return Fail(cudaErrorInvalidValue);
  DeviceState& device = Device();
  std::lock_guard<std::mutex> lock(device.mutex);
  *stream = new CUstream_st;
  device.streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  DeviceState& device = Device();
  std::lock_guard<std::mutex> lock(device.mutex);
  if (stream == nullptr || device.streams.erase(stream) == 0) return Fail(cudaErrorInvalidResourceHandle);
  if (stream->capturing) --device.capturing_streams;
  delete stream->graph;
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!splitspec::cuda_emulation::ValidStream(stream)) return Fail(cudaErrorInvalidResourceHandle);
  if (splitspec::cuda_emulation::RefusedByCapture()) return Fail(cudaErrorStreamCaptureUnsupported);
  return g_sticky ? cudaErrorLaunchFailure : cudaSuccess;  // work ran at enqueue
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  if (event == nullptr) return Fail(cudaErrorInvalidValue);
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return Fail(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr || !splitspec::cuda_emulation::ValidStream(stream)) return Fail(cudaErrorInvalidResourceHandle);
  event->time = std::chrono::steady_clock::now();
  event->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return Fail(cudaErrorInvalidResourceHandle);
  return g_sticky ? cudaErrorLaunchFailure : cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr || start == nullptr || end == nullptr) return Fail(cudaErrorInvalidValue);
  if (!start->recorded || !end->recorded) return Fail(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  (void)mode;
  if (stream == nullptr) return Fail(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot capture
  DeviceState& device = Device();
  std::lock_guard<std::mutex> lock(device.mutex);
  if (device.streams.count(stream) == 0) return Fail(cudaErrorInvalidResourceHandle);
  if (stream->capturing) return Fail(cudaErrorStreamCaptureUnsupported);
  stream->capturing = true;
  stream->capture_invalidated = false;
  stream->graph = new CUgraph_st;
  ++device.capturing_streams;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (graph == nullptr) return Fail(cudaErrorInvalidValue);
  DeviceState& device = Device();
  std::lock_guard<std::mutex> lock(device.mutex);
  if (stream == nullptr || device.streams.count(stream) == 0) return Fail(cudaErrorInvalidResourceHandle);
  if (!stream->capturing) return Fail(cudaErrorStreamCaptureUnmatched);
  stream->capturing = false;
  --device.capturing_streams;
  CUgraph_st* captured = stream->graph;
  stream->graph = nullptr;
  if (stream->capture_invalidated) {
    delete captured;
    *graph = nullptr;
    return Fail(cudaErrorStreamCaptureInvalidated);
  }
  *graph = captured;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  (void)flags;
  if (exec == nullptr || graph == nullptr) return Fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (graph == nullptr) return Fail(cudaErrorInvalidValue);
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (exec == nullptr) return Fail(cudaErrorInvalidValue);
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr || !splitspec::cuda_emulation::ValidStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle);
  }
  if (g_sticky) return cudaErrorLaunchFailure;
  for (const auto& node : exec->nodes) {
    if (const cudaError_t error = node(); error != cudaSuccess) return Fail(error);
  }
  return cudaSuccess;
}
