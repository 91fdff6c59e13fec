// N-gram prompt-lookup proposer: for each request, the longest suffix of its history (length in
// [min_n, max_n]) that occurred earlier in the prompt or output, and the up-to-k tokens that
// followed it (common/spec/ngram_matcher.h does the linear-time matching). A chain is the most
// recent occurrence's continuation; a tree (branching > 1) merges the continuations of up to 64
// earlier occurrences (over every matching n) into a trie and keeps its most frequent paths,
// each node scored by its share of its parent's occurrences (continuation_trie.h).
#ifndef SPLITSPEC_DRAFTER_NGRAM_PROPOSER_H_
#define SPLITSPEC_DRAFTER_NGRAM_PROPOSER_H_

#include <memory>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "common/spec/ngram_matcher.h"
#include "drafter/proposer.h"

namespace splitspec::drafter {

// Not thread-safe (see Proposer).
class NgramProposer : public Proposer {
 public:
  // INVALID_ARGUMENT unless 1 <= min_n <= max_n <= NgramMatcher::kMaxN.
  static absl::StatusOr<std::unique_ptr<NgramProposer>> Create(const spec::NgramMatcherOptions& options);

  absl::StatusOr<std::vector<spec::DraftProposal>> Propose(absl::Span<const ProposeTask> tasks) override;
  void Release(spec::RequestId id) override;
  ProposerInfo Info() const override;

 private:
  explicit NgramProposer(const spec::NgramMatcherOptions& options) : options_(options) {}

  spec::NgramMatcherOptions options_;
  // One incremental matcher per request, holding the history it has indexed.
  std::unordered_map<spec::RequestId, spec::NgramMatcher> matchers_;
};

}  // namespace splitspec::drafter

#endif  // SPLITSPEC_DRAFTER_NGRAM_PROPOSER_H_
