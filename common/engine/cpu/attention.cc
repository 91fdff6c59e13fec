// Paged attention with tree (ancestor) masks for the CPU backend.
//
// Each (token, head) pair is computed by one thread from scratch: scores over the visible
// KV positions in increasing position order, a two-pass softmax, then the weighted sum of V
// in the same order (the query heads that share a KV head run side by side, each in that
// order). A tree node therefore produces the bits its root-to-node path produces when run as a
// chain, and no result depends on what else is in the batch.
//
// The cache's rows are F32 or F16 (KvCacheOptions::dtype). F16 rows are rounded once, when
// written, and widened to F32 as they are read; widening is exact, so a position's arithmetic is
// the same whichever loop reads it, and the contract above holds for both.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/engine/cpu/kernels.h"
#include "common/engine/cpu/simd.h"
#include "common/engine/cpu/vector_exp.h"

namespace splitspec::engine::cpu {
namespace {

inline int32_t SlotOf(const AttentionSequence& seq, int block_size, int32_t pos) {
  return seq.block_table[pos / block_size] * block_size + pos % block_size;
}

// How the kernels below read and write a cache row of either element type.
struct F32Rows {
  using Element = float;
  static VecF Load(const float* p) { return cpu::Load(p); }
  static float Scalar(const float* p, int64_t i) { return p[i]; }
  static void Write(const float* from, int64_t n, float* to) { std::memcpy(to, from, static_cast<size_t>(n) * sizeof(float)); }
};
struct F16Rows {
  using Element = uint16_t;
  static VecF Load(const uint16_t* p) { return LoadF16(p); }
  static float Scalar(const uint16_t* p, int64_t i) { return F16ToF32(p[i]); }
  static void Write(const float* from, int64_t n, uint16_t* to) {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) StoreF16(to + i, cpu::Load(from + i));
    for (; i < n; ++i) to[i] = F32ToF16(from[i]);
  }
};

// The row of cache slot `slot`.
template <typename Rows>
const typename Rows::Element* CacheRow(const Tensor& cache, int32_t slot) {
  return static_cast<const typename Rows::Element*>(cache.data) + static_cast<int64_t>(slot) * cache.cols;
}
template <typename Rows>
typename Rows::Element* CacheRow(Tensor& cache, int32_t slot) {
  return static_cast<typename Rows::Element*>(cache.data) + static_cast<int64_t>(slot) * cache.cols;
}

// Writes this step's K/V rows into their cache slots (positions n_context + i).
template <typename Rows>
void StoreNewKv(const Tensor& k, const Tensor& v, const KvLayout& layout, Tensor& k_cache,
                Tensor& v_cache, absl::Span<const AttentionSequence> sequences) {
  for (const AttentionSequence& seq : sequences) {
    for (int32_t i = 0; i < seq.n_new; ++i) {
      const int32_t slot = SlotOf(seq, layout.block_size, seq.n_context + i);
      Rows::Write(k.row(seq.first_row + i), k.cols, CacheRow<Rows>(k_cache, slot));
      Rows::Write(v.row(seq.first_row + i), v.cols, CacheRow<Rows>(v_cache, slot));
    }
  }
}

// Dot(q, k) (simd.h) with k a cache row: the same accumulation, k's elements widened as loaded.
template <typename Rows>
float DotWithRow(const float* q, const typename Rows::Element* k, int n) {
  VecF acc = Zero();
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = Fma(Load(q + i), Rows::Load(k + i), acc);
  float sum = ReduceAdd(acc);
  for (; i < n; ++i) sum += q[i] * Rows::Scalar(k, i);
  return sum;
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

template <typename Element>
inline void PrefetchRow(const Element* row, int n) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int offset = 0; offset < n * static_cast<int>(sizeof(Element)); offset += 64) {
    __builtin_prefetch(p + offset, /*rw=*/0, /*locality=*/3);
  }
}

struct WorkItem {
  int32_t seq;
  int32_t node;
};

