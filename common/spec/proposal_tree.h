// Conversions between the worker contract's DraftProposal (worker_api.h: tokens, parents and
// optional dense draft probabilities) and the validated DraftTree that verification walks.
#ifndef SPLITSPEC_COMMON_SPEC_PROPOSAL_TREE_H_
#define SPLITSPEC_COMMON_SPEC_PROPOSAL_TREE_H_

#include "absl/status/statusor.h"
#include "common/spec/draft_tree.h"
#include "common/spec/worker_api.h"

namespace splitspec::spec {

// INVALID_ARGUMENT for everything DraftTree::Create rejects, and when `probs` is neither
// empty nor (n_nodes, vocab_size). Each dense row becomes the node's DraftDistribution.
absl::StatusOr<DraftTree> DraftTreeFromProposal(const DraftProposal& proposal,
                                                const DraftTreeLimits& limits);

// The inverse: probs stay empty when no node has a draft distribution; otherwise every node
// gets a dense normalised row (one-hot at its token for nodes without one), in which positive
// probabilities stay positive, so the result builds the same tree again.
DraftProposal ProposalFromDraftTree(const DraftTree& tree);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_COMMON_SPEC_PROPOSAL_TREE_H_
