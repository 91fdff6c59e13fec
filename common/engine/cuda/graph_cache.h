// CUDA graphs for decode and verify forwards, one per (batch-size bucket, tokens-per-request
// tier), captured at start-up so that switching speculation tier is a lookup, never a
// recapture (SGLang's design).
//
// Status: the cache mechanism (capture, instantiate, look up, replay) is implemented here;
// capturing a LlamaModel forward is not wired yet, because the forward as written does work a
// graph cannot hold:
//  - CudaBackend::Stage copies each op's index arrays from pageable host memory, and grows
//    device buffers on demand; inside a capture both are illegal. The captured path needs the
//    token ids, positions, block tables, masks and logit rows in persistent device buffers at
//    fixed addresses, written (from pinned host memory, one copy) before each replay, sized for
//    the bucket's maximum and padded (padding rows point at a scratch KV block).
//  - LlamaModel::Workspace reallocates when a batch grows; a captured forward needs them
//    allocated once for the largest bucket before capture.
//  - Attention's grid size depends on the token count and the scores scratch on the longest
//    context: the captured kernel must take n_items from device memory (early-exit padding
//    blocks) and size its scratch for max_position_embeddings.
// Buckets: batch sizes 1, 2, 4, 8, 16, 32, 64 (a batch pads up to the next bucket) times
// tokens-per-request tiers 1 (decode), 2, 4, 8, 16 (verify), i.e. at most 35 graphs per model.
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_GRAPH_CACHE_H_
#define SPLITSPEC_COMMON_ENGINE_CUDA_GRAPH_CACHE_H_

#include <functional>
#include <map>
#include <utility>

#include "absl/status/status.h"

namespace splitspec::engine {

struct GraphKey {
  int batch_bucket = 1;
  int tokens_per_request = 1;
  bool operator<(const GraphKey& other) const {
    return std::make_pair(batch_bucket, tokens_per_request) < std::make_pair(other.batch_bucket, other.tokens_per_request);
  }
};

// The smallest bucket (1, 2, 4, ..., 64) holding `batch`; 0 when batch > 64 (run eagerly).
int BatchBucket(int batch);

// Not thread-safe: owned by the thread driving the backend whose stream it captures.
class CudaGraphCache {
 public:
  // `stream` is the cudaStream_t (as void*) the captured work is enqueued on.
  explicit CudaGraphCache(void* stream) : stream_(stream) {}
  ~CudaGraphCache();
  CudaGraphCache(const CudaGraphCache&) = delete;
  CudaGraphCache& operator=(const CudaGraphCache&) = delete;

  // Captures what `enqueue` puts on the stream into the graph for `key` (replacing any).
  // enqueue must only launch kernels / device copies on the stream: no synchronisation, no
  // allocation, no pageable host copies. Errors from enqueue or CUDA are returned.
  absl::Status Capture(const GraphKey& key, const std::function<absl::Status()>& enqueue);
  bool Contains(const GraphKey& key) const { return graphs_.count(key) != 0; }
  // Replays the graph for `key` on the stream. NOT_FOUND when it was never captured.
  absl::Status Launch(const GraphKey& key);
  int size() const { return static_cast<int>(graphs_.size()); }

 private:
  void* stream_;
  std::map<GraphKey, void*> graphs_;  // cudaGraphExec_t per key
};

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_GRAPH_CACHE_H_
