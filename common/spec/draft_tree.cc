// DraftTree construction, validation and structure queries.
#include "common/spec/draft_tree.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace splitspec::spec {
namespace {

absl::Status ValidateDistribution(const DraftDistribution& q, int32_t node, int32_t token,
                                  int32_t vocab_size) {
  if (q.token_ids.size() != q.probs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("draft node ", node, ": draft distribution has ",
                                                   q.token_ids.size(), " token ids but ",
                                                   q.probs.size(), " probabilities"));
  }
  double total = 0.0;
  double own = 0.0;
  for (size_t j = 0; j < q.token_ids.size(); ++j) {
    const int32_t id = q.token_ids[j];
    const float p = q.probs[j];
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("draft node ", node,
                                                     ": draft distribution names token id ", id,
                                                     " outside the vocab [0, ", vocab_size, ")"));
    }
    if (!std::isfinite(p) || p < 0.0f) {
      return absl::InvalidArgumentError(absl::StrCat("draft node ", node, ": draft probability ", p,
                                                     " for token ", id,
                                                     " is not a finite value >= 0"));
    }
    total += p;
    if (id == token) own += p;
  }
  if (!(total > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft node ", node, ": draft distribution has no probability mass"));
  }
  if (!(own > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft node ", node, ": draft distribution gives its own token ", token,
                     " probability 0, so it cannot have been drawn from it"));
  }
  return absl::OkStatus();
}

}  // namespace

DraftDistribution DraftDistribution::FromDense(absl::Span<const float> dense) {
  DraftDistribution q;
  for (size_t i = 0; i < dense.size(); ++i) {
    if (dense[i] > 0.0f) {
      q.token_ids.push_back(static_cast<int32_t>(i));
      q.probs.push_back(dense[i]);
    }
  }
  return q;
}

absl::Status ValidateParents(absl::Span<const int32_t> parents) {
  for (size_t i = 0; i < parents.size(); ++i) {
    if (parents[i] < -1 || parents[i] >= static_cast<int32_t>(i)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "draft node ", i, ": parent ", parents[i],
          " must be -1 (the last committed token) or an earlier node in [0, ", i, ")"));
    }
  }
  return absl::OkStatus();
}

std::vector<uint8_t> AncestorMaskFromParents(absl::Span<const int32_t> parents) {
  const size_t n = parents.size();
  std::vector<uint8_t> mask(n * n, 0);
  for (size_t i = 0; i < n; ++i) {
    // A parent precedes its child, so its row is complete: copy it and add the diagonal.
    const int32_t parent = parents[i];
    if (parent >= 0) {
      for (size_t j = 0; j <= static_cast<size_t>(parent); ++j) {
        mask[i * n + j] = mask[parent * n + j];
      }
    }
    mask[i * n + i] = 1;
  }
  return mask;
}

std::vector<int32_t> ChainParents(int32_t k) {
  std::vector<int32_t> parents;
  for (int32_t i = 0; i < k; ++i) parents.push_back(i - 1);
  return parents;
}

absl::StatusOr<std::vector<int32_t>> TopKPerDepthParents(absl::Span<const int32_t> top_k_per_depth,
                                                         int32_t max_nodes) {
  std::vector<int32_t> parents;
  std::vector<int32_t> level = {-1};  // nodes of the previous depth
  for (size_t d = 0; d < top_k_per_depth.size(); ++d) {
    const int32_t k = top_k_per_depth[d];
    if (k < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("top-k at depth ", d + 1, " must be >= 1, got ", k));
    }
    if (static_cast<int64_t>(parents.size()) + static_cast<int64_t>(level.size()) * k > max_nodes) {
      return absl::InvalidArgumentError(absl::StrCat("top-k-per-depth tree exceeds the node limit ",
                                                     max_nodes, " at depth ", d + 1));
    }
    std::vector<int32_t> next;
    for (int32_t parent : level) {
      for (int32_t j = 0; j < k; ++j) {
        next.push_back(static_cast<int32_t>(parents.size()));
        parents.push_back(parent);
      }
    }
    level = std::move(next);
  }
  return parents;
}

