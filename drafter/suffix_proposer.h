// Suffix proposer (suffix decoding, as in ArcticInference and vLLM's `suffix` method): drafts
// from what followed the current suffix before, in the request's own tokens and in a shared
// cache of recently finished requests (agents, code edits and templated answers repeat across
// requests). Each request's tokens are indexed incrementally (common/spec/ngram_matcher.h);
// the cache is one index over the released requests' token sequences, oldest evicted first
// once it holds more than `cache_tokens` (rebuilt when a quarter of it went, so eviction costs
// amortised O(1) per token). The continuations found -- the request's own most recent first,
// then the cache's -- are merged into a trie and cut into a tree of the most frequent paths
// (continuation_trie.h), each node scored by its frequency; a chain request gets the single
// most frequent path. Deterministic drafts: exact for greedy and sampled requests alike.
//
// Memory: the per-request indexes hold each live request's history (as the drafter core does);
// the shared cache at most `cache_tokens` tokens plus its index (a few words per token).
//
// Not thread-safe (see Proposer).
#ifndef SPLITSPEC_DRAFTER_SUFFIX_PROPOSER_H_
#define SPLITSPEC_DRAFTER_SUFFIX_PROPOSER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/ngram_matcher.h"
#include "drafter/proposer.h"

namespace splitspec::drafter {

struct SuffixOptions {
  int32_t min_n = 1;
  int32_t max_n = 16;                // longest suffix matched
  int64_t cache_tokens = 1 << 20;    // shared cache bound; 0 = no cache (own tokens only)
  int32_t max_occurrences = 64;      // continuations gathered per source per step
};

class SuffixProposer : public Proposer {
 public:
  // INVALID_ARGUMENT for n-gram lengths NgramMatcher refuses or a negative cache.
  static absl::StatusOr<std::unique_ptr<SuffixProposer>> Create(const SuffixOptions& options);

  absl::StatusOr<std::vector<spec::DraftProposal>> Propose(absl::Span<const ProposeTask> tasks) override;
  // Moves the request's tokens into the shared cache.
  void Release(spec::RequestId id) override;
  ProposerInfo Info() const override;

  int64_t cached_tokens() const { return cached_tokens_; }

 private:
  SuffixProposer(const SuffixOptions& options, spec::NgramMatcher cache)
      : options_(options), cache_(std::move(cache)) {}
  void AddToCache(std::vector<int32_t> tokens);
  void RebuildCache();

  SuffixOptions options_;
  std::unordered_map<spec::RequestId, spec::NgramMatcher> requests_;
  std::deque<std::vector<int32_t>> cached_;  // released sequences, oldest first
  int64_t cached_tokens_ = 0;
  int64_t evicted_since_rebuild_ = 0;
  spec::NgramMatcher cache_;  // index over cached_, sequences separated by a sentinel
};

}  // namespace splitspec::drafter

#endif  // SPLITSPEC_DRAFTER_SUFFIX_PROPOSER_H_
