// Paged tree attention kernels. Blocks per (new token, query head) compute that pair from
// scratch: scores over the visible positions only (masked ones are never visited, as in the
// CPU backend), a max and a sum reduced in a fixed block order, then the weighted sum of V:
// each warp walks its share of the visible keys in increasing rank order with its lanes over
// the output dimensions, and the warps' partial sums are added in warp order. (One thread per
// dimension walking every key in turn left the block waiting on two dependent loads a key:
// 175 us a call at 256 keys on an H200, most of a decode step.) Long contexts are split into
// chunks of kKeysPerSplit ranks, one block each, whose partial results a second kernel adds in
// chunk order (as flash-decoding does). Nothing depends on the other tokens of the batch.
//
// A tree node must see exactly what its root-to-node chain sees, bit for bit (speculative greedy
// output equals plain greedy output). So the visible keys are numbered by rank, the r-th visible
// position in increasing order, and everything (which thread scores a key, where its score is
// stored, which lane its exponential is summed in) follows the rank: a node whose siblings are
// masked then reduces the same values in the same lanes as its chain, where ranks and
// positions coincide. (Indexing by position instead shifts every key after a masked sibling to
// another lane and changes the sum's rounding.)
#include "common/engine/cuda/attention.cuh"
#include "common/engine/cuda/common.cuh"
#include "common/engine/cuda/launch.cuh"

namespace splitspec::engine::cuda {
namespace {

// Threads per block. A constant, never a function of the batch: the weighted sum of V splits the
// keys by warp, so its rounding depends on the warp count, and a token's result must not depend on
// what shares its call.
constexpr int kThreads = 128;
// Keys per block: a pair's visible keys are split into chunks of this many ranks, each chunk a
// block, so a one-token step over a long context still fills the GPU (12 heads x 1 token is 12
// blocks). A constant for the same reason as kThreads: where the chunks end changes rounding.
constexpr int kKeysPerSplit = 128;
// A chunk's partial result starts with its max score and its sum of exponentials.
constexpr int kPartialHeader = 2;

int AttentionSplits(int max_visible) { return (max_visible + kKeysPerSplit - 1) / kKeysPerSplit; }

__device__ __forceinline__ int64_t SlotOf(const int32_t* table, int block_size, int32_t pos) {
  return static_cast<int64_t>(table[pos / block_size]) * block_size + pos % block_size;
}

// The position of the visible key of rank `rank`: ranks below `committed` are the committed
// positions; then the tree columns (cached tree nodes, then new nodes up to this one) that the
// mask row marks visible, in order.
__device__ __forceinline__ int32_t PositionOfRank(int32_t rank, int32_t committed, const uint8_t* mask_row) {
  if (rank < committed || mask_row == nullptr) return rank;
  int32_t remaining = rank - committed;
  for (int32_t c = 0;; ++c) {
    if (mask_row[c] != 0 && remaining-- == 0) return committed + c;
  }
}

__global__ void StoreKvKernel(const float* k, const float* v, int64_t kv_cols, const AttentionSeqDesc* seqs,
                              const AttentionItem* items, const int32_t* tables, int block_size, float* k_cache,
                              float* v_cache) {
  const AttentionItem item = items[blockIdx.x];
  const AttentionSeqDesc seq = seqs[item.seq];
  const int64_t slot = SlotOf(tables + seq.table_offset, block_size, seq.n_context + item.node);
  const int64_t row = seq.first_row + item.node;
  for (int64_t i = threadIdx.x; i < kv_cols; i += blockDim.x) {
    k_cache[slot * kv_cols + i] = k[row * kv_cols + i];
    v_cache[slot * kv_cols + i] = v[row * kv_cols + i];
  }
}

// One chunk of a (new token, query head) pair's visible keys: ranks [split * kKeysPerSplit,
// +kKeysPerSplit). Writes the chunk's partial result to `partials` (kPartialHeader floats: its
// max score and its sum of exp(score - max); then head_dim floats: the sum of exp(score - max) *
// V) for AttentionCombineKernel. Blocks past the pair's last chunk write nothing.
__global__ void PagedAttentionKernel(const float* q, int n_heads, int n_heads_kv, int head_dim,
                                     const float* k_cache, const float* v_cache, int block_size,
                                     const AttentionSeqDesc* seqs, const AttentionItem* items,
                                     const int32_t* tables, const uint8_t* masks, float* scores_all,
                                     int max_visible, float* partials_all) {
  // q head (head_dim), 32 floats of reduction scratch, then each warp's partial sums (head_dim).
  float* shared = DynamicSharedMemory<float>();
  float* q_head = shared;
  float* scratch = shared + head_dim;
  float* partials = scratch + 32;
  const AttentionItem item = items[blockIdx.x];
  const int head = blockIdx.y;
  const int split = blockIdx.z;
  const AttentionSeqDesc seq = seqs[item.seq];
  const int32_t* table = tables + seq.table_offset;
  const int32_t mask_width = seq.n_tree_context + seq.n_new;
  const uint8_t* mask = seq.mask_offset >= 0 ? masks + seq.mask_offset + static_cast<int64_t>(item.node) * mask_width
                                             : nullptr;
  // Positions before `committed` are always visible; the mask covers the tree columns after.
  const int32_t committed = seq.n_context - seq.n_tree_context;
  const int64_t row = seq.first_row + item.node;
  const int kv_head = head / (n_heads / n_heads_kv);
  const int64_t kv_cols = static_cast<int64_t>(n_heads_kv) * head_dim;
  const int64_t kv_offset = static_cast<int64_t>(kv_head) * head_dim;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * n_heads + head;
  float* scores = scores_all + pair * max_visible;
  // Each visible key's cache slot, by rank, after all the scores (see LaunchPagedAttention).
  int32_t* slots = reinterpret_cast<int32_t*>(scores_all + static_cast<int64_t>(gridDim.x) * n_heads * max_visible) +
                   pair * max_visible;

  // The visible keys: the committed positions, then the tree columns up to this node that the
  // mask marks visible (a node always sees itself). Scores are stored by rank.
  int32_t n_visible = seq.n_context + item.node + 1;
  if (mask != nullptr) {
    n_visible = committed;
    for (int32_t c = 0; c <= seq.n_tree_context + item.node; ++c) n_visible += mask[c] != 0;
  }
  const int32_t first = split * kKeysPerSplit;
  if (first >= n_visible) return;  // the whole block: nothing of this pair is left
  const int32_t last = min(first + kKeysPerSplit, n_visible);
  float* partial = partials_all + (pair * gridDim.z + split) * (kPartialHeader + head_dim);

  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) q_head[d] = q[row * n_heads * head_dim + head * head_dim + d];
  __syncthreads();

