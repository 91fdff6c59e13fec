// Paged attention with tree (ancestor) masks for the CPU backend.
//
// Each (token, head) pair is computed by one thread from scratch: scores over the visible
// KV positions in increasing position order, a two-pass softmax, then the weighted sum of V
// in the same order (the query heads that share a KV head run side by side, each in that
// order). A tree node therefore produces the bits its root-to-node path produces when run as a
// chain, and no result depends on what else is in the batch.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/engine/cpu/kernels.h"
#include "common/engine/cpu/simd.h"

namespace splitspec::engine::cpu {
namespace {

inline int32_t SlotOf(const AttentionSequence& seq, int block_size, int32_t pos) {
  return seq.block_table[pos / block_size] * block_size + pos % block_size;
}

// Writes this step's K/V rows into their cache slots (positions n_context + i).
void StoreNewKv(const Tensor& k, const Tensor& v, const KvLayout& layout, Tensor& k_cache,
                Tensor& v_cache, absl::Span<const AttentionSequence> sequences) {
  const size_t row_bytes = static_cast<size_t>(k.cols) * sizeof(float);
  for (const AttentionSequence& seq : sequences) {
    for (int32_t i = 0; i < seq.n_new; ++i) {
      const int32_t slot = SlotOf(seq, layout.block_size, seq.n_context + i);
      std::memcpy(k_cache.row(slot), k.row(seq.first_row + i), row_bytes);
      std::memcpy(v_cache.row(slot), v.row(seq.first_row + i), row_bytes);
    }
  }
}

// A decode step streams the weights through every cache level, so by the time a layer's
// attention runs its KV rows are back in DRAM, and a head's rows (a short piece of each
// cache row, one cache row per position) are too scattered for the hardware prefetchers: the
// loads wait out DRAM latency one position at a time. Asking for K rows a few positions ahead
// and for each V row as its score is computed overlaps those waits. No effect on results.
// Measured on the medium BF16 model, 2 threads, batch-1 decode at context 1024: 8.5-9.2 ms
// without, 7.3-8.2 ms with (4 interleaved runs each).
constexpr size_t kPrefetchSlots = 8;

// Work units (kernels.h) per key position and head dimension: a position costs a head a dot
// product, an exp and a weighted sum, ~15 ns with its rows in cache and ~30 ns from DRAM at
// head_dim 64, about 8 multiply-adds' worth per dimension rather than the 2 the FLOPs suggest.
// Counted so, one decode token at a context of a few dozen runs on all threads. Measured with the
// medium model's shape (12 layers, 12 heads of 64, 4 KV heads), context 64, 2 threads: a step's
// attention 142 -> 92-102 us with the rows in cache; batch-1 decode of the medium BF16 model,
// median of 5 interleaved runs, 5.47 -> 5.19 ms.
constexpr int64_t kWorkPerKeyAndDim = 8;

inline void PrefetchRow(const float* row, int n) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int offset = 0; offset < n * static_cast<int>(sizeof(float)); offset += 64) {
    __builtin_prefetch(p + offset, /*rw=*/0, /*locality=*/3);
  }
}

struct WorkItem {
  int32_t seq;
  int32_t node;
};

}  // namespace

void Attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_heads, const KvLayout& layout,
               Tensor& k_cache, Tensor& v_cache, absl::Span<const AttentionSequence> sequences,
               Tensor& out) {
  StoreNewKv(k, v, layout, k_cache, v_cache, sequences);

  std::vector<WorkItem> items;
  for (int32_t s = 0; s < static_cast<int32_t>(sequences.size()); ++s) {
    for (int32_t i = 0; i < sequences[s].n_new; ++i) items.push_back({s, i});
  }
  const int head_dim = layout.head_dim;
  const int n_kv = layout.n_heads_kv;
  const int group = n_heads / n_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  // One work item is a token and a KV head with the `group` query heads that read it: each K
  // and V row is fetched once for all of them (the rows are what the time goes on, see above).
  const int64_t n_work = static_cast<int64_t>(items.size()) * n_kv;
  int64_t visible_keys = 0;  // upper bound: every new token sees its whole context and tree
  for (const AttentionSequence& seq : sequences) visible_keys += int64_t{seq.n_new} * (seq.n_context + seq.n_new);

#pragma omp parallel if (WorthParallel(visible_keys * n_heads * kWorkPerKeyAndDim * head_dim))
  {
    std::vector<int32_t> slots;
    std::vector<float> scores;  // group x visible positions
    std::vector<float> acc(static_cast<size_t>(group) * head_dim);
    std::vector<float> inverse(static_cast<size_t>(group));  // 1 / softmax denominator per head
#pragma omp for schedule(static)
    for (int64_t w = 0; w < n_work; ++w) {
      const WorkItem& item = items[w / n_kv];
      const int kv_head = static_cast<int>(w % n_kv);
      const AttentionSequence& seq = sequences[item.seq];
      const int64_t row = seq.first_row + item.node;

      // Visible positions in increasing order: the committed context, then the tree columns
      // (cached tree nodes, then this call's tokens) that are ancestors, and self.
      slots.clear();
      const int32_t committed = seq.n_context - seq.n_tree_context;
      const int32_t mask_width = seq.n_tree_context + seq.n_new;
      for (int32_t p = 0; p < committed; ++p) slots.push_back(SlotOf(seq, layout.block_size, p));
      for (int32_t c = 0; c <= seq.n_tree_context + item.node; ++c) {
        const bool visible = seq.ancestor_mask == nullptr ||
                             seq.ancestor_mask[static_cast<int64_t>(item.node) * mask_width + c];
        if (visible) slots.push_back(SlotOf(seq, layout.block_size, committed + c));
      }
      const size_t n_slots = slots.size();

      // Each query head's arithmetic is the single-head computation, in the same order: scores
      // over the positions, a two-pass softmax, then the weighted sum of V.
      const int64_t kv_offset = static_cast<int64_t>(kv_head) * head_dim;
      const float* q_heads = q.row(row) + static_cast<int64_t>(kv_head) * group * head_dim;
      scores.resize(static_cast<size_t>(group) * n_slots);
      for (size_t p = 0; p < n_slots; ++p) {
        if (p + kPrefetchSlots < n_slots) PrefetchRow(k_cache.row(slots[p + kPrefetchSlots]) + kv_offset, head_dim);
        PrefetchRow(v_cache.row(slots[p]) + kv_offset, head_dim);  // for the weighted sum below
        const float* k_row = k_cache.row(slots[p]) + kv_offset;
        for (int g = 0; g < group; ++g) scores[g * n_slots + p] = Dot(q_heads + g * head_dim, k_row, head_dim) * scale;
      }
      for (int g = 0; g < group; ++g) {
        float* head_scores = scores.data() + g * n_slots;
        float max_score = -INFINITY;
        for (size_t p = 0; p < n_slots; ++p) max_score = std::max(max_score, head_scores[p]);
        float denominator = 0;
        for (size_t p = 0; p < n_slots; ++p) {
          head_scores[p] = std::exp(head_scores[p] - max_score);
          denominator += head_scores[p];
        }
        inverse[g] = 1.0f / denominator;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (size_t p = 0; p < n_slots; ++p) {
        const float* v_row = v_cache.row(slots[p]) + kv_offset;
        for (int g = 0; g < group; ++g) {
          const float weight = scores[g * n_slots + p];
          float* head_acc = acc.data() + g * head_dim;
          for (int d = 0; d < head_dim; ++d) head_acc[d] += weight * v_row[d];
        }
      }
      for (int g = 0; g < group; ++g) {
        float* out_head = out.row(row) + (static_cast<int64_t>(kv_head) * group + g) * head_dim;
        for (int d = 0; d < head_dim; ++d) out_head[d] = acc[g * head_dim + d] * inverse[g];
      }
    }
  }
}

}  // namespace splitspec::engine::cpu
