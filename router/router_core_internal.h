// RouterCore's per-request state, shared by router_core.cc and router_step.cc only.
#ifndef SPLITSPEC_ROUTER_ROUTER_CORE_INTERNAL_H_
#define SPLITSPEC_ROUTER_ROUTER_CORE_INTERNAL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "router/router_core.h"

namespace splitspec::router {

struct RouterCore::Active {
  RequestId id = 0;
  GenerateRequest request;
  EventSink sink;
  int32_t blocks = 0;                 // KV blocks reserved on the verifier
  std::vector<int32_t> history;       // prompt + generated; the last one is "pending"
  int32_t prompt_len = 0;
  int replica = -1;                   // verifier replica of its session (-1: none, displaced)
  bool prefilled = false;             // has (or may have) a verifier session on `replica`
  bool started = false;               // its first token was produced (a prefill succeeded)
  double displaced_since = -1;        // clock time it lost its replica (-1: it has one)
  bool speculative = false;           // false: never drafted (prefill disabling / no pools)
  bool speculation_chosen = false;    // `speculative` and `pool` were decided (ChooseSpeculation)
  bool finished = false;
  std::string pool;                   // drafter pool in use
  // Per pool with a (possible) drafter session: committed tokens it has seen. 0 forces a
  // full resend, which the drafter treats as a fresh start.
  std::map<std::string, int32_t> known;
  // history.size() right after the last step that verified a draft of it: the tokens past it
  // were committed without drafting, so its drafter has still to feed them.
  int32_t drafted_through = 0;
  Usage usage;
  size_t max_stop_len = 0;
  size_t text_len = 0;                // detokenized completion length at the last check
  int32_t sat_out_steps = 0;          // consecutive decode steps it was left out of
  // A draft made ahead whose hypothesis held (RouterOptions::pipeline): the next step uses it
  // instead of calling the pool's drafter. Its last token is the drafter's next guess.
  std::optional<spec::DraftProposal> ready_draft;
  std::string ready_pool;
};

// One decode step as it is planned and carried out (router_step.cc).
struct RouterCore::StepPlan {
  double started_at = 0;
  int32_t max_k = 0;
  int32_t vocab = 0;
  // The forwarded requests (FCFS order) and, per request, its k (clamped; 0 after a failed
  // Propose) and the draft to verify (empty: plain decode).
  std::vector<Active*> batch;
  std::vector<int32_t> k;      // depth: chain length, or a tree's levels
  std::vector<int32_t> nodes;  // node budget: == k for a chain, > k for a tree
  std::vector<double> expected;  // the policy's expected tokens for that shape (0: none)
  std::vector<spec::DraftProposal> drafts;
  // Pipeline: the drafter's guess of the target's token after a fully accepted chain (-1:
  // none), and whether the draft was made ahead during the previous step.
  std::vector<int32_t> guess;
  // Pipeline: the depth the policy chose for each request; above k where the step kept the
  // last token of the draft made ahead back as its guess (RouterCore::KeepsPipelineGoing).
  std::vector<int32_t> wanted;
  double draft_compute = 0;  // drafters' reported compute, summed over pools
  double draft_compute_slowest = 0;  // the slowest pool's (pools draft in parallel)
  double verify_compute = 0;  // the slowest replica's reported compute
  double rpc_excess = 0;     // RPC wall time beyond reported compute
  // Wall time the step spent waiting on its serial worker calls (the Propose calls, then the
  // verify calls with the work run beside them); the rest of the step is the router's own.
  double call_wall = 0;
  int32_t rpcs = 0;
  // Pipeline: this step probes the verify slowdown (RouterOptions::slowdown_probe_steps), and
  // whether drafts were made ahead beside its verify call.
  bool slowdown_probe = false;
  bool drafted_ahead = false;
};

// A draft-ahead Propose for one pool (router_pipeline.cc): the items, the requests they stand
// for and their hypotheses, and the answer.
struct RouterCore::AheadCall {
  std::string pool;
  std::vector<Active*> members;
  std::vector<int32_t> history_before;        // each member's history length before the step
  std::vector<std::vector<int32_t>> assumed;  // what the step must emit for the draft to hold
  std::vector<spec::ProposeItem> items;
  // Each member's chance that its draft is used times the Propose a hit spares (PlanDraftAhead).
  std::vector<double> gains;
  absl::Duration timeout;
  absl::StatusOr<spec::ProposeResponse> response = absl::UnknownError("not called");
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_ROUTER_CORE_INTERNAL_H_
