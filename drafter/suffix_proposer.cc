// Suffix proposer (see suffix_proposer.h).
#include "drafter/suffix_proposer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "drafter/continuation_trie.h"

namespace splitspec::drafter {
namespace {

// Between cached sequences: never a token, so no match runs from one sequence into the next.
constexpr int32_t kSeparator = -1;

spec::NgramMatcherOptions MatcherOptions(const SuffixOptions& options) { return {options.min_n, options.max_n}; }

}  // namespace

absl::StatusOr<std::unique_ptr<SuffixProposer>> SuffixProposer::Create(const SuffixOptions& options) {
  if (options.cache_tokens < 0) return absl::InvalidArgumentError("the suffix cache bound must be >= 0");
  if (options.max_occurrences < 1) return absl::InvalidArgumentError("max_occurrences must be >= 1");
  absl::StatusOr<spec::NgramMatcher> cache = spec::NgramMatcher::Create(MatcherOptions(options));
  if (!cache.ok()) return cache.status();
  return std::unique_ptr<SuffixProposer>(new SuffixProposer(options, *std::move(cache)));
}

absl::StatusOr<std::vector<spec::DraftProposal>> SuffixProposer::Propose(absl::Span<const ProposeTask> tasks) {
  std::vector<spec::DraftProposal> proposals(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    const ProposeTask& task = tasks[i];
    auto it = requests_.find(task.id);
    if (it == requests_.end()) {
      absl::StatusOr<spec::NgramMatcher> matcher = spec::NgramMatcher::Create(MatcherOptions(options_));
      if (!matcher.ok()) return matcher.status();
      it = requests_.emplace(task.id, *std::move(matcher)).first;
    }
    spec::NgramMatcher& own = it->second;
    const std::vector<int32_t>& history = *task.history;
    if (absl::Status s = own.SyncTo(history); !s.ok()) return s;
    const int32_t depth = task.shape.depth;
    if (depth <= 0) continue;
    std::vector<std::vector<int32_t>> continuations = own.Continuations(depth, options_.max_occurrences);
    const size_t tail = std::min<size_t>(history.size(), static_cast<size_t>(options_.max_n));
    for (std::vector<int32_t>& c :
         cache_.ContinuationsOf(absl::MakeConstSpan(history).last(tail), depth, options_.max_occurrences)) {
      // A cached continuation stops at the end of its sequence.
      c.erase(std::find(c.begin(), c.end(), kSeparator), c.end());
      if (!c.empty()) continuations.push_back(std::move(c));
    }
    const int32_t branching = std::max(task.shape.branching, 1);
    const int32_t budget = branching == 1 ? depth
                                          : (task.shape.max_nodes > 0 ? task.shape.max_nodes : depth * branching);
    proposals[i] = ContinuationTrie(continuations).Cut(depth, branching, budget);
  }
  return proposals;
}

void SuffixProposer::Release(spec::RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  std::vector<int32_t> tokens(it->second.history().begin(), it->second.history().end());
  requests_.erase(it);
  AddToCache(std::move(tokens));
}

void SuffixProposer::AddToCache(std::vector<int32_t> tokens) {
  if (options_.cache_tokens <= 0 || tokens.empty()) return;
  if (static_cast<int64_t>(tokens.size()) > options_.cache_tokens) {
    tokens.erase(tokens.begin(), tokens.end() - options_.cache_tokens);  // keep its end
  }
  cache_.Append(tokens);
  cache_.Append(kSeparator);
  cached_tokens_ += static_cast<int64_t>(tokens.size());
  cached_.push_back(std::move(tokens));
  while (cached_tokens_ > options_.cache_tokens) {
    cached_tokens_ -= static_cast<int64_t>(cached_.front().size());
    evicted_since_rebuild_ += static_cast<int64_t>(cached_.front().size());
    cached_.pop_front();
  }
  // The index still holds evicted sequences (matches there only cost time); drop them once a
  // quarter of the bound went, so the index stays within 1.25x the bound.
  if (evicted_since_rebuild_ * 4 > options_.cache_tokens) RebuildCache();
}

void SuffixProposer::RebuildCache() {
  cache_ = *spec::NgramMatcher::Create(MatcherOptions(options_));
  for (const std::vector<int32_t>& sequence : cached_) {
    cache_.Append(sequence);
    cache_.Append(kSeparator);
  }
  evicted_since_rebuild_ = 0;
}

ProposerInfo SuffixProposer::Info() const {
  ProposerInfo info;
  info.name = "suffix";
  return info;
}

}  // namespace splitspec::drafter
