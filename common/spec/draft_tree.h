// DraftTree: the speculative tokens of one request for one step, arranged as a tree hanging
// off the last committed token, with the structure queries verification and the engine need
// (depths, children / next-sibling links, ancestor mask, root-to-node paths) and the shape
// builders (chain, top-k per depth).
//
// Conventions used across common/spec:
// - Node i has token tokens[i] and parent parents[i]: -1 means a child of the last committed
//   token (the "virtual root"), otherwise an earlier node (parents[i] < i).
// - depth(i) = 1 + depth(parent), the virtual root having depth 0: node i is the depth(i)-th
//   speculated token of its path. When the verifier feeds the last committed token as engine
//   node 0 followed by the tree (ParentsWithRoot()), engine depths equal these depths.
// - Siblings are ordered by node index; first_child / next_sibling walk them in that order.
#ifndef SPLITSPEC_COMMON_SPEC_DRAFT_TREE_H_
#define SPLITSPEC_COMMON_SPEC_DRAFT_TREE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace splitspec::spec {

// The distribution q a draft node's token was drawn from, given the tokens of its earlier
// siblings: for siblings drawn i.i.d. from the drafter's distribution every sibling carries
// that same q; for siblings drawn without replacement, each carries q renormalised without
// the earlier siblings' tokens. Sparse (token, probability) pairs, so a top-k-sampled draft
// sends k entries and a full-vocabulary draft sends them all; duplicate ids add up and the
// probabilities are renormalised by the verifier. Exact rejection sampling needs the whole of
// q (the residual max(p - q, 0) depends on every entry), which is why q(token) alone is not
// enough. Empty = a deterministic proposal (n-gram lookup, greedy draft): q is one-hot at
// the node's token.
struct DraftDistribution {
  std::vector<int32_t> token_ids;
  std::vector<float> probs;

  bool empty() const { return token_ids.empty(); }
  // Keeps the positive entries of a dense (vocab) distribution.
  static DraftDistribution FromDense(absl::Span<const float> dense);
};

struct DraftTreeLimits {
  int32_t vocab_size = 0;  // token ids must be in [0, vocab_size)
  int32_t max_nodes = 256;
};

// Immutable once built. Thread-safety: const methods may be called concurrently.
class DraftTree {
 public:
  // The empty tree (a plain decode step).
  DraftTree() = default;

  // INVALID_ARGUMENT naming the first bad node: sizes differ, more than max_nodes nodes,
  // parent out of range or not earlier, token outside the vocab, a malformed draft
  // distribution (ids out of vocab, negative / non-finite probabilities, zero mass, or zero
  // probability for the node's own token). `draft_probs` is empty or has one entry per node
  // (entries may individually be empty).
  static absl::StatusOr<DraftTree> Create(std::vector<int32_t> tokens, std::vector<int32_t> parents,
                                          std::vector<DraftDistribution> draft_probs,
                                          const DraftTreeLimits& limits);
  // A chain: node i's parent is i - 1.
  static absl::StatusOr<DraftTree> Chain(std::vector<int32_t> tokens, const DraftTreeLimits& limits,
                                         std::vector<DraftDistribution> draft_probs = {});

  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  bool empty() const { return tokens_.empty(); }
  int32_t vocab_size() const { return vocab_size_; }
  absl::Span<const int32_t> tokens() const { return tokens_; }
  absl::Span<const int32_t> parents() const { return parents_; }
  absl::Span<const int32_t> depths() const { return depths_; }
  int32_t token(int32_t node) const { return tokens_[node]; }
  int32_t parent(int32_t node) const { return parents_[node]; }
  int32_t depth(int32_t node) const { return depths_[node]; }
  // Deepest node's depth (the longest possible accept length); 0 for the empty tree.
  int32_t max_depth() const { return max_depth_; }

  // First child of `node` (-1 = the virtual root), or -1 when it has none.
  int32_t first_child(int32_t node) const {
    return node < 0 ? root_first_child_ : first_child_[node];
  }
  // Next node with the same parent, in index order, or -1.
  int32_t next_sibling(int32_t node) const { return next_sibling_[node]; }
  std::vector<int32_t> Children(int32_t node) const;
  bool IsLeaf(int32_t node) const { return first_child(node) < 0; }

  // q for `node`; empty when the proposal was deterministic.
  bool has_draft_probs(int32_t node) const {
    return !draft_probs_.empty() && !draft_probs_[node].empty();
  }
  const DraftDistribution& draft_probs(int32_t node) const { return draft_probs_[node]; }

  // Node indices from the depth-1 ancestor down to `node` inclusive ({} for -1).
  std::vector<int32_t> PathTo(int32_t node) const;
  // (size, size) row-major: mask[i * size + j] = 1 iff j is an ancestor of i or j == i. The
  // layout AttentionSequence::ancestor_mask expects.
  std::vector<uint8_t> AncestorMask() const;
  // Parents for an engine step that feeds the last committed token as node 0 and then the
  // tree: {-1, parents[0] + 1, ...}. Logit row r of that step is row r of TargetLogits.
  std::vector<int32_t> ParentsWithRoot() const;
  // Tokens for that step: {last_token, tokens...}.
  std::vector<int32_t> TokensWithRoot(int32_t last_token) const;

 private:
  int32_t vocab_size_ = 0;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> parents_;
  std::vector<DraftDistribution> draft_probs_;  // empty or one per node
  std::vector<int32_t> depths_;
  std::vector<int32_t> first_child_;
  std::vector<int32_t> next_sibling_;
  int32_t root_first_child_ = -1;
  int32_t max_depth_ = 0;
};

// Adds nodes one at a time (a drafter expanding a tree level by level). Not thread-safe.
class DraftTreeBuilder {
 public:
  // Returns the new node's index. Checks happen in Build().
  int32_t Add(int32_t parent, int32_t token, DraftDistribution draft_probs = {});
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  absl::StatusOr<DraftTree> Build(const DraftTreeLimits& limits) &&;

 private:
  std::vector<int32_t> tokens_;
  std::vector<int32_t> parents_;
  std::vector<DraftDistribution> draft_probs_;
  bool any_draft_probs_ = false;
};

// INVALID_ARGUMENT unless every parents[i] is in [-1, i).
absl::Status ValidateParents(absl::Span<const int32_t> parents);
// The ancestor mask of a valid parent array (see DraftTree::AncestorMask).
std::vector<uint8_t> AncestorMaskFromParents(absl::Span<const int32_t> parents);
// {-1, 0, 1, ..., k - 2}.
std::vector<int32_t> ChainParents(int32_t k);
// Shape of a top-k-per-depth tree in breadth-first order: top_k_per_depth[0] children of the
// root, and each node at depth d has top_k_per_depth[d] children, so sibling groups are
// consecutive and ranked (the drafter puts its d-th best token at the d-th sibling).
// INVALID_ARGUMENT for a branching factor < 1 or more than max_nodes nodes.
absl::StatusOr<std::vector<int32_t>> TopKPerDepthParents(absl::Span<const int32_t> top_k_per_depth,
                                                         int32_t max_nodes);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_COMMON_SPEC_DRAFT_TREE_H_
