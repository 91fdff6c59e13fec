// N-gram prompt-lookup proposer (see ngram_proposer.h).
#include "drafter/ngram_proposer.h"

#include <algorithm>
#include <utility>

#include "drafter/continuation_trie.h"

namespace splitspec::drafter {
namespace {

// Earlier occurrences a tree is built from: enough to rank the usual continuations, few enough
// that a step stays cheap on a long, repetitive history.
constexpr int32_t kMaxOccurrences = 64;

}  // namespace

absl::StatusOr<std::unique_ptr<NgramProposer>> NgramProposer::Create(const spec::NgramMatcherOptions& options) {
  // Create validates the options once, up front, instead of at the first request.
  absl::StatusOr<spec::NgramMatcher> probe = spec::NgramMatcher::Create(options);
  if (!probe.ok()) return probe.status();
  return std::unique_ptr<NgramProposer>(new NgramProposer(options));
}

absl::StatusOr<std::vector<spec::DraftProposal>> NgramProposer::Propose(absl::Span<const ProposeTask> tasks) {
  std::vector<spec::DraftProposal> proposals(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    const ProposeTask& task = tasks[i];
    auto it = matchers_.find(task.id);
    if (it == matchers_.end()) {
      absl::StatusOr<spec::NgramMatcher> matcher = spec::NgramMatcher::Create(options_);
      if (!matcher.ok()) return matcher.status();
      it = matchers_.emplace(task.id, *std::move(matcher)).first;
    }
    spec::NgramMatcher& matcher = it->second;
    if (absl::Status s = matcher.SyncTo(*task.history); !s.ok()) return s;
    if (task.shape.depth <= 0) continue;
    if (task.shape.branching > 1) {
      // A tree: every continuation found, merged, the most frequent paths first.
      const int32_t budget = task.shape.max_nodes > 0 ? task.shape.max_nodes : task.shape.depth * task.shape.branching;
      const ContinuationTrie trie(matcher.Continuations(task.shape.depth, kMaxOccurrences));
      proposals[i] = trie.Cut(task.shape.depth, task.shape.branching, budget);
      continue;
    }
    spec::NgramMatch match = matcher.Propose(task.shape.depth);
    proposals[i].tokens = std::move(match.tokens);
    proposals[i].parents.resize(proposals[i].tokens.size());
    for (size_t n = 0; n < proposals[i].parents.size(); ++n) proposals[i].parents[n] = static_cast<int32_t>(n) - 1;
  }
  return proposals;
}

void NgramProposer::Release(spec::RequestId id) { matchers_.erase(id); }

ProposerInfo NgramProposer::Info() const {
  ProposerInfo info;
  info.name = "ngram";
  return info;
}

}  // namespace splitspec::drafter
