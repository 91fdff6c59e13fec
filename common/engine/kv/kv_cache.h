// Paged KV cache: fixed-size blocks of token slots, a block table per sequence, and the
// sequence operations speculation needs (append, truncate, commit an accepted tree path).
// Storage lives on a Backend; this class owns only metadata plus the storage tensors.
//
// Not thread-safe: one owner (a verifier or drafter session manager) drives it.
#ifndef SPLITSPEC_COMMON_ENGINE_KV_KV_CACHE_H_
#define SPLITSPEC_COMMON_ENGINE_KV_KV_CACHE_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/engine/backend.h"

namespace splitspec::engine {

using SeqId = uint64_t;

struct KvCacheOptions {
  int n_layers = 0;
  int n_heads_kv = 0;
  int head_dim = 0;
  int n_blocks = 0;
  int block_size = 16;
  // How K and V rows are stored: F32, or F16 (half the bytes a step reads and the memory a
  // token takes; each value rounded to the nearest half once, when its row is written) where
  // the backend supports it (Backend::SupportsKvDType).
  DType dtype = DType::kF32;
};

// "f32" or "f16", the values of the services' and tools' --kv-dtype flag.
absl::StatusOr<DType> ParseKvDType(std::string_view name);

class KvCache {
 public:
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(Backend& backend, const KvCacheOptions& options);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // ALREADY_EXISTS if present.
  absl::Status AddSequence(SeqId seq);
  bool HasSequence(SeqId seq) const;
  // Frees every block of the sequence and forgets it. No-op for unknown ids.
  void Release(SeqId seq);

  // Tokens currently stored for the sequence (committed plus any appended this step).
  int32_t Length(SeqId seq) const;
  // Grows the block table so that `n_extra` more tokens fit and bumps the length by n_extra;
  // RESOURCE_EXHAUSTED (nothing changed) when free blocks do not suffice.
  absl::Status Append(SeqId seq, int32_t n_extra);
  // Keeps the first `n` tokens; frees blocks no longer needed. INVALID_ARGUMENT if n > Length.
  absl::Status Truncate(SeqId seq, int32_t n);
  // After a tree step that appended nodes at positions [base, base + n_nodes): moves the K/V
  // of `accepted_nodes` (node indices, root first, increasing) to positions base, base+1, ...,
  // and truncates to base + accepted_nodes.size().
  absl::Status CommitPath(SeqId seq, int32_t base, absl::Span<const int32_t> accepted_nodes);

  // Blocks needed to hold `n_tokens` more tokens for `seq` (0 for an unknown seq means a new one).
  int32_t BlocksNeeded(SeqId seq, int32_t n_tokens) const;
  int32_t free_blocks() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t total_blocks() const { return options_.n_blocks; }
  int32_t block_size() const { return options_.block_size; }
  int32_t n_sequences() const { return static_cast<int32_t>(sequences_.size()); }

  // For the model and backends.
  const std::vector<int32_t>& BlockTable(SeqId seq) const;
  // Physical slot of logical position `pos` of `seq`.
  int32_t Slot(SeqId seq, int32_t pos) const;
  Tensor& k(int layer) { return k_[layer]; }
  Tensor& v(int layer) { return v_[layer]; }
  KvLayout layout() const { return {options_.block_size, options_.n_heads_kv, options_.head_dim}; }

 private:
  struct Sequence {
    std::vector<int32_t> blocks;
    int32_t length = 0;
  };
  KvCache(Backend& backend, const KvCacheOptions& options);
  Sequence* Find(SeqId seq);
  const Sequence* Find(SeqId seq) const;

  Backend& backend_;
  KvCacheOptions options_;
  std::vector<Tensor> k_;  // per layer: (n_blocks * block_size, n_heads_kv * head_dim)
  std::vector<Tensor> v_;
  std::vector<int32_t> free_list_;
  std::unordered_map<SeqId, Sequence> sequences_;
};

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_KV_KV_CACHE_H_
