// Paged KV cache bookkeeping: free list, block tables, and the sequence operations.
#include "common/engine/kv/kv_cache.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace splitspec::engine {

absl::StatusOr<DType> ParseKvDType(std::string_view name) {
  if (name == "f32") return DType::kF32;
  if (name == "f16") return DType::kF16;
  return absl::InvalidArgumentError(absl::StrCat("unknown KV cache dtype '", std::string(name), "' (f32 or f16)"));
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(Backend& backend, const KvCacheOptions& options) {
  if (options.n_layers <= 0 || options.n_heads_kv <= 0 || options.head_dim <= 0 || options.n_blocks <= 0 ||
      options.block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("bad KV cache shape: layers=", options.n_layers,
                                                   " kv_heads=", options.n_heads_kv, " head_dim=", options.head_dim,
                                                   " blocks=", options.n_blocks, " block_size=", options.block_size));
  }
  if (!backend.SupportsKvDType(options.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("a KV cache of ", std::string(DTypeName(options.dtype)), " is not supported on the ",
                                                   std::string(backend.name()), " backend"));
  }
  std::unique_ptr<KvCache> cache(new KvCache(backend, options));
  const int64_t n_slots = static_cast<int64_t>(options.n_blocks) * options.block_size;
  const int64_t width = static_cast<int64_t>(options.n_heads_kv) * options.head_dim;
  for (int layer = 0; layer < options.n_layers; ++layer) {
    absl::StatusOr<Tensor> k = backend.Allocate(options.dtype, n_slots, width);
    if (!k.ok()) return k.status();
    cache->k_.push_back(*k);
    absl::StatusOr<Tensor> v = backend.Allocate(options.dtype, n_slots, width);
    if (!v.ok()) return v.status();
    cache->v_.push_back(*v);
  }
  // The free list after the rows: a cache too large for the memory fails above, before a list
  // of n_blocks entries (4 bytes each, written at once) is built for it.
  // Hand out low block numbers first: reverse order so pop_back yields 0, 1, 2, ...
  cache->free_list_.reserve(options.n_blocks);
  for (int32_t b = options.n_blocks - 1; b >= 0; --b) cache->free_list_.push_back(b);
  return cache;
}

KvCache::KvCache(Backend& backend, const KvCacheOptions& options) : backend_(backend), options_(options) {}

KvCache::~KvCache() {
  for (Tensor& t : k_) backend_.Free(t);
  for (Tensor& t : v_) backend_.Free(t);
}

KvCache::Sequence* KvCache::Find(SeqId seq) {
  auto it = sequences_.find(seq);
  return it == sequences_.end() ? nullptr : &it->second;
}

const KvCache::Sequence* KvCache::Find(SeqId seq) const {
  auto it = sequences_.find(seq);
  return it == sequences_.end() ? nullptr : &it->second;
}

absl::Status KvCache::AddSequence(SeqId seq) {
  if (!sequences_.emplace(seq, Sequence{}).second) {
    return absl::AlreadyExistsError(absl::StrCat("sequence ", seq, " already in the KV cache"));
  }
  return absl::OkStatus();
}

bool KvCache::HasSequence(SeqId seq) const { return Find(seq) != nullptr; }

void KvCache::Release(SeqId seq) {
  Sequence* s = Find(seq);
  if (s == nullptr) return;
  for (auto it = s->blocks.rbegin(); it != s->blocks.rend(); ++it) free_list_.push_back(*it);
  sequences_.erase(seq);
}

int32_t KvCache::Length(SeqId seq) const {
  const Sequence* s = Find(seq);
  return s == nullptr ? 0 : s->length;
}

int32_t KvCache::BlocksNeeded(SeqId seq, int32_t n_tokens) const {
  const Sequence* s = Find(seq);
  const int64_t length = s == nullptr ? 0 : s->length;
  const int64_t have = s == nullptr ? 0 : static_cast<int64_t>(s->blocks.size());
  const int64_t need = (length + n_tokens + options_.block_size - 1) / options_.block_size;
  return static_cast<int32_t>(std::max<int64_t>(0, need - have));
}

absl::Status KvCache::Append(SeqId seq, int32_t n_extra) {
  Sequence* s = Find(seq);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("sequence ", seq, " not in the KV cache"));
  if (n_extra < 0) return absl::InvalidArgumentError("cannot append a negative number of tokens");
  const int32_t needed = BlocksNeeded(seq, n_extra);
  if (needed > free_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat("KV cache full: sequence ", seq, " needs ", needed,
                                                     " more blocks, ", free_blocks(), " free"));
  }
  for (int32_t i = 0; i < needed; ++i) {
    s->blocks.push_back(free_list_.back());
    free_list_.pop_back();
  }
  s->length += n_extra;
  return absl::OkStatus();
}

absl::Status KvCache::Truncate(SeqId seq, int32_t n) {
  Sequence* s = Find(seq);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("sequence ", seq, " not in the KV cache"));
  if (n < 0 || n > s->length) {
    return absl::InvalidArgumentError(absl::StrCat("cannot truncate sequence ", seq, " of length ", s->length,
                                                   " to ", n));
  }
  s->length = n;
  const size_t keep = static_cast<size_t>((n + options_.block_size - 1) / options_.block_size);
  while (s->blocks.size() > keep) {
    free_list_.push_back(s->blocks.back());
    s->blocks.pop_back();
  }
  return absl::OkStatus();
}

absl::Status KvCache::CommitPath(SeqId seq, int32_t base, absl::Span<const int32_t> accepted_nodes) {
  Sequence* s = Find(seq);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("sequence ", seq, " not in the KV cache"));
  const int32_t n_nodes = s->length - base;
  if (base < 0 || n_nodes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("commit base ", base, " beyond sequence length ", s->length));
  }
  std::vector<int32_t> src;
  std::vector<int32_t> dst;
  for (size_t i = 0; i < accepted_nodes.size(); ++i) {
    const int32_t node = accepted_nodes[i];
    if (node < 0 || node >= n_nodes || (i > 0 && node <= accepted_nodes[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat("accepted node ", node, " is out of range or out of order (",
                                                     n_nodes, " nodes appended)"));
    }
    if (node != static_cast<int32_t>(i)) {
      src.push_back(Slot(seq, base + node));
      dst.push_back(Slot(seq, base + static_cast<int32_t>(i)));
    }
  }
  if (!src.empty()) {
    for (int layer = 0; layer < options_.n_layers; ++layer) backend_.CopyKvSlots(k_[layer], v_[layer], src, dst);
  }
  return Truncate(seq, base + static_cast<int32_t>(accepted_nodes.size()));
}

const std::vector<int32_t>& KvCache::BlockTable(SeqId seq) const {
  static const std::vector<int32_t> kEmpty;
  const Sequence* s = Find(seq);
  return s == nullptr ? kEmpty : s->blocks;
}

int32_t KvCache::Slot(SeqId seq, int32_t pos) const {
  const Sequence* s = Find(seq);
  return s->blocks[pos / options_.block_size] * options_.block_size + pos % options_.block_size;
}

}  // namespace splitspec::engine
