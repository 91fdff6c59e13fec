// CUDA graph capture and replay per (batch bucket, tokens-per-request tier).
#include "common/engine/cuda/graph_cache.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "common/engine/cuda/cuda_check.h"

namespace splitspec::engine {

int BatchBucket(int batch) {
  for (int bucket = 1; bucket <= 64; bucket *= 2) {
    if (batch <= bucket) return bucket;
  }
  return 0;
}

CudaGraphCache::~CudaGraphCache() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
}

absl::Status CudaGraphCache::Capture(const GraphKey& key, const std::function<absl::Status()>& enqueue) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_);
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status enqueued = enqueue();
  cudaGraph_t graph = nullptr;
  // End the capture whatever happened, so the stream is usable again.
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!enqueued.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return enqueued;
  }
  CUDA_CHECK(ended);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(instantiated);
  auto it = graphs_.find(key);
  if (it != graphs_.end()) {
    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(it->second));
    it->second = exec;
  } else {
    graphs_.emplace(key, exec);
  }
  return absl::OkStatus();
}

absl::Status CudaGraphCache::Launch(const GraphKey& key) {
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    return absl::NotFoundError(absl::StrCat("no CUDA graph captured for batch bucket ", key.batch_bucket, " and ",
                                            key.tokens_per_request, " tokens per request"));
  }
  CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(it->second), static_cast<cudaStream_t>(stream_)));
  return absl::OkStatus();
}

}  // namespace splitspec::engine
