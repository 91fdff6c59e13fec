// Backend selection by name (see select_backend.h). Compiled in every build; the CUDA branch
// exists only when SPLITSPEC_HAVE_CUDA is defined.
#include "common/engine/cuda/select_backend.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#ifdef SPLITSPEC_HAVE_CUDA
#include "common/engine/cuda/cuda_backend.h"
#endif

namespace splitspec::engine {

bool CudaBackendCompiled() {
#ifdef SPLITSPEC_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackendByName(std::string_view device_name) {
  // Debian's Abseil has its own string_view type; work on a std::string.
  const std::string device(device_name);
  if (device == "cpu") return CreateCpuBackend();
  if (device != "cuda" && !absl::StartsWith(device, "cuda:")) {
    return absl::InvalidArgumentError(absl::StrCat("unknown device '", device, "' (cpu, cuda or cuda:N)"));
  }
  int index = 0;
  if (device.size() > 5 && !absl::SimpleAtoi(device.substr(5), &index)) {
    return absl::InvalidArgumentError(absl::StrCat("bad CUDA device index in '", device, "'"));
  }
#ifdef SPLITSPEC_HAVE_CUDA
  CudaBackendOptions options;
  options.device = index;
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CreateCudaBackend(options);
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<Backend>(std::move(*backend));
#else
  return absl::UnimplementedError(
      absl::StrCat("device '", device, "' needs the CUDA backend; this build has none (SPLITSPEC_CUDA=OFF or no toolkit)"));
#endif
}

}  // namespace splitspec::engine
