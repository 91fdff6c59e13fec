// Backend selection by name for `--device cpu|cuda[:N]` flags: one place that knows whether this
// build has the CUDA backend, so verifier, drafter and the tools need no #ifdefs.
//
// Typical use in a binary: CheckDevice(flag) right after flag parsing (exit 2 with its message on
// error: a bad name, cuda in a CPU-only build, a missing GPU), then CreateBackendByName; every
// thread that drives the backend calls BindCallingThread first, and callers check
// BackendStatus after a forward (the CUDA backend's ops report errors that way).
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_SELECT_BACKEND_H_
#define SPLITSPEC_COMMON_ENGINE_CUDA_SELECT_BACKEND_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/engine/backend.h"

namespace splitspec::engine {

// True when this binary was built with the CUDA backend (a GPU may still be absent).
bool CudaBackendCompiled();

// A parsed device name: "cpu", "cuda" (= cuda:0) or "cuda:N".
struct DeviceSpec {
  bool cuda = false;
  int index = 0;  // CUDA device ordinal (0 for cpu)
  std::string ToString() const;
};

// Syntax only: INVALID_ARGUMENT for other names or a bad index (negative, not a number).
absl::StatusOr<DeviceSpec> ParseDevice(std::string_view device);

// ParseDevice, then whether this process can use the device, without creating a backend:
// UNIMPLEMENTED for cuda in a build without the CUDA backend, UNAVAILABLE when the GPU (or the
// driver) is missing. Messages name the device and say what to do instead.
absl::Status CheckDevice(std::string_view device);

// "cpu" -> CreateCpuBackend(cpu_options); "cuda" or "cuda:N" -> the CUDA backend on device N.
// Errors as CheckDevice; INTERNAL when CUDA or cuBLAS set-up fails.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackendByName(
    std::string_view device, const CpuBackendOptions& cpu_options = {});

// Prepares the calling thread to drive a backend of `device`: the CUDA device becomes the
// thread's current device (CUDA's current device is per thread, and gRPC handlers run on
// threads of their own); for the CPU, `cpu_threads` > 0 becomes the thread's OpenMP team size
// (an OpenMP setting is per thread too). Cheap enough to call before every forward.
absl::Status BindCallingThread(const DeviceSpec& device, int cpu_threads);

// The first error a backend's ops hit (the CUDA backend keeps it sticky, since ops return
// void); always OK for the CPU backend.
absl::Status BackendStatus(const Backend& backend);

// The CUDA stream (a cudaStream_t as void*) the backend's ops run on, for an NCCL
// communicator; nullptr for the CPU backend.
void* BackendStream(const Backend& backend);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_SELECT_BACKEND_H_
