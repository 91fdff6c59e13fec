// Reading a draft tree: its shape checks, the path a verification accepted, and its main path
// (the chain inside it). Drafts are DraftProposal trees: node j has parent parents[j] (-1: the
// pending token, the root), parents listed before their children.
#ifndef SPLITSPEC_ROUTER_DRAFT_PATHS_H_
#define SPLITSPEC_ROUTER_DRAFT_PATHS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/spec/worker_api.h"

namespace splitspec::router {

// A draft of at most `nodes` in-vocabulary nodes, none deeper than `depth`, well formed (parents
// earlier, probs absent or one vocab row per node, scores absent or one in [0, 1] per node);
// anything else is dropped (verified as a plain decode) rather than sent to fail at the
// verifier.
bool ValidDraft(const spec::DraftProposal& d, int32_t depth, int32_t nodes, int32_t vocab);

bool IsChain(const spec::DraftProposal& d);

// The draft nodes the accepted tokens walk down from the root (each a child of the previous
// one carrying the next accepted token); fewer than `accepted` when the tokens leave the tree.
std::vector<int32_t> AcceptedPath(const spec::DraftProposal& d, absl::Span<const int32_t> accepted);

bool HasChildren(const spec::DraftProposal& d, int32_t node);

// The tree's main path: from the root, each node's first child in node order. Drafters list a
// node's children best first (greedy: by draft probability; sampled: in the order drawn, so the
// first child is drawn from the plain q as a chain's token would be), so this is the chain the
// drafter would have proposed. A chain is its own main path.
std::vector<int32_t> MainPath(const spec::DraftProposal& d);

// A tree's verification read as the verification of its main path: the path's length and how
// many of its nodes the accepted path (AcceptedPath) shares from the root.
struct ChainView {
  int32_t proposed = 0;
  int32_t accepted = 0;
};
ChainView MainPathOutcome(const spec::DraftProposal& d, absl::Span<const int32_t> accepted_path);

// A verifier result the router can apply: accepted tokens follow a root-to-node path of the
// draft, followed by exactly one in-vocabulary token.
bool ValidVerifyResult(const spec::VerifyResult& v, const spec::DraftProposal& d, int32_t vocab);

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_DRAFT_PATHS_H_