  float local_max = -INFINITY;
  for (int32_t r = first + threadIdx.x; r < last; r += blockDim.x) {
    const int32_t p = PositionOfRank(r, committed, mask);
    const int64_t slot = SlotOf(table, block_size, p);
    const float* key = k_cache + slot * kv_cols + kv_offset;
    float dot = 0.0f;
#pragma unroll 8
    for (int d = 0; d < head_dim; ++d) dot += q_head[d] * key[d];
    const float s = dot * scale;
    scores[r] = s;
    slots[r] = static_cast<int32_t>(slot);
    local_max = fmaxf(local_max, s);
  }
  const float max_score = BlockReduce<true>(local_max, scratch);
  float local_sum = 0.0f;
  for (int32_t r = first + threadIdx.x; r < last; r += blockDim.x) {
    const float e = expf(scores[r] - max_score);
    scores[r] = e;
    local_sum += e;
  }
  const float sum = BlockReduce<false>(local_sum, scratch);
  __syncthreads();  // every thread's exponentials are visible before the weighted sum reads them
  // The weighted sum of V. Warp w takes the ranks of tiles w, w + n_warps, ... (32 ranks a tile)
  // of the chunk in increasing order, lane l the dimensions l, l + 32, ...; the order of every
  // addition follows the ranks alone, so a tree node still sums exactly as its chain does.
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int n_warps = static_cast<int>(blockDim.x) / 32;
  const float* v_head = v_cache + kv_offset;
  for (int d = lane; d < head_dim; d += 32) {
    float acc = 0.0f;
    for (int32_t tile = first + warp * 32; tile < last; tile += n_warps * 32) {
      const int32_t end = min(tile + 32, last);
#pragma unroll 4
      for (int32_t r = tile; r < end; ++r) {
        const float weight = scores[r];
        if (weight == 0.0f) continue;  // underflowed: adds nothing
        acc += weight * v_head[static_cast<int64_t>(slots[r]) * kv_cols + d];
      }
    }
    partials[warp * head_dim + d] = acc;
  }
  __syncthreads();
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = partials[d];
    for (int w = 1; w < n_warps; ++w) acc += partials[w * head_dim + d];
    partial[kPartialHeader + d] = acc;
  }
  if (threadIdx.x == 0) {
    partial[0] = max_score;
    partial[1] = sum;
  }
}

