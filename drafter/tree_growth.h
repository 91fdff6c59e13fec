// TreeGrowth: the shape decisions of a draft-model tree grown one depth per forward (EAGLE-2
// style dynamic trees), kept apart from the model so they can be tested on synthetic
// distributions. The proposer feeds the nodes Expanding() names through the draft model and
// hands their distributions back to AddChildren; TreeGrowth picks the children and the next
// nodes to expand, within a depth, a per-node branching and a node budget.
//
// Greedy requests: every expanded node offers its `branching` most probable tokens, and of all
// the offers at a depth the ones with the highest path probability (the product of the draft
// probabilities from the root) are kept. The verifier treats these nodes as one-hot drafts,
// which is exact whatever the selection.
//
// Sampled requests: which children a node gets must not depend on the children's own tokens,
// or the verifier's rejection sampling would see tokens that were not distributed as their
// declared q. So the number of children of each expanded node is fixed before drawing them
// (the depth's share of the budget, dealt to the expanded nodes in rank order), and the
// children are drawn one after another from q without replacement: child i carries q with the
// tokens of children 1..i-1 removed and the rest renormalised. That is exactly the
// distribution child i was drawn from, which is what the verifier's recursive rejection
// (common/spec/verify_rejection.cc) needs at each sibling: accepting x_i with probability
// min(1, r(x_i) / q_i(x_i)) against residual r and continuing with max(r - q_i, 0)
// normalised emits a token distributed as r for any q_i, in particular for one that depends
// on the earlier siblings' tokens. (A rejected x_i has r(x_i) < q_i(x_i), so the residual has
// no mass left there and drawing it again could only be rejected: without replacement loses
// nothing.) Which nodes are expanded may depend on the drawn tokens (their path
// probabilities): that decides only whether a node has children, never what they are.
//
// Not thread-safe; one per request per step.
#ifndef SPLITSPEC_DRAFTER_TREE_GROWTH_H_
#define SPLITSPEC_DRAFTER_TREE_GROWTH_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/engine/sampling/sampler.h"
#include "common/spec/worker_api.h"

namespace splitspec::drafter {

struct TreeGrowthOptions {
  int32_t depth = 1;      // levels below the pending token
  int32_t branching = 2;  // at most this many children per node
  int32_t budget = 2;     // at most this many nodes in all
  bool sampled = false;   // draw siblings without replacement (see above) instead of top-b
};

class TreeGrowth {
 public:
  // Options are clamped to sane values (each at least 1).
  explicit TreeGrowth(const TreeGrowthOptions& options);

  // Nodes whose next-token distributions the next AddChildren call needs, in order; -1 stands
  // for the pending token (the root), which comes first and alone. Empty when the tree is
  // complete.
  const std::vector<int32_t>& Expanding() const { return expanding_; }

  // One distribution over the vocabulary per node of Expanding(), in that order: the draft's
  // probabilities (greedy: the softmax at temperature 1, for ranking; sampled: the request's
  // sampling distribution, which the draws come from). `rng` is used only when sampled.
  void AddChildren(absl::Span<const std::vector<float>> q_rows, engine::Rng* rng);

  // Stops growing (the draft model ran out of room); the nodes so far stay.
  void Stop() { expanding_.clear(); }

  int32_t size() const { return static_cast<int32_t>(nodes_.size()); }
  int32_t parent(int32_t node) const { return nodes_[node].parent; }
  int32_t token(int32_t node) const { return nodes_[node].token; }

  // The tree in node order (parents before children), with each node's draft probability
  // given its parent as its score; sampled trees carry every node's dense q row.
  spec::DraftProposal Proposal() const;

 private:
  struct Node {
    int32_t token = 0;
    int32_t parent = -1;
    int32_t depth = 1;
    float probability = 0;   // q(token) given the parent
    double path_score = 0;   // product of probabilities from the root
    std::vector<float> q_row;  // sampled: the distribution the token was drawn from
  };
  struct Offer {
    int32_t token;
    int32_t parent;
    float probability;
    double path_score;
  };
  // Children granted to the node at rank `rank` of this depth's expansion (sampled only).
  int32_t SampledChildren(int32_t rank) const;
  void AddGreedyChildren(absl::Span<const std::vector<float>> q_rows);
  void AddSampledChildren(absl::Span<const std::vector<float>> q_rows, engine::Rng& rng);
  // Chooses the nodes of depth `depth_` to expand and this next depth's node allowance.
  void PlanNextDepth();
  double ParentScore(int32_t parent) const { return parent < 0 ? 1.0 : nodes_[parent].path_score; }

  TreeGrowthOptions options_;
  std::vector<Node> nodes_;
  std::vector<int32_t> expanding_ = {-1};
  int32_t depth_ = 0;      // depth of the deepest nodes added so far
  int32_t allowance_ = 0;  // nodes the next AddChildren may add
  int32_t vocab_ = 0;
};

}  // namespace splitspec::drafter

#endif  // SPLITSPEC_DRAFTER_TREE_GROWTH_H_
