// Paged attention over the KV block tables, with the tree (ancestor) mask for verify steps and
// plain causal chains for decode and prefill (see AttentionSequence in backend.h).
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_ATTENTION_CUH_
#define SPLITSPEC_COMMON_ENGINE_CUDA_ATTENTION_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace splitspec::engine::cuda {

// One sequence of an attention call, with offsets into the packed device arrays.
struct AttentionSeqDesc {
  int32_t n_context;
  int32_t n_new;
  int32_t first_row;
  int32_t table_offset;  // into `tables`
  int32_t mask_offset;   // into `masks`; -1: causal chain
  // Cached tree nodes at the end of the context (AttentionSequence::n_tree_context); mask rows
  // are n_tree_context + n_new wide.
  int32_t n_tree_context;
};

// One new token: sequence index and node index within it.
struct AttentionItem {
  int32_t seq;
  int32_t node;
};

// Writes the new tokens' k/v rows (width kv_cols) into their cache slots.
cudaError_t LaunchStoreKv(const float* k, const float* v, int64_t kv_cols, const AttentionSeqDesc* seqs,
                          const AttentionItem* items, int n_items, const int32_t* tables, int block_size,
                          float* k_cache, float* v_cache, cudaStream_t stream);

// out[row, head] = softmax(q k^T / sqrt(head_dim)) v over the visible positions, visited in
// increasing position order. `scratch` is device memory of AttentionScratchBytes(n_items,
// n_heads, head_dim, max_visible) bytes, max_visible >= n_context + n_new of every sequence.
// head_dim <= 1024.
size_t AttentionScratchBytes(int n_items, int n_heads, int head_dim, int max_visible);
cudaError_t LaunchPagedAttention(const float* q, int n_heads, int n_heads_kv, int head_dim, const float* k_cache,
                                 const float* v_cache, int block_size, const AttentionSeqDesc* seqs,
                                 const AttentionItem* items, int n_items, const int32_t* tables,
                                 const uint8_t* masks, float* scratch, int max_visible, float* out,
                                 cudaStream_t stream);

// For each i in order: slot dst[i] <- slot src[i] in both caches (rows of width cols). One
// block copies all slots in order, so overlapping moves behave as the CPU's in-order loop.
cudaError_t LaunchCopyKvSlots(float* k_cache, float* v_cache, int64_t cols, const int32_t* src, const int32_t* dst,
                              int n, cudaStream_t stream);

}  // namespace splitspec::engine::cuda

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_ATTENTION_CUH_
