// Backend selection by name (see select_backend.h). Compiled in every build; the CUDA branches
// exist only when SPLITSPEC_HAVE_CUDA is defined.
#include "common/engine/cuda/select_backend.h"

#include <omp.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#ifdef SPLITSPEC_HAVE_CUDA
#include <cuda_runtime.h>

#include "common/engine/cuda/cuda_backend.h"
#include "common/engine/cuda/cuda_check.h"
#endif

namespace splitspec::engine {

bool CudaBackendCompiled() {
#ifdef SPLITSPEC_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::string DeviceSpec::ToString() const { return cuda ? absl::StrCat("cuda:", index) : "cpu"; }

absl::StatusOr<DeviceSpec> ParseDevice(std::string_view device_name) {
  // Debian's Abseil has its own string_view type; work on a std::string.
  const std::string device(device_name);
  if (device == "cpu") return DeviceSpec{};
  if (device != "cuda" && !absl::StartsWith(device, "cuda:")) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown device '", device, "' (cpu, cuda or cuda:N)"));
  }
  DeviceSpec spec;
  spec.cuda = true;
  if (device.size() > 4 && (!absl::SimpleAtoi(device.substr(5), &spec.index) || spec.index < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad CUDA device index in '", device, "' (cuda:N, N >= 0)"));
  }
  return spec;
}

absl::Status CheckDevice(std::string_view device_name) {
  absl::StatusOr<DeviceSpec> spec = ParseDevice(device_name);
  if (!spec.ok() || !spec->cuda) return spec.status();
#ifdef SPLITSPEC_HAVE_CUDA
  const int count = CudaDeviceCount();
  if (spec->index >= count) {
    return absl::UnavailableError(absl::StrCat("device '", spec->ToString(),
                                               "' is not available: this machine has ", count,
                                               " usable CUDA device(s); use --device cpu"));
  }
  return absl::OkStatus();
#else
  return absl::UnimplementedError(
      absl::StrCat("device '", spec->ToString(),
                   "' needs the CUDA backend; this build has none "
                   "(SPLITSPEC_CUDA=OFF or no toolkit); use --device cpu"));
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackendByName(std::string_view device_name,
                                                             const CpuBackendOptions& cpu_options) {
  if (absl::Status s = CheckDevice(device_name); !s.ok()) return s;
  const DeviceSpec spec = *ParseDevice(device_name);
  if (!spec.cuda) return CreateCpuBackend(cpu_options);
#ifdef SPLITSPEC_HAVE_CUDA
  CudaBackendOptions options;
  options.device = spec.index;
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CreateCudaBackend(options);
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<Backend>(std::move(*backend));
#else
  return absl::InternalError("unreachable: CheckDevice accepted cuda in a CPU-only build");
#endif
}

absl::Status BindCallingThread(const DeviceSpec& device, int cpu_threads) {
  if (!device.cuda) {
    if (cpu_threads > 0 && omp_get_max_threads() != cpu_threads) omp_set_num_threads(cpu_threads);
    return absl::OkStatus();
  }
#ifdef SPLITSPEC_HAVE_CUDA
  CUDA_CHECK(cudaSetDevice(device.index));
  return absl::OkStatus();
#else
  return absl::UnimplementedError("no CUDA backend in this build");
#endif
}

absl::Status BackendStatus(const Backend& backend) {
#ifdef SPLITSPEC_HAVE_CUDA
  if (const auto* cuda = dynamic_cast<const CudaBackend*>(&backend)) return cuda->status();
#else
  (void)backend;
#endif
  return absl::OkStatus();
}

void* BackendStream(const Backend& backend) {
#ifdef SPLITSPEC_HAVE_CUDA
  if (const auto* cuda = dynamic_cast<const CudaBackend*>(&backend)) return cuda->stream();
#else
  (void)backend;
#endif
  return nullptr;
}

}  // namespace splitspec::engine