// Scores of kLanes positions for one query head whose head_dim is whole vectors: each
// position's dot product accumulated as DotWithRow accumulates it, the kLanes sums taken
// together (ReduceAddLanes), then scaled: DotWithRow(q, k) * scale to the bit, with one store
// instead of kLanes reductions. One position at a time, each dot product is one chain of
// dependent multiply-adds; side by side the positions' chains overlap.
template <typename Rows>
inline void ScoresOfLanes(const float* q, const typename Rows::Element* const k_rows[kLanes], int head_dim,
                          float scale, float* out) {
  VecF acc[kLanes];
  for (int p = 0; p < kLanes; ++p) acc[p] = Zero();
  for (int i = 0; i < head_dim; i += kLanes) {
    const VecF q_part = Load(q + i);
    for (int p = 0; p < kLanes; ++p) acc[p] = Fma(q_part, Rows::Load(k_rows[p] + i), acc[p]);
  }
  Store(out, Mul(ReduceAddLanes(acc), Broadcast(scale)));
}

// The largest of x[0, n): four independent chains, since one chain of n dependent maxes
// stalled the softmax. Exact in any order (max rounds nothing); a NaN score makes every
// output NaN whichever chain it lands in (its exp is NaN, and so the denominator).
float MaxOf(const float* x, size_t n) {
  float m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  size_t p = 0;
  for (; p + 4 <= n; p += 4) {
    for (int c = 0; c < 4; ++c) m[c] = std::max(m[c], x[p + c]);
  }
  for (; p < n; ++p) m[0] = std::max(m[0], x[p]);
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

// x[p] = exp(x[p] - max) (vector_exp.h), returning 1 / the sum of them added in position order.
float SoftmaxInPlace(float* x, size_t n) {
  ExpInPlace(x, n, MaxOf(x, n));
  float denominator = 0;
  for (size_t p = 0; p < n; ++p) denominator += x[p];
  return 1.0f / denominator;
}

// The slots of positions [0, n) of a sequence, block by block: a division per position (the
// block size is not known at compile time) cost as much as the rest of a short head's work.
void AppendSlots(const AttentionSequence& seq, int block_size, int32_t n, std::vector<int32_t>* slots) {
  for (int32_t start = 0, b = 0; start < n; start += block_size, ++b) {
    const int32_t base = seq.block_table[b] * block_size;
    const int32_t in_block = std::min(block_size, n - start);
    for (int32_t o = 0; o < in_block; ++o) slots->push_back(base + o);
  }
}

// For kHeads heads side by side, out[h][d] = sum over positions p in order of weights[h][p] *
// V[p][d], for kVecs vectors of lanes from column `col` (head h's weights at weights + h *
// weights_stride, its output at out + h * out_stride): the accumulators stay in registers across
// the positions. Each lane adds its products in position order, a multiply then an add, as the
// scalar loop it replaced did (the same bits). The accumulators lived in memory before, one
// store-to-load round trip per position on every lane's dependency chain. The query heads that
// share a KV head run together: each V row is loaded once for all of them, and their chains of
// adds overlap instead of one head's waiting out its add latency at every position. The medium
// model's shape (12 query heads over 4 KV heads of 64), one token, rows in cache, the two ways
// alternating call by call, medians of 1000-2000 calls on a Zen 5 (AVX-512, 2 threads): context
// 64 3.31 -> 2.77 us and 5.74 -> 4.98, context 256 10.94 -> 8.72, context 1024 59.7 -> 46.6; one
// thread, context 64 5.46 -> 4.41.
template <typename Rows, int kHeads, int kVecs>
void WeightedSumOfV(const float* weights, size_t weights_stride, const std::vector<int32_t>& slots,
                    const Tensor& v_cache, int64_t col, float* out, int64_t out_stride) {
  VecF acc[kHeads][kVecs];
  for (int h = 0; h < kHeads; ++h)
    for (int j = 0; j < kVecs; ++j) acc[h][j] = Zero();
  for (size_t p = 0; p < slots.size(); ++p) {
    const typename Rows::Element* v_row = CacheRow<Rows>(v_cache, slots[p]) + col;
    VecF v[kVecs];
    for (int j = 0; j < kVecs; ++j) v[j] = Rows::Load(v_row + j * kLanes);
    for (int h = 0; h < kHeads; ++h) {
      const VecF w = Broadcast(weights[h * weights_stride + p]);
      for (int j = 0; j < kVecs; ++j) acc[h][j] = Add(acc[h][j], Mul(w, v[j]));
    }
  }
  for (int h = 0; h < kHeads; ++h)
    for (int j = 0; j < kVecs; ++j) Store(out + h * out_stride + j * kLanes, acc[h][j]);
}

// WeightedSumOfV for `heads` (1 to 4) heads.
template <typename Rows, int kVecs>
void WeightedSumOfHeads(int heads, const float* weights, size_t weights_stride, const std::vector<int32_t>& slots,
                        const Tensor& v_cache, int64_t col, float* out, int64_t out_stride) {
  switch (heads) {
    case 1: return WeightedSumOfV<Rows, 1, kVecs>(weights, weights_stride, slots, v_cache, col, out, out_stride);
    case 2: return WeightedSumOfV<Rows, 2, kVecs>(weights, weights_stride, slots, v_cache, col, out, out_stride);
    case 3: return WeightedSumOfV<Rows, 3, kVecs>(weights, weights_stride, slots, v_cache, col, out, out_stride);
    default: return WeightedSumOfV<Rows, 4, kVecs>(weights, weights_stride, slots, v_cache, col, out, out_stride);
  }
}

// The weighted sums of V of `n_heads` heads (head h's weights at weights + h * weights_stride,
// its head_dim outputs at out + h * head_dim) over head_dim columns from `col`: in chunks of up
// to kMaxVecs vectors and a few heads at a time (what fits in registers beside the loads), then
// any columns past the last whole vector one by one, with the same arithmetic.
template <typename Rows>
void WeightedSum(const float* weights, size_t weights_stride, int n_heads, const std::vector<int32_t>& slots,
                 const Tensor& v_cache, int64_t col, int head_dim, float* out) {
  constexpr int kMaxVecs = 8;
  // Half the vector registers (32 with AVX-512, 16 otherwise) hold accumulators, the rest a V
  // row's vectors and the weight.
  constexpr int kMaxAccumulators = kLanes == 16 ? 16 : 8;
  int d = 0;
  while (head_dim - d >= kLanes) {
    const int vecs = std::min(kMaxVecs, (head_dim - d) / kLanes);
    const int heads_a_pass = std::clamp(kMaxAccumulators / vecs, 1, 4);
    for (int h = 0; h < n_heads; h += heads_a_pass) {
      const int heads = std::min(heads_a_pass, n_heads - h);
      const float* w = weights + h * weights_stride;
      float* o = out + static_cast<int64_t>(h) * head_dim + d;
      switch (vecs) {
        case 1: WeightedSumOfHeads<Rows, 1>(heads, w, weights_stride, slots, v_cache, col + d, o, head_dim); break;
        case 2: WeightedSumOfHeads<Rows, 2>(heads, w, weights_stride, slots, v_cache, col + d, o, head_dim); break;
        case 3: WeightedSumOfHeads<Rows, 3>(heads, w, weights_stride, slots, v_cache, col + d, o, head_dim); break;
        case 4: WeightedSumOfHeads<Rows, 4>(heads, w, weights_stride, slots, v_cache, col + d, o, head_dim); break;
        case 5: WeightedSumOfHeads<Rows, 5>(heads, w, weights_stride, slots, v_cache, col + d, o, head_dim); break;
        case 6: WeightedSumOfHeads<Rows, 6>(heads, w, weights_stride, slots, v_cache, col + d, o, head_dim); break;
        case 7: WeightedSumOfHeads<Rows, 7>(heads, w, weights_stride, slots, v_cache, col + d, o, head_dim); break;
        default:
          WeightedSumOfHeads<Rows, kMaxVecs>(heads, w, weights_stride, slots, v_cache, col + d, o, head_dim);
          break;
      }
    }
    d += vecs * kLanes;
  }
  for (int h = 0; h < n_heads; ++h) {
    for (int dd = d; dd < head_dim; ++dd) {
      float acc = 0;
      for (size_t p = 0; p < slots.size(); ++p) {
        acc += weights[h * weights_stride + p] * Rows::Scalar(CacheRow<Rows>(v_cache, slots[p]), col + dd);
      }
      out[static_cast<int64_t>(h) * head_dim + dd] = acc;
    }
  }
}

template <typename Rows>
void AttentionOver(const Tensor& q, const Tensor& k, const Tensor& v, int n_heads, const KvLayout& layout,
                   Tensor& k_cache, Tensor& v_cache, absl::Span<const AttentionSequence> sequences, Tensor& out) {
  using Element = typename Rows::Element;
  StoreNewKv<Rows>(k, v, layout, k_cache, v_cache, sequences);

  // Scratch kept per thread across calls (a decode step makes one call a layer, each with an
  // allocation here and four a thread below): the items are this thread's, shared with the
  // team by reference.
  thread_local std::vector<WorkItem> this_threads_items;
  std::vector<WorkItem>& items = this_threads_items;
  items.clear();
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

  const bool parallel = WorthParallel(visible_keys * n_heads * kWorkPerKeyAndDim * head_dim);
  ForRange(n_work, parallel, [&](int64_t first_work, int64_t end_work) {
    thread_local std::vector<int32_t> slots;
    thread_local std::vector<float> scores;  // group x visible positions
    thread_local std::vector<float> acc;
    thread_local std::vector<float> inverse;  // 1 / softmax denominator per head
    acc.resize(static_cast<size_t>(group) * head_dim);
    inverse.resize(static_cast<size_t>(group));
    for (int64_t w = first_work; w < end_work; ++w) {
      const WorkItem& item = items[w / n_kv];
      const int kv_head = static_cast<int>(w % n_kv);
      const AttentionSequence& seq = sequences[item.seq];
      const int64_t row = seq.first_row + item.node;

      // Visible positions in increasing order: the committed context, then the tree columns
      // (cached tree nodes, then this call's tokens) that are ancestors, and self.
      slots.clear();
      const int32_t committed = seq.n_context - seq.n_tree_context;
      const int32_t mask_width = seq.n_tree_context + seq.n_new;
      AppendSlots(seq, layout.block_size, committed, &slots);
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
      // Position p's K row, after asking for the K row kPrefetchSlots further on and for p's V
      // row (the weighted sum below reads it).
      auto k_row_of = [&](size_t p) {
        if (p + kPrefetchSlots < n_slots) {
          PrefetchRow(CacheRow<Rows>(k_cache, slots[p + kPrefetchSlots]) + kv_offset, head_dim);
        }
        PrefetchRow(CacheRow<Rows>(v_cache, slots[p]) + kv_offset, head_dim);
        return CacheRow<Rows>(k_cache, slots[p]) + kv_offset;
      };
      size_t p = 0;
      // kLanes positions at a time where the head is whole vectors; the rest one by one below.
      for (; head_dim % kLanes == 0 && p + kLanes <= n_slots; p += kLanes) {
        const Element* k_rows[kLanes];
        for (size_t j = 0; j < kLanes; ++j) k_rows[j] = k_row_of(p + j);
        for (int g = 0; g < group; ++g) {
          ScoresOfLanes<Rows>(q_heads + g * head_dim, k_rows, head_dim, scale, &scores[g * n_slots + p]);
        }
      }
      for (; p < n_slots; ++p) {
        const Element* k_row = k_row_of(p);
        for (int g = 0; g < group; ++g) {
          scores[g * n_slots + p] = DotWithRow<Rows>(q_heads + g * head_dim, k_row, head_dim) * scale;
        }
      }
      for (int g = 0; g < group; ++g) inverse[g] = SoftmaxInPlace(scores.data() + g * n_slots, n_slots);
      WeightedSum<Rows>(scores.data(), n_slots, group, slots, v_cache, kv_offset, head_dim, acc.data());
      for (int g = 0; g < group; ++g) {
        float* out_head = out.row(row) + (static_cast<int64_t>(kv_head) * group + g) * head_dim;
        for (int d = 0; d < head_dim; ++d) out_head[d] = acc[g * head_dim + d] * inverse[g];
      }
    }
  });
}

}  // namespace

void Attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_heads, const KvLayout& layout,
               Tensor& k_cache, Tensor& v_cache, absl::Span<const AttentionSequence> sequences,
               Tensor& out) {
  if (k_cache.dtype == DType::kF16) {
    AttentionOver<F16Rows>(q, k, v, n_heads, layout, k_cache, v_cache, sequences, out);
  } else {
    AttentionOver<F32Rows>(q, k, v, n_heads, layout, k_cache, v_cache, sequences, out);
  }
}

}  // namespace splitspec::engine::cpu
