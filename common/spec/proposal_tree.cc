// DraftProposal <-> DraftTree conversions.
#include "common/spec/proposal_tree.h"

#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace splitspec::spec {

absl::StatusOr<DraftTree> DraftTreeFromProposal(const DraftProposal& proposal,
                                                const DraftTreeLimits& limits) {
  std::vector<DraftDistribution> draft_probs;
  if (!proposal.probs.empty()) {
    const size_t n = proposal.tokens.size();
    const size_t vocab = limits.vocab_size > 0 ? static_cast<size_t>(limits.vocab_size) : 0;
    if (vocab == 0 || proposal.probs.size() != n * vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "draft probabilities have ", proposal.probs.size(), " values; ", n,
          " nodes need none or ", n, " x vocab ", limits.vocab_size, " = ", n * vocab));
    }
    const absl::Span<const float> all(proposal.probs);
    for (size_t i = 0; i < n; ++i) {
      draft_probs.push_back(DraftDistribution::FromDense(all.subspan(i * vocab, vocab)));
    }
  }
  return DraftTree::Create(proposal.tokens, proposal.parents, std::move(draft_probs), limits);
}

DraftProposal ProposalFromDraftTree(const DraftTree& tree) {
  DraftProposal proposal;
  proposal.tokens.assign(tree.tokens().begin(), tree.tokens().end());
  proposal.parents.assign(tree.parents().begin(), tree.parents().end());
  bool any = false;
  for (int32_t i = 0; i < tree.size(); ++i) any = any || tree.has_draft_probs(i);
  if (!any) return proposal;
  const size_t vocab = static_cast<size_t>(tree.vocab_size());
  proposal.probs.assign(static_cast<size_t>(tree.size()) * vocab, 0.0f);
  for (int32_t i = 0; i < tree.size(); ++i) {
    float* row = proposal.probs.data() + static_cast<size_t>(i) * vocab;
    if (!tree.has_draft_probs(i)) {
      row[tree.token(i)] = 1.0f;
      continue;
    }
    const DraftDistribution& q = tree.draft_probs(i);
    double total = 0.0;
    for (float p : q.probs) total += p;
    for (size_t j = 0; j < q.token_ids.size(); ++j) {
      // A positive probability stays positive: one far below the row's largest would round to
      // 0 in float, and a node's own token at 0 is a proposal the tree check refuses.
      const float p = static_cast<float>(q.probs[j] / total);
      row[q.token_ids[j]] += p > 0.0f || q.probs[j] <= 0.0f ? p : std::numeric_limits<float>::denorm_min();
    }
  }
  return proposal;
}

}  // namespace splitspec::spec
