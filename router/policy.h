// Speculation policies: each step the policy assigns every running request a proposal length
// k (0 = plain decode), then learns from what the verifier accepted. The loop never branches
// on a policy's name; everything a policy needs comes through PolicyInput / StepOutcome.
//
// Thread-safety: thread-compatible. RouterCore calls a policy only from its loop thread.
#ifndef SPLITSPEC_ROUTER_POLICY_H_
#define SPLITSPEC_ROUTER_POLICY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/spec/worker_api.h"
#include "nlohmann/json.hpp"
#include "router/acceptance.h"
#include "router/latency_model.h"
#include "router/tree_acceptance.h"

namespace splitspec::router {

// Decide's answer for a request that sits out this step: it is forwarded to no worker and
// keeps its sessions as they are. Only requests with must_run == false may sit out (the
// core runs the others with k = 0 if a policy tries).
inline constexpr int32_t kSitOut = -1;

// One request's proposal for a step: kSitOut, 0 (a plain decode), a chain of `depth` draft
// tokens, or a tree of at most `nodes` nodes over `depth` levels (when nodes > depth).
struct ProposalChoice {
  int32_t depth = 0;
  int32_t nodes = 0;  // <= depth: a chain of `depth`
  // Tokens the policy expects the step to emit for the request, bonus included (0: it has no
  // estimate). The router compares it with what the step emitted (router/shape_calibration.h).
  double expected_tokens = 0;
  bool tree() const { return depth > 0 && nodes > depth; }
  static ProposalChoice Chain(int32_t k) { return {k, k}; }
};

struct PolicyRequest {
  spec::RequestId id = 0;
  int32_t context_tokens = 0;  // committed tokens (what the target reads from KV)
  int32_t prompt_tokens = 0;
  bool speculative = true;  // false: the request must get k = 0 (no drafter session)
  std::string pool;         // drafter pool assigned to it
  double acceptance = 0;    // its per-request estimate for that pool (global as prior)
  int32_t max_useful_k = 0;  // the core clamps k to this anyway (remaining tokens, worker max)
  // Tokens its drafter must feed before drafting, beyond the one a step that drafts every time
  // feeds (its bonus token): the tokens committed in steps it did not draft, or its whole
  // history when its pool has no session for it yet.
  int32_t draft_catch_up = 0;
  int32_t remaining_tokens = 0;  // tokens it may still generate (max_tokens - generated)
  bool greedy = true;            // its sampling: greedy (GoodputItem::greedy)
  absl::Span<const int32_t> history;  // prompt + generated tokens (valid during Decide)
  // Set when the request sat out the previous step(s) as long as RouterOptions allows:
  // it must run now (the starvation guard; see router_core.h).
  bool must_run = true;
};

struct PolicyInput {
  std::vector<PolicyRequest> requests;  // running requests in FCFS order
  int32_t max_k = 0;                    // V: the largest proposal the workers accept
  const LatencyModel* latency = nullptr;
  const AcceptanceTracker* acceptance = nullptr;
  const TreeAcceptance* tree_acceptance = nullptr;  // per-depth acceptance of tree steps
};

struct RequestOutcome {
  spec::RequestId id = 0;
  std::string pool;
  int32_t proposed = 0;          // draft tokens (tree nodes) actually verified (0 = plain decode)
  int32_t accepted = 0;          // of those accepted (the accepted path's depth for a tree)
  std::vector<int32_t> emitted;  // accepted drafts + the target's token
  bool tree = false;             // the draft was a tree (not a chain)
  // A tree's main path (each node's first child, the drafter's best guess: its chain) read as
  // a chain draft: its length and how much of it was accepted. Equal to proposed / accepted
  // for a chain. The chain acceptance estimates learn from these, so they stay current while
  // a policy proposes trees.
  int32_t main_path_proposed = 0;
  int32_t main_path_accepted = 0;
};

// A step's proposals priced without being taken (SpeculationPolicy::PriceProposals), and what
// the policy's bookkeeping needs once they are.
class PricedProposals {
 public:
  virtual ~PricedProposals() = default;
  std::vector<ProposalChoice> choices;  // one per input request, as DecideProposals gives them
};

struct StepOutcome {
  std::vector<RequestOutcome> requests;
  double draft_seconds = 0;   // drafters' reported compute, summed over pools
  double verify_seconds = 0;  // verifier's reported compute
  double wall_seconds = 0;
  int32_t max_draft_depth = 0;  // forwards the drafter ran (max k this step)
};

class SpeculationPolicy {
 public:
  virtual ~SpeculationPolicy() = default;
  virtual std::string Name() const = 0;
  // One k per input request, same order. Values are clamped by the core afterwards;
  // kSitOut leaves a request out of this step (ignored when it must_run).
  virtual std::vector<int32_t> Decide(const PolicyInput& input) = 0;
  // The step's proposals, one per input request; the core calls this one. The default makes
  // a chain of each Decide() k; policies that build trees override it.
  virtual std::vector<ProposalChoice> DecideProposals(const PolicyInput& input);
  // DecideProposals in two halves, for a policy whose pricing is worth taking off a step's
  // way: PriceProposals changes nothing in the policy, RecordProposals does the bookkeeping
  // DecideProposals would do for those proposals and returns them. The router prices the
  // next step beside a verify call, for the outcome its drafts made ahead assume, and records
  // the decision only where that step comes as assumed (router_decide_ahead.cc). nullptr (the
  // default): the policy prices only in DecideProposals, and says so in PricesAhead, so that
  // the router builds no input for it.
  virtual bool PricesAhead() const { return false; }
  virtual std::unique_ptr<PricedProposals> PriceProposals(const PolicyInput& input) const {
    (void)input;
    return nullptr;
  }
  virtual std::vector<ProposalChoice> RecordProposals(std::unique_ptr<PricedProposals> priced) {
    return std::move(priced->choices);
  }
  virtual void Observe(const StepOutcome& outcome) { (void)outcome; }
  // Asked once per new request at admission: false marks it non-speculative (SmartSpec's
  // prefill disabling: the drafter does not see it) until ResumeSpeculation says otherwise.
  virtual bool SpeculateNewRequest() { return true; }
  // Whether a request admitted speculative is expected to draft even while the recent steps
  // drafted nothing: true for a policy whose admission (SpeculateNewRequest) judges whether
  // drafting would pay every step. The router then has the drafter prefill every speculative
  // request beside the verifier's prefill; otherwise only while the policy drafts, since a
  // request that never drafts would make that prefill the drafter's work for nothing.
  virtual bool AdmissionExpectsDrafting() const { return false; }
  // Asked each step for every request admitted non-speculative: true lets it draft from now on
  // (its drafter session is built by its next Propose, from its whole history, as after a
  // drafter failure). A decision taken at admission can outlive what it was taken on: one
  // low-acceptance request can switch speculation off for the next, unrelated one.
  virtual bool ResumeSpeculation() { return false; }
  virtual void Forget(spec::RequestId id) { (void)id; }
  // Policy-specific state for GetServerInfo (active tier, parameters, ...).
  virtual nlohmann::json Describe() const = 0;
};

// Builds a policy from `--policy NAME` and the parsed `--policy-config` JSON (null or {} for
// defaults). Names: none, static:K, static-tree:D:N, smartspec, sglang-tiers, analytical, fsm,
// cache-fsm.
// INVALID_ARGUMENT for an unknown name or a malformed config.
absl::StatusOr<std::unique_ptr<SpeculationPolicy>> MakePolicy(const std::string& name,
                                                              const nlohmann::json& config);
// Reads a JSON config file (INVALID_ARGUMENT / NOT_FOUND with the path in the message).
absl::StatusOr<nlohmann::json> LoadJsonFile(const std::string& path);

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_POLICY_H_