// out[row, head] from a pair's chunks, in chunk order: each chunk's sums rescaled from its own
// max to the pair's, added, and divided by the rescaled sum of exponentials.
__global__ void AttentionCombineKernel(int n_heads, int head_dim, const AttentionSeqDesc* seqs,
                                       const AttentionItem* items, const uint8_t* masks, const float* partials_all,
                                       int max_splits, float* out) {
  const AttentionItem item = items[blockIdx.x];
  const int head = blockIdx.y;
  const AttentionSeqDesc seq = seqs[item.seq];
  int32_t n_visible = seq.n_context + item.node + 1;
  if (seq.mask_offset >= 0) {
    const int32_t mask_width = seq.n_tree_context + seq.n_new;
    const uint8_t* mask = masks + seq.mask_offset + static_cast<int64_t>(item.node) * mask_width;
    n_visible = seq.n_context - seq.n_tree_context;
    for (int32_t c = 0; c <= seq.n_tree_context + item.node; ++c) n_visible += mask[c] != 0;
  }
  const int n_splits = (n_visible + kKeysPerSplit - 1) / kKeysPerSplit;
  const int64_t stride = kPartialHeader + head_dim;
  const float* partials = partials_all + (static_cast<int64_t>(blockIdx.x) * n_heads + head) * max_splits * stride;
  float max_score = -INFINITY;
  for (int s = 0; s < n_splits; ++s) max_score = fmaxf(max_score, partials[s * stride]);
  float sum = 0.0f;
  for (int s = 0; s < n_splits; ++s) sum += expf(partials[s * stride] - max_score) * partials[s * stride + 1];
  const float inv = 1.0f / sum;
  const int64_t row = seq.first_row + item.node;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < n_splits; ++s) {
      acc += expf(partials[s * stride] - max_score) * partials[s * stride + kPartialHeader + d];
    }
    out[row * n_heads * head_dim + head * head_dim + d] = acc * inv;
  }
}

__global__ void CopyKvSlotsKernel(float* k_cache, float* v_cache, int64_t cols, const int32_t* src,
                                  const int32_t* dst, int n) {
  for (int i = 0; i < n; ++i) {
    if (src[i] != dst[i]) {
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        k_cache[dst[i] * cols + c] = k_cache[src[i] * cols + c];
        v_cache[dst[i] * cols + c] = v_cache[src[i] * cols + c];
      }
    }
    __syncthreads();  // a later move may read a slot this one wrote
  }
}

}  // namespace

cudaError_t LaunchStoreKv(const float* k, const float* v, int64_t kv_cols, const AttentionSeqDesc* seqs,
                          const AttentionItem* items, int n_items, const int32_t* tables, int block_size,
                          float* k_cache, float* v_cache, cudaStream_t stream) {
  if (n_items == 0) return cudaSuccess;
  return LaunchKernel(StoreKvKernel, n_items, 256, 0, stream, k, v, kv_cols, seqs, items, tables, block_size, k_cache,
                      v_cache);
}

size_t AttentionScratchBytes(int n_items, int n_heads, int head_dim, int max_visible) {
  const size_t pairs = static_cast<size_t>(n_items) * n_heads;
  return pairs * max_visible * (sizeof(float) + sizeof(int32_t)) +
         pairs * AttentionSplits(max_visible) * (kPartialHeader + head_dim) * sizeof(float);
}

cudaError_t LaunchPagedAttention(const float* q, int n_heads, int n_heads_kv, int head_dim, const float* k_cache,
                                 const float* v_cache, int block_size, const AttentionSeqDesc* seqs,
                                 const AttentionItem* items, int n_items, const int32_t* tables,
                                 const uint8_t* masks, float* scratch, int max_visible, float* out,
                                 cudaStream_t stream) {
  if (n_items == 0) return cudaSuccess;
  if (head_dim > 1024 || n_heads_kv <= 0 || n_heads % n_heads_kv != 0 || max_visible < 1) {
    return cudaErrorInvalidValue;
  }
  const int splits = AttentionSplits(max_visible);
  const size_t pairs = static_cast<size_t>(n_items) * n_heads;
  float* partials = reinterpret_cast<float*>(reinterpret_cast<char*>(scratch) +
                                             pairs * max_visible * (sizeof(float) + sizeof(int32_t)));
  const dim3 grid(static_cast<unsigned>(n_items), static_cast<unsigned>(n_heads), static_cast<unsigned>(splits));
  const size_t shared_bytes = (static_cast<size_t>(head_dim) * (1 + kThreads / 32) + 32) * sizeof(float);
  cudaError_t error = LaunchKernel(PagedAttentionKernel, grid, kThreads, shared_bytes, stream, q, n_heads, n_heads_kv,
                                   head_dim, k_cache, v_cache, block_size, seqs, items, tables, masks, scratch,
                                   max_visible, partials);
  if (error != cudaSuccess) return error;
  const dim3 pairs_grid(static_cast<unsigned>(n_items), static_cast<unsigned>(n_heads));
  return LaunchKernel(AttentionCombineKernel, pairs_grid, kThreads, 0, stream, n_heads, head_dim, seqs, items, masks,
                      static_cast<const float*>(partials), splits, out);
}

cudaError_t LaunchCopyKvSlots(float* k_cache, float* v_cache, int64_t cols, const int32_t* src, const int32_t* dst,
                              int n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return LaunchKernel(CopyKvSlotsKernel, 1, 256, 0, stream, k_cache, v_cache, cols, src, dst, n);
}

}  // namespace splitspec::engine::cuda
