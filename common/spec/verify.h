// Exact verification of a draft tree against the target model's outputs: greedy acceptance
// (longest path matching the target's argmax) and rejection sampling (chain and recursive
// over siblings, as in SpecInfer / SGLang's tree sampling), each emitting the accepted draft
// tokens plus one token of the target's own. Transport-free: the verifier service calls this
// on logits from its forward.
//
// Target logits layout, (1 + tree.size(), vocab) row-major:
//   row 0     : the target's prediction after the last committed token (the virtual root);
//   row 1 + i : the target's prediction after draft node i (i.e. after its root-to-i path).
// An engine step built with DraftTree::TokensWithRoot / ParentsWithRoot and logits requested
// for every node returns exactly this layout.
#ifndef SPLITSPEC_COMMON_SPEC_VERIFY_H_
#define SPLITSPEC_COMMON_SPEC_VERIFY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/engine/sampling/sampler.h"
#include "common/spec/draft_tree.h"

namespace splitspec::spec {

struct VerifyOutcome {
  // Accepted draft nodes, root-first: a path of the tree (each one's parent precedes it).
  std::vector<int32_t> accepted_nodes;
  // The accepted nodes' tokens followed by one target token: the correction sampled where
  // the walk stopped, or the bonus token after the deepest accepted node.
  std::vector<int32_t> tokens;

  // Accepted draft tokens (excluding the target's token): tokens.size() - 1.
  int32_t accept_length() const { return static_cast<int32_t>(accepted_nodes.size()); }
  // The node whose logits produced the final token (-1 = the virtual root).
  int32_t last_node() const { return accepted_nodes.empty() ? -1 : accepted_nodes.back(); }
  // The accepted path in the node numbering of an engine step built with
  // DraftTree::TokensWithRoot (root = 0, node i = i + 1): what KvCache::CommitPath keeps.
  std::vector<int32_t> AcceptedRowsWithRoot() const {
    std::vector<int32_t> rows = {0};
    for (int32_t node : accepted_nodes) rows.push_back(node + 1);
    return rows;
  }
};

// Greedy: from the root, repeatedly move to a child whose token equals the argmax of the
// current node's logits; stop when none does and emit that argmax. When duplicate sibling
// tokens let several paths match, the deepest is accepted (the lowest node index among
// equally deep ones); the emitted tokens are the same either way.
// INVALID_ARGUMENT when target_logits is not (1 + tree.size()) * vocab_size floats or the
// tree was built for another vocab size.
absl::StatusOr<VerifyOutcome> VerifyGreedy(const DraftTree& tree,
                                           absl::Span<const float> target_logits,
                                           int32_t vocab_size);

// Rejection sampling with target distributions p = ComputeProbabilities(row, params). At the
// current node the residual r starts as p; each child x in sibling order is accepted with
// probability min(1, r(x) / q(x)) (q = the child's draft distribution, one-hot at x when it
// has none); a rejected child turns r into normalize(max(r - q, 0)). An accepted child
// becomes the current node; when every child is rejected (or there are none) one token is
// drawn from r and the walk stops. The emitted tokens are distributed exactly as sampling
// from the target one token at a time, provided each node's token was drawn from its q.
// Draws one uniform per tried child plus one for the final token, so the result is a
// function of the seed. INVALID_ARGUMENT as VerifyGreedy, or for invalid params.
absl::StatusOr<VerifyOutcome> VerifyRejection(const DraftTree& tree,
                                              absl::Span<const float> target_logits,
                                              int32_t vocab_size,
                                              const engine::SamplingParams& params,
                                              engine::Rng& rng);

// VerifyGreedy for greedy params (no RNG draw), VerifyRejection otherwise.
absl::StatusOr<VerifyOutcome> Verify(const DraftTree& tree, absl::Span<const float> target_logits,
                                     int32_t vocab_size, const engine::SamplingParams& params,
                                     engine::Rng& rng);

// The shape check both verifiers share (exposed for callers that validate early).
absl::Status ValidateTargetLogits(const DraftTree& tree, absl::Span<const float> target_logits,
                                  int32_t vocab_size);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_COMMON_SPEC_VERIFY_H_
