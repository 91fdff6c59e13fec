// TreeGrowth (see tree_growth.h).
#include "drafter/tree_growth.h"

#include <algorithm>
#include <numeric>

namespace splitspec::drafter {
namespace {

int32_t CeilDiv(int32_t a, int32_t b) { return (a + b - 1) / b; }

// The (up to) `count` most probable tokens with positive probability, most probable first;
// the lower id wins ties, so the result is deterministic.
std::vector<int32_t> TopTokens(absl::Span<const float> q, int32_t count) {
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(count) + 1);
  auto better = [&q](int32_t a, int32_t b) { return q[a] > q[b] || (q[a] == q[b] && a < b); };
  for (int32_t token = 0; token < static_cast<int32_t>(q.size()); ++token) {
    if (!(q[token] > 0.0f)) continue;
    if (static_cast<int32_t>(best.size()) == count && !better(token, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), token, better), token);
    if (static_cast<int32_t>(best.size()) > count) best.pop_back();
  }
  return best;
}

// Scales `row` to sum 1; false when it has no positive mass.
bool Normalize(std::vector<float>& row) {
  double sum = 0.0;
  for (float v : row) sum += v > 0.0f ? v : 0.0f;
  if (!(sum > 0.0)) return false;
  const float inv = static_cast<float>(1.0 / sum);
  for (float& v : row) v = v > 0.0f ? v * inv : 0.0f;
  return true;
}

}  // namespace

TreeGrowth::TreeGrowth(const TreeGrowthOptions& options) : options_(options) {
  options_.depth = std::max(options_.depth, 1);
  options_.branching = std::max(options_.branching, 1);
  options_.budget = std::max(options_.budget, 1);
  allowance_ = std::min(options_.branching, CeilDiv(options_.budget, options_.depth));
}

void TreeGrowth::AddChildren(absl::Span<const std::vector<float>> q_rows, engine::Rng* rng) {
  if (expanding_.empty() || q_rows.size() != expanding_.size()) {
    expanding_.clear();
    return;
  }
  vocab_ = static_cast<int32_t>(q_rows[0].size());
  ++depth_;
  if (options_.sampled && rng != nullptr) {
    AddSampledChildren(q_rows, *rng);
  } else {
    AddGreedyChildren(q_rows);
  }
  PlanNextDepth();
}

void TreeGrowth::AddGreedyChildren(absl::Span<const std::vector<float>> q_rows) {
  std::vector<Offer> offers;
  for (size_t r = 0; r < expanding_.size(); ++r) {
    const int32_t parent = expanding_[r];
    for (int32_t token : TopTokens(q_rows[r], options_.branching)) {
      const float p = q_rows[r][token];
      offers.push_back({token, parent, p, ParentScore(parent) * p});
    }
  }
  // The best path probabilities at this depth; stable, so equal scores keep the parents'
  // rank order and each parent's probability order.
  std::stable_sort(offers.begin(), offers.end(),
                   [](const Offer& a, const Offer& b) { return a.path_score > b.path_score; });
  offers.resize(std::min(offers.size(), static_cast<size_t>(allowance_)));
  for (const Offer& o : offers) {
    Node node;
    node.token = o.token;
    node.parent = o.parent;
    node.depth = depth_;
    node.probability = o.probability;
    node.path_score = o.path_score;
    nodes_.push_back(std::move(node));
  }
}

int32_t TreeGrowth::SampledChildren(int32_t rank) const {
  return std::clamp(allowance_ - rank * options_.branching, 0, options_.branching);
}

void TreeGrowth::AddSampledChildren(absl::Span<const std::vector<float>> q_rows, engine::Rng& rng) {
  for (size_t r = 0; r < expanding_.size(); ++r) {
    const int32_t parent = expanding_[r];
    std::vector<float> remaining = q_rows[r];
    const int32_t children = SampledChildren(static_cast<int32_t>(r));
    for (int32_t i = 0; i < children; ++i) {
      if (!Normalize(remaining)) break;  // q had fewer tokens than children
      const int32_t token = engine::SampleFromProbabilities(remaining, rng);
      if (token < 0) break;
      Node node;
      node.token = token;
      node.parent = parent;
      node.depth = depth_;
      node.probability = q_rows[r][token];
      node.path_score = ParentScore(parent) * node.probability;
      node.q_row = remaining;  // what this child was drawn from
      nodes_.push_back(std::move(node));
      remaining[token] = 0.0f;  // the next sibling is drawn without it
    }
  }
}

void TreeGrowth::PlanNextDepth() {
  expanding_.clear();
  const int32_t used = size();
  if (depth_ >= options_.depth || used >= options_.budget) return;
  std::vector<int32_t> frontier;
  for (int32_t i = 0; i < used; ++i) {
    if (nodes_[i].depth == depth_) frontier.push_back(i);
  }
  if (frontier.empty()) return;
  std::stable_sort(frontier.begin(), frontier.end(),
                   [this](int32_t a, int32_t b) { return nodes_[a].path_score > nodes_[b].path_score; });
  // This depth's share of what is left, spread evenly over the depths still to grow.
  allowance_ = CeilDiv(options_.budget - used, options_.depth - depth_);
  // Greedy: each expanded node offers `branching` children and the best `allowance_` of all
  // offers are kept, so expanding more nodes than the allowance could never help. Sampled:
  // the allowance is dealt out `branching` children per node in rank order.
  const int32_t expand = options_.sampled ? CeilDiv(allowance_, options_.branching) : allowance_;
  frontier.resize(std::min(frontier.size(), static_cast<size_t>(expand)));
  allowance_ = std::min(allowance_, static_cast<int32_t>(frontier.size()) * options_.branching);
  expanding_ = std::move(frontier);
}

spec::DraftProposal TreeGrowth::Proposal() const {
  spec::DraftProposal proposal;
  const bool with_rows = options_.sampled && !nodes_.empty() && !nodes_[0].q_row.empty();
  for (const Node& node : nodes_) {
    proposal.tokens.push_back(node.token);
    proposal.parents.push_back(node.parent);
    proposal.scores.push_back(node.probability);
    if (with_rows) proposal.probs.insert(proposal.probs.end(), node.q_row.begin(), node.q_row.end());
  }
  return proposal;
}

}  // namespace splitspec::drafter
