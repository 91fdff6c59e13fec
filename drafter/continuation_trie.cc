// ContinuationTrie (see continuation_trie.h).
#include "drafter/continuation_trie.h"

#include <algorithm>
#include <queue>

namespace splitspec::drafter {

ContinuationTrie::ContinuationTrie(const std::vector<std::vector<int32_t>>& continuations) {
  for (int32_t c = 0; c < static_cast<int32_t>(continuations.size()); ++c) {
    if (continuations[c].empty()) continue;
    ++root_count_;
    int32_t parent = -1;
    for (int32_t token : continuations[c]) {
      std::vector<int32_t>& siblings = parent < 0 ? root_children_ : nodes_[parent].children;
      int32_t found = -1;
      for (int32_t child : siblings) {
        if (nodes_[child].token == token) found = child;
      }
      if (found < 0) {
        found = static_cast<int32_t>(nodes_.size());
        Node node;
        node.token = token;
        node.parent = parent;
        node.depth = parent < 0 ? 1 : nodes_[parent].depth + 1;
        node.first_seen = c;
        nodes_.push_back(node);
        // `siblings` may dangle after push_back: look the list up again.
        (parent < 0 ? root_children_ : nodes_[parent].children).push_back(found);
      }
      ++nodes_[found].count;
      parent = found;
    }
  }
}

spec::DraftProposal ContinuationTrie::Cut(int32_t depth, int32_t branching, int32_t max_nodes) const {
  spec::DraftProposal proposal;
  if (depth <= 0 || branching <= 0 || max_nodes <= 0) return proposal;
  // Best first: higher count, then more recent.
  auto worse = [this](int32_t a, int32_t b) {
    if (nodes_[a].count != nodes_[b].count) return nodes_[a].count < nodes_[b].count;
    return nodes_[a].first_seen > nodes_[b].first_seen;
  };
  std::priority_queue<int32_t, std::vector<int32_t>, decltype(worse)> frontier(worse);
  for (int32_t child : root_children_) frontier.push(child);
  std::vector<int32_t> out_index(nodes_.size(), -1);
  std::vector<int32_t> children_taken(nodes_.size() + 1, 0);  // [0] = the root
  while (!frontier.empty() && static_cast<int32_t>(proposal.tokens.size()) < max_nodes) {
    const int32_t node = frontier.top();
    frontier.pop();
    const Node& n = nodes_[node];
    int32_t& taken = children_taken[n.parent + 1];
    if (n.depth > depth || taken >= branching) continue;
    ++taken;
    out_index[node] = static_cast<int32_t>(proposal.tokens.size());
    proposal.tokens.push_back(n.token);
    proposal.parents.push_back(n.parent < 0 ? -1 : out_index[n.parent]);
    const int32_t parent_count = n.parent < 0 ? root_count_ : nodes_[n.parent].count;
    proposal.scores.push_back(static_cast<float>(n.count) / static_cast<float>(parent_count));
    for (int32_t child : n.children) frontier.push(child);
  }
  return proposal;
}

}  // namespace splitspec::drafter
