// The Backend interface: memory plus the handful of ops a Llama forward needs. The model
// (model/llama_model.cc) calls only this, so a CUDA backend slots in beside the CPU one.
//
// Batch invariance contract (what makes speculative greedy output equal plain greedy output
// bit for bit): every op computes each output element from the inputs of its own token only,
// with a reduction order fixed by the element's coordinates and the model shape, never by the
// number of tokens in the batch, the batch composition or the thread count. The CPU backend
// keeps this by giving each output element exactly one owner that reduces in a fixed order.
#ifndef SPLITSPEC_COMMON_ENGINE_BACKEND_H_
#define SPLITSPEC_COMMON_ENGINE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/engine/tensor.h"

namespace splitspec::engine {

// Precomputed rotary-embedding tables: cos/sin of position * inv_freq[i].
struct RopeTables {
  int head_dim = 0;
  std::vector<float> inv_freq;  // (head_dim / 2)
};

// One sequence's slice of an attention call. Its new tokens occupy rows
// [first_row, first_row + n_new) of q/k/v and are written to the sequence's KV positions
// [n_context, n_context + n_new) in node order.
//
// The last n_tree_context positions of the context are tree nodes an earlier forward left in
// the cache (a drafter growing a tree one depth per forward); the positions before them,
// [0, n_context - n_tree_context), are committed. New token i attends to every committed
// position and to the tree columns c in [0, n_tree_context + n_new) -- cached nodes first,
// then this call's new tokens -- with ancestor_mask[i * (n_tree_context + n_new) + c] != 0
// (its tree ancestors and itself). Parents always precede children, so keys are visited in
// increasing position order, exactly as the root-to-node path run as a chain would visit them.
struct AttentionSequence {
  const int32_t* block_table = nullptr;  // physical block of each logical block
  int32_t n_context = 0;
  int32_t n_new = 0;
  int32_t first_row = 0;
  // (n_new, n_tree_context + n_new); nullptr means causal chain (then n_tree_context is 0).
  const uint8_t* ancestor_mask = nullptr;
  int32_t n_tree_context = 0;
};

// Shape of the paged KV storage the attention op reads: per layer one K and one V tensor of
// (n_blocks * block_size, n_heads_kv * head_dim), token slot = block * block_size + offset.
struct KvLayout {
  int block_size = 16;
  int n_heads_kv = 0;
  int head_dim = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // ---- memory -------------------------------------------------------------------------
  // A tensor of `dtype` (rows, cols), zero-filled. RESOURCE_EXHAUSTED when out of memory.
  virtual absl::StatusOr<Tensor> Allocate(DType dtype, int64_t rows, int64_t cols) = 0;
  virtual void Free(Tensor& tensor) = 0;
  // Copies raw host bytes of tensor.dtype into the tensor (weights at load time).
  virtual void Upload(const void* host, Tensor& tensor) = 0;
  // Copies rows [first_row, first_row + n_rows) of an f32 tensor to host memory.
  virtual void DownloadRows(const Tensor& tensor, int64_t first_row, int64_t n_rows, float* host) = 0;

  // ---- ops (activations are f32) ------------------------------------------------------
  // out[t] = table[tokens[t]] converted to f32. table: (vocab, dim).
  virtual void Embed(const Tensor& table, absl::Span<const int32_t> tokens, Tensor& out) = 0;
  // out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight. weight: (1, dim) f32.
  virtual void RmsNorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) = 0;
  // out[t] = W x[t] (+ bias) for the listed rows of x only (all rows when `rows` is empty);
  // out row r corresponds to x row rows[r]. W: (n_out, n_in) any dtype; bias: (1, n_out) f32.
  virtual void MatMul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
                      absl::Span<const int32_t> rows = {}) = 0;
  // The same for a row-wise concatenation of weights W = [W_0; W_1; ...] (fused projections
  // such as q, k and v, read as one stream): outs[i][t] = W_i x[t] (+ bias_i), where W_i is the
  // next outs[i]->cols rows of W and bias, when set, is concatenated the same way. The default
  // runs one MatMul per part on row slices of W, for a backend that holds W row by row; one that
  // does not (the CPU backend's Q8_0 groups of rows) overrides it, as may one that shares a pass.
  virtual void MatMulSplit(const Tensor& x, const Tensor& w, const Tensor* bias, absl::Span<Tensor* const> outs);
  // Rotates each head of x (n_tokens, n_heads * head_dim) by its token's position
  // (Llama's half-split rotation: pairs (i, i + head_dim/2)).
  virtual void Rope(Tensor& x, int n_heads, const RopeTables& tables,
                    absl::Span<const int32_t> positions) = 0;
  // out[t] = silu(gate[t]) * up[t]; gate_up: (n_tokens, 2 * n) with gate first.
  virtual void SiluMul(const Tensor& gate_up, Tensor& out) = 0;
  // acc += x
  virtual void Add(Tensor& acc, const Tensor& x) = 0;
  // Writes k/v rows into the cache, then computes softmax(q k^T / sqrt(head_dim)) v per head
  // with grouped-query heads (query head h reads KV head h / (n_heads / n_heads_kv)).
  // q, out: (n_tokens, n_heads * head_dim); k, v: (n_tokens, n_heads_kv * head_dim).
  virtual void Attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_heads,
                         const KvLayout& layout, Tensor& k_cache, Tensor& v_cache,
                         absl::Span<const AttentionSequence> sequences, Tensor& out) = 0;
  // For each i: cache slot dst[i] <- slot src[i] in k_cache and v_cache (KV compaction).
  // Applied in order; callers guarantee dst[i] <= src[i] and increasing dst, so no overwrite.
  virtual void CopyKvSlots(Tensor& k_cache, Tensor& v_cache, absl::Span<const int32_t> src,
                           absl::Span<const int32_t> dst) = 0;
  // Whether Attention and CopyKvSlots take K/V caches of `dtype` (every backend: F32).
  virtual bool SupportsKvDType(DType dtype) const { return dtype == DType::kF32; }
};

struct CpuBackendOptions {
  int n_threads = 0;  // 0 = OpenMP default (all cores)
  // Buffers of 64 KiB and more in 2 MiB-aligned chunks advised huge pages (cpu/host_memory.h);
  // false: every buffer from the C allocator, in base pages.
  bool huge_page_chunks = true;
};
std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options = {});

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_BACKEND_H_
