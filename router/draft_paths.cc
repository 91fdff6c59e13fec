// Draft tree paths (see draft_paths.h).
#include "router/draft_paths.h"

#include <algorithm>

namespace splitspec::router {

bool ValidDraft(const spec::DraftProposal& d, int32_t depth, int32_t nodes, int32_t vocab) {
  const size_t n = d.tokens.size();
  if (static_cast<int32_t>(n) > std::max(depth, nodes) || d.parents.size() != n) return false;
  std::vector<int32_t> node_depth(n, 0);
  for (size_t j = 0; j < n; ++j) {
    const int32_t parent = d.parents[j];
    if (parent < -1 || parent >= static_cast<int32_t>(j)) return false;
    node_depth[j] = parent < 0 ? 1 : node_depth[parent] + 1;
    if (node_depth[j] > depth) return false;
    if (d.tokens[j] < 0 || (vocab > 0 && d.tokens[j] >= vocab)) return false;
  }
  if (!d.probs.empty() && (vocab <= 0 || d.probs.size() != n * static_cast<size_t>(vocab))) {
    return false;
  }
  if (!d.scores.empty()) {
    if (d.scores.size() != n) return false;
    for (float s : d.scores) {
      if (!(s >= 0.0f && s <= 1.0f)) return false;
    }
  }
  return true;
}

bool IsChain(const spec::DraftProposal& d) {
  for (size_t j = 0; j < d.parents.size(); ++j) {
    if (d.parents[j] != static_cast<int32_t>(j) - 1) return false;
  }
  return true;
}

std::vector<int32_t> AcceptedPath(const spec::DraftProposal& d, absl::Span<const int32_t> accepted) {
  std::vector<int32_t> path;
  int32_t at = -1;
  for (int32_t token : accepted) {
    int32_t next = -1;
    for (size_t j = 0; j < d.tokens.size() && next < 0; ++j) {
      if (d.parents[j] == at && d.tokens[j] == token) next = static_cast<int32_t>(j);
    }
    if (next < 0) break;
    path.push_back(next);
    at = next;
  }
  return path;
}

std::vector<int32_t> MainPath(const spec::DraftProposal& d) {
  std::vector<int32_t> path;
  int32_t at = -1;
  for (size_t j = 0; j < d.parents.size(); ++j) {
    if (d.parents[j] != at) continue;
    path.push_back(static_cast<int32_t>(j));
    at = static_cast<int32_t>(j);
  }
  return path;
}

bool HasChildren(const spec::DraftProposal& d, int32_t node) {
  return std::find(d.parents.begin(), d.parents.end(), node) != d.parents.end();
}

bool ValidVerifyResult(const spec::VerifyResult& v, const spec::DraftProposal& d, int32_t vocab) {
  if (v.tokens.empty() || v.accept_length < 0 ||
      v.accept_length > static_cast<int32_t>(d.tokens.size()) ||
      static_cast<int32_t>(v.tokens.size()) != v.accept_length + 1) {
    return false;
  }
  const absl::Span<const int32_t> accepted(v.tokens.data(), static_cast<size_t>(v.accept_length));
  if (static_cast<int32_t>(AcceptedPath(d, accepted).size()) != v.accept_length) return false;
  for (int32_t t : v.tokens) {
    if (t < 0 || (vocab > 0 && t >= vocab)) return false;
  }
  return true;
}

ChainView MainPathOutcome(const spec::DraftProposal& d, absl::Span<const int32_t> accepted_path) {
  const std::vector<int32_t> main = MainPath(d);
  ChainView view;
  view.proposed = static_cast<int32_t>(main.size());
  while (view.accepted < view.proposed && view.accepted < static_cast<int32_t>(accepted_path.size()) &&
         accepted_path[view.accepted] == main[view.accepted]) {
    ++view.accepted;
  }
  return view;
}

}  // namespace splitspec::router
