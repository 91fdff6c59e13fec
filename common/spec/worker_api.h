// The contract between the router and its workers, as plain C++ types with no transport.
// The gRPC services convert proto <-> these types; the router core, the drafter and verifier
// cores, the in-process tests and the simulator all speak them directly.
//
// Token bookkeeping (the same on both workers): a worker's KV cache holds every committed
// token of a request EXCEPT the last one, the "pending" token. A verify step feeds the pending
// token as the tree root (node 0) followed by the draft nodes; the target's logits at a node
// predict the token after it. After acceptance the root and the accepted draft nodes are
// committed to KV, and the token the target emits (the bonus) becomes the new pending token.
#ifndef SPLITSPEC_COMMON_SPEC_WORKER_API_H_
#define SPLITSPEC_COMMON_SPEC_WORKER_API_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/engine/sampling/sampler.h"

namespace splitspec::spec {

using RequestId = uint64_t;

// Batched calls answer per item: a call-level error means the whole call failed (the worker
// is unreachable or broken); an item whose input is bad gets its own non-OK `status` and the
// other items of the batch proceed. A worker never answers OK with an invalid token.

// A draft tree for one request. parents[i] is the index of node i's parent, -1 for a node
// that continues the committed history directly; parents[i] < i. A chain of k tokens has
// parents {-1, 0, 1, ..., k-2}. Empty = no speculation this step (plain decode).
struct DraftProposal {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;
  // Either empty (the draft picked its tokens deterministically: q is one-hot on each token,
  // as for greedy draft models and n-gram lookup) or (n_nodes, vocab) row-major: the draft
  // distribution each node's token was sampled from, used by rejection sampling.
  std::vector<float> probs;
  // Empty or one per node: the proposer's estimate, in [0, 1], of the chance that the node is
  // accepted given that its parent was (its draft probability, or a continuation's frequency).
  // Advisory: the router may use it as an acceptance estimate; verification ignores it.
  std::vector<float> scores;
};

// What shape of proposal the router asks a drafter for.
struct ProposalShape {
  int32_t depth = 0;      // k: tokens along the longest path; 0 = propose nothing
  int32_t branching = 1;  // children kept per node at each depth (1 = chain)
  int32_t max_nodes = 0;  // node budget for trees (0 = depth * branching, full top-k tree capped)
};

// ---- verifier --------------------------------------------------------------------------
struct PrefillItem {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // the whole prompt (or the whole history when re-building)
  engine::SamplingParams sampling;
};
struct PrefillResult {
  RequestId id = 0;
  int32_t next_token = 0;  // the first generated token: becomes the pending token
  // Non-OK: no session was created for this item (next_token is meaningless).
  absl::Status status;
};

struct VerifyItem {
  RequestId id = 0;
  DraftProposal draft;  // empty for a plain decode step
};
struct VerifyResult {
  RequestId id = 0;
  // Accepted draft tokens followed by the one token the target emitted (always >= 1 token).
  std::vector<int32_t> tokens;
  int32_t accept_length = 0;  // draft tokens accepted (tokens.size() - 1)
  // Non-OK: this item's session did not advance (tokens empty). OUT_OF_RANGE when the step
  // would run past the model's context.
  absl::Status status;
};
struct VerifyResponse {
  std::vector<VerifyResult> results;
  double compute_seconds = 0;  // the verifier's measured forward + acceptance time
  int32_t free_blocks = 0;
  int32_t total_blocks = 0;
};

// ---- drafter ---------------------------------------------------------------------------
struct ProposeItem {
  RequestId id = 0;
  // Number of committed tokens the router believes the drafter has already seen for this
  // request (0 for a new one), and the committed tokens after those, ending with the pending
  // token. The drafter drops whatever it speculated past `known_length` and catches up.
  // A drafter whose state disagrees answers FAILED_PRECONDITION and the router resends the
  // whole history with known_length = 0.
  int32_t known_length = 0;
  std::vector<int32_t> new_tokens;
  ProposalShape shape;
  engine::SamplingParams sampling;  // greedy drafts when greedy; sampled drafts carry probs
  // Draft-ahead (the router's pipeline): the last `assumed_tokens` of new_tokens are not
  // committed but a hypothesis about the verify step now running (its chain accepted whole and
  // the drafter's guess of the token after it). The draft continues after them, but the
  // session does not count them as seen: the next known_length stays before them, and the
  // next new_tokens carry whatever of them was committed.
  int32_t assumed_tokens = 0;
  // Also draft after up to this many other outcomes of that step (at most assumed_tokens):
  // each keeps a prefix of the hypothesis and puts another token at the next position (the
  // proposer's best other choice there; for a sampled request, by the distribution its draft
  // tokens are drawn from), the likeliest outcomes first. A sampled branch draws its tokens as a
  // Propose after that outcome would, with their q rows.
  int32_t alternatives = 0;
};
// A draft made after one of those other outcomes (ProposeItem::alternatives): the tokens it
// assumes instead of the item's hypothesis, and the draft after them.
struct AlternativeDraft {
  std::vector<int32_t> assumed;
  DraftProposal draft;
};
struct ProposeResult {
  RequestId id = 0;
  DraftProposal draft;
  std::vector<AlternativeDraft> alternatives;  // ProposeItem::alternatives; may be fewer
  // Non-OK: no draft for this item. FAILED_PRECONDITION when the drafter's session disagrees
  // with known_length (the router resends the whole history next time).
  absl::Status status;
};
struct ProposeResponse {
  std::vector<ProposeResult> results;
  double compute_seconds = 0;
};

struct WorkerInfo {
  std::string model_name;
  int32_t vocab_size = 0;
  int32_t free_blocks = 0;
  int32_t total_blocks = 0;
  int32_t block_size = 16;
  int32_t max_draft_tokens = 0;  // largest proposal the worker accepts
  int32_t live_sessions = 0;
  int32_t max_context_tokens = 0;  // the model's context (0 = no limit known)
  int64_t held_tokens = 0;         // history tokens held across all sessions
  int32_t step_port = 0;           // TCP port of the worker's step socket (0 = none)
  uint64_t step_token = 0;         // what that socket answers kIdentify with
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_COMMON_SPEC_WORKER_API_H_
