// The CUDA implementation of Backend: weights and activations in GPU memory, weights kept in
// their file dtype (BF16/F16, F32 accumulation), every op enqueued on one CUDA stream.
// This header needs no CUDA headers, so host-only code (tools, tests) can include it; it is
// compiled only when the CUDA backend is (SPLITSPEC_HAVE_CUDA).
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_CUDA_BACKEND_H_
#define SPLITSPEC_COMMON_ENGINE_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/engine/backend.h"

namespace splitspec::engine {

struct CudaBackendOptions {
  int device = 0;
  // false: our warp-per-row kernel for every MatMul, batch invariant (speculative greedy output
  // equals plain greedy output bit for bit), bandwidth-bound like a GEMV. true: cuBLAS GEMMs
  // (faster for large prefills; cuBLAS picks algorithms by shape, so results may depend on
  // the batch and the bit-exact speculative guarantee is lost).
  bool use_cublas = false;
};

// Thread-safety: like every Backend, driven by one thread at a time.
class CudaBackend : public Backend {
 public:
  // Backend ops return void; the first CUDA/cuBLAS failure any op hit is kept here (sticky).
  // Callers check it after a forward (LlamaModel's users: after Forward / DownloadRows).
  virtual absl::Status status() const = 0;
  // The cudaStream_t (as void*) all ops run on; give it to an NCCL communicator.
  virtual void* stream() const = 0;
  // Waits for all queued work; returns status() afterwards.
  virtual absl::Status Synchronize() = 0;
};

// CUDA devices usable by this process (0 without a GPU or driver; never fails).
int CudaDeviceCount();

// UNAVAILABLE without a usable device; INTERNAL when CUDA or cuBLAS set-up fails.
absl::StatusOr<std::unique_ptr<CudaBackend>> CreateCudaBackend(const CudaBackendOptions& options = {});

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_CUDA_BACKEND_H_
