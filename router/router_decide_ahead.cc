// Decision made ahead (RouterOptions::pipeline): the policy prices the next step while this
// one verifies.
//
// A policy that searches shapes (smartspec: chains and trees against the latency model, every
// step) spends tens of microseconds a decision once a forward has pushed the router's code and
// data out of the caches, and a step waits for it between the verify answer and its next
// request. When every request of a step has a draft made ahead, the next step's inputs are
// known but for the outcome: if the drafts' hypotheses hold, each request's context grows by
// its chain and guess, its drafter is caught up, and nothing else about the batch changes. So
// beside the verify call, once the drafts made ahead are in, the policy prices that step
// (SpeculationPolicy::PriceProposals, which changes nothing in it), on the acceptance estimates
// that outcome leaves (every chain accepted whole), as a decision taken after the answer would.
// The next step compares its real inputs with the assumed ones, request by request, and takes
// the priced decision (RecordProposals: the policy's bookkeeping) only where they are equal;
// otherwise (a miss, a new request, one that finished or sat out) it decides as usual. What the
// priced decision does not see is the step's time: its latency model is one refit older.
// Output is unaffected: a decision only chooses what to draft.
#include <algorithm>
#include <utility>
#include <vector>

#include "router/router_core.h"
#include "router/router_core_internal.h"

namespace splitspec::router {
namespace {

// Whether `input` is the step `priced` assumed: the same requests in the same order, alike in
// every field a decision reads, and each history ending in the tokens it was assumed to gain (a
// chain accepted whole may still end in a token other than the guess). With the context as
// long as assumed, the history before those tokens is the one priced: histories only grow. The
// acceptance estimates follow too: a context as long as assumed means the whole chain was
// accepted, as priced.
bool SameStepAsPriced(const std::vector<PolicyRequest>& priced, const std::vector<std::vector<int32_t>>& gained,
                      int32_t priced_max_k, const PolicyInput& input) {
  if (input.max_k != priced_max_k || input.requests.size() != priced.size()) return false;
  for (size_t i = 0; i < priced.size(); ++i) {
    const PolicyRequest& a = priced[i];
    const PolicyRequest& b = input.requests[i];
    if (a.id != b.id || a.context_tokens != b.context_tokens || a.prompt_tokens != b.prompt_tokens ||
        a.speculative != b.speculative || a.pool != b.pool || a.max_useful_k != b.max_useful_k ||
        a.draft_catch_up != b.draft_catch_up || a.remaining_tokens != b.remaining_tokens || a.greedy != b.greedy ||
        a.must_run != b.must_run || b.history.size() < gained[i].size() ||
        !std::equal(gained[i].begin(), gained[i].end(), b.history.end() - gained[i].size())) {
      return false;
    }
  }
  return true;
}

}  // namespace

void RouterCore::PriceNextStepAhead(const StepPlan& plan, const std::vector<AheadCall>& ahead) {
  priced_ahead_.decision.reset();
  if (!policy_->PricesAhead()) return;
  // Each request's hypothesis, from its draft made ahead; a request without one has no known
  // outcome to price for.
  std::vector<const std::vector<int32_t>*> assumed(plan.batch.size(), nullptr);
  for (const AheadCall& call : ahead) {
    if (!call.response.ok()) return;  // the drafts are gone: so is the assumed step
    for (size_t m = 0; m < call.members.size(); ++m) {
      for (size_t i = 0; i < plan.batch.size(); ++i) {
        if (plan.batch[i] == call.members[m]) assumed[i] = &call.assumed[m];
      }
    }
  }
  for (const std::vector<int32_t>* tokens : assumed) {
    if (tokens == nullptr) return;
  }
  // The acceptance estimates that outcome would leave: every chain accepted whole (as
  // ObserveStep learns from a step). The next step's decision, taken after the answer, would
  // see them; priced on the estimates from before, a decision made ahead would be taken exactly
  // on the steps whose drafts all landed, and always on estimates lower than theirs.
  std::vector<AcceptanceTracker::Observation> accepted;
  for (size_t i = 0; i < plan.batch.size(); ++i) {
    const int32_t drafted = static_cast<int32_t>(plan.drafts[i].tokens.size());
    accepted.push_back({plan.batch[i]->id, plan.batch[i]->pool, {drafted, drafted}});
  }
  AcceptanceTracker after = tracker_;
  after.ObserveStep(accepted);
  PolicyInput input;
  input.max_k = plan.max_k;
  input.latency = &latency_;
  input.acceptance = &after;
  input.tree_acceptance = &tree_acceptance_;
  std::vector<std::vector<int32_t>> histories(plan.batch.size());  // as assumed, while priced
  priced_ahead_.gained.assign(plan.batch.size(), {});
  for (size_t i = 0; i < plan.batch.size(); ++i) {
    const Active& r = *plan.batch[i];
    PolicyRequest p = PolicyRequestFor(r, plan.max_k, static_cast<int32_t>(assumed[i]->size()));
    p.acceptance = after.Request(r.id, r.pool);
    histories[i].assign(r.history.begin(), r.history.end());
    histories[i].insert(histories[i].end(), assumed[i]->begin(), assumed[i]->end());
    p.history = histories[i];
    priced_ahead_.gained[i] = *assumed[i];
    input.requests.push_back(std::move(p));
  }
  priced_ahead_.decision = policy_->PriceProposals(input);
  for (PolicyRequest& p : input.requests) p.history = {};  // the histories go with this call
  priced_ahead_.requests = std::move(input.requests);
  priced_ahead_.max_k = plan.max_k;
}

std::vector<ProposalChoice> RouterCore::DecideProposals(const PolicyInput& input, StepStats* stats) {
  std::unique_ptr<PricedProposals> priced = std::move(priced_ahead_.decision);
  if (priced != nullptr && SameStepAsPriced(priced_ahead_.requests, priced_ahead_.gained, priced_ahead_.max_k, input)) {
    stats->decided_ahead = true;
    return policy_->RecordProposals(std::move(priced));
  }
  return policy_->DecideProposals(input);
}

}  // namespace splitspec::router