absl::StatusOr<DraftTree> DraftTree::Create(std::vector<int32_t> tokens,
                                            std::vector<int32_t> parents,
                                            std::vector<DraftDistribution> draft_probs,
                                            const DraftTreeLimits& limits) {
  if (limits.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab size must be positive, got ", limits.vocab_size));
  }
  if (tokens.size() != parents.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft tree has ", tokens.size(), " tokens but ", parents.size(), " parents"));
  }
  if (static_cast<int64_t>(tokens.size()) > limits.max_nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "draft tree has ", tokens.size(), " nodes, above the limit of ", limits.max_nodes));
  }
  if (!draft_probs.empty() && draft_probs.size() != tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft tree has ", tokens.size(), " nodes but ", draft_probs.size(),
                     " draft distributions (send none or one per node)"));
  }
  if (absl::Status s = ValidateParents(parents); !s.ok()) return s;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("draft node ", i, ": token id ", tokens[i],
                                                     " outside the vocab [0, ", limits.vocab_size,
                                                     ")"));
    }
    if (!draft_probs.empty() && !draft_probs[i].empty()) {
      if (absl::Status s = ValidateDistribution(draft_probs[i], static_cast<int32_t>(i), tokens[i],
                                                limits.vocab_size);
          !s.ok()) {
        return s;
      }
    }
  }

  DraftTree tree;
  const int32_t n = static_cast<int32_t>(tokens.size());
  tree.vocab_size_ = limits.vocab_size;
  tree.tokens_ = std::move(tokens);
  tree.parents_ = std::move(parents);
  tree.draft_probs_ = std::move(draft_probs);
  tree.depths_.assign(n, 0);
  tree.first_child_.assign(n, -1);
  tree.next_sibling_.assign(n, -1);
  // Last child seen per parent (index 0 stands for the virtual root), to link siblings in
  // index order in one pass.
  std::vector<int32_t> last_child(n + 1, -1);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t parent = tree.parents_[i];
    tree.depths_[i] = parent < 0 ? 1 : tree.depths_[parent] + 1;
    tree.max_depth_ = std::max(tree.max_depth_, tree.depths_[i]);
    int32_t& last = last_child[parent + 1];
    if (last >= 0) {
      tree.next_sibling_[last] = i;
    } else if (parent < 0) {
      tree.root_first_child_ = i;
    } else {
      tree.first_child_[parent] = i;
    }
    last = i;
  }
  return tree;
}

absl::StatusOr<DraftTree> DraftTree::Chain(std::vector<int32_t> tokens,
                                           const DraftTreeLimits& limits,
                                           std::vector<DraftDistribution> draft_probs) {
  std::vector<int32_t> parents = ChainParents(static_cast<int32_t>(tokens.size()));
  return Create(std::move(tokens), std::move(parents), std::move(draft_probs), limits);
}

std::vector<int32_t> DraftTree::Children(int32_t node) const {
  std::vector<int32_t> children;
  for (int32_t c = first_child(node); c >= 0; c = next_sibling_[c]) children.push_back(c);
  return children;
}

std::vector<int32_t> DraftTree::PathTo(int32_t node) const {
  if (node < 0) return {};
  std::vector<int32_t> path(depths_[node]);
  for (int32_t at = node, d = depths_[node] - 1; at >= 0; at = parents_[at], --d) path[d] = at;
  return path;
}

std::vector<uint8_t> DraftTree::AncestorMask() const { return AncestorMaskFromParents(parents_); }

std::vector<int32_t> DraftTree::ParentsWithRoot() const {
  std::vector<int32_t> out;
  out.reserve(parents_.size() + 1);
  out.push_back(-1);
  for (int32_t p : parents_) out.push_back(p + 1);
  return out;
}

std::vector<int32_t> DraftTree::TokensWithRoot(int32_t last_token) const {
  std::vector<int32_t> out;
  out.reserve(tokens_.size() + 1);
  out.push_back(last_token);
  out.insert(out.end(), tokens_.begin(), tokens_.end());
  return out;
}

int32_t DraftTreeBuilder::Add(int32_t parent, int32_t token, DraftDistribution draft_probs) {
  any_draft_probs_ = any_draft_probs_ || !draft_probs.empty();
  tokens_.push_back(token);
  parents_.push_back(parent);
  draft_probs_.push_back(std::move(draft_probs));
  return static_cast<int32_t>(tokens_.size()) - 1;
}

absl::StatusOr<DraftTree> DraftTreeBuilder::Build(const DraftTreeLimits& limits) && {
  if (!any_draft_probs_) draft_probs_.clear();
  return DraftTree::Create(std::move(tokens_), std::move(parents_), std::move(draft_probs_),
                           limits);
}

}  // namespace splitspec::spec
