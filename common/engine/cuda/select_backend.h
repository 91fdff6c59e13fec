// Backend selection by name for `--device cpu|cuda` flags: one place that knows whether this
// build has the CUDA backend, so verifier, drafter and the tools need no #ifdefs.
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_SELECT_BACKEND_H_
#define SPLITSPEC_COMMON_ENGINE_CUDA_SELECT_BACKEND_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/engine/backend.h"

namespace splitspec::engine {

// True when this binary was built with the CUDA backend (a GPU may still be absent).
bool CudaBackendCompiled();

// "cpu" -> CreateCpuBackend(); "cuda" or "cuda:N" -> the CUDA backend on device N (default 0).
// INVALID_ARGUMENT for other names; UNIMPLEMENTED for cuda in a build without it; UNAVAILABLE
// when the device is missing.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackendByName(std::string_view device);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_SELECT_BACKEND_H_
