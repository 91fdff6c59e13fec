// The interface every drafter proposer implements (draft model, n-gram prompt lookup, ...),
// and the per-request task the session layer hands it. Proposers see each request's full
// committed history; proposers with state (a draft model's KV cache) keep it in step with that
// history themselves, rolling back whatever they speculated that was not committed.
#ifndef SPLITSPEC_DRAFTER_PROPOSER_H_
#define SPLITSPEC_DRAFTER_PROPOSER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/engine/sampling/sampler.h"
#include "common/spec/worker_api.h"

namespace splitspec::drafter {

struct ProposeTask {
  spec::RequestId id = 0;
  // Every committed token of the request, the last one being the pending token (the draft
  // continues after it). Never empty. Owned by the session layer; valid during Propose.
  const std::vector<int32_t>* history = nullptr;
  spec::ProposalShape shape;  // depth 0 = propose nothing this step
  engine::SamplingParams sampling;
  // The last `assumed` tokens of history are a hypothesis, not committed
  // (spec::ProposeItem::assumed_tokens): a proposer with state keeps them out of what it
  // treats as committed. Proposers that draft other outcomes (spec::ProposeItem::alternatives)
  // put up to `alternatives` of them in *alternatives_out (null when none are asked for).
  int32_t assumed = 0;
  int32_t alternatives = 0;
  std::vector<spec::AlternativeDraft>* alternatives_out = nullptr;
};

struct ProposerInfo {
  std::string name;           // "draft-model:<dir>" / "ngram"
  int32_t vocab_size = 0;     // 0 = no vocabulary of its own (n-gram)
  int32_t free_blocks = 0;    // KV blocks, 0/0 for stateless proposers
  int32_t total_blocks = 0;
  int32_t block_size = 0;
};

// Thread-safety: not thread-safe; the session layer serialises calls.
class Proposer {
 public:
  virtual ~Proposer() = default;

  // One proposal per task, in task order; a task with depth 0 gets an empty proposal. A
  // proposal may be shorter than asked (even empty) when the proposer has nothing good to say.
  // Errors are for broken state only; running out of resources means shorter proposals.
  virtual absl::StatusOr<std::vector<spec::DraftProposal>> Propose(absl::Span<const ProposeTask> tasks) = 0;

  // Drops per-request state. Unknown ids are ignored.
  virtual void Release(spec::RequestId id) = 0;

  virtual ProposerInfo Info() const = 0;
};

}  // namespace splitspec::drafter

#endif  // SPLITSPEC_DRAFTER_PROPOSER_H_
