// The drafters' side of a prefill: a new request's pool prefills the request's history while
// the verifier prefills it, instead of in the first decode step's Propose, which would make
// that step wait for a whole prompt's worth of drafter forwards. The drafter is otherwise idle
// during a prefill call, so this costs no step anything.
//
// With the pipeline (RouterOptions::pipeline) the same call also drafts the first decode step,
// for the hypothesis that the target's first token is the drafter's own first guess: the draft
// is that guess followed by the chain (and its guess, router_pipeline.cc) the step will verify.
// When the verifier's first token equals the guess, the first decode step uses the chain
// without a Propose; otherwise it is dropped and the next Propose sends that token. Output
// stays exact for the reasons a draft made ahead does: the chain was drafted from exactly the
// history the step verifies against.
#include <algorithm>
#include <map>

#include "router/draft_paths.h"
#include "router/pool_selector.h"
#include "router/router_core.h"
#include "router/router_core_internal.h"

namespace splitspec::router {

void RouterCore::ChooseSpeculation(Active& r, int32_t max_k) {
  if (r.speculation_chosen || pool_names_.empty()) return;
  r.speculation_chosen = true;
  r.speculative = policy_->SpeculateNewRequest();
  r.pool = !r.request.drafter.empty() ? r.request.drafter
                                      : ChoosePoolForNewRequest(pool_names_, r.prompt_len, max_k, tracker_, latency_,
                                                                options_.pool_selection);
}

std::vector<RouterCore::AheadCall> RouterCore::PlanPrefillDrafts(const std::vector<Active*>& requests,
                                                                 int32_t max_k) {
  // Only while the policy drafts: when it decodes plainly (or has not drafted yet) the request
  // may never draft, and its prefill would be the drafter's work for nothing. Unless its
  // admission already judged that it should draft (SmartSpec): a request left to catch up on
  // its whole prompt is charged for it by goodput, decodes plainly, falls further behind, and
  // the policy's recent steps never draft again.
  if (recent_k_ <= 0 && !policy_->AdmissionExpectsDrafting()) return {};
  std::map<std::string, AheadCall> by_pool;
  for (Active* r : requests) {
    if (r->started || !r->speculative || r->pool.empty() || drafters_.count(r->pool) == 0) continue;
    const int32_t length = static_cast<int32_t>(r->history.size());
    if (max_context_ > 0 && length >= max_context_) continue;
    // One token is prefilling only: its forward gives the drafter's guess, which nothing uses.
    // Ahead: the guess, then the chain of the policy's recent choice and the chain's own guess.
    int32_t depth = 1;
    if (options_.pipeline && !recent_tree_) {
      depth = std::min({recent_k_ + 2, max_k + 2, r->request.max_tokens});
      if (max_context_ > 0) depth = std::min(depth, max_context_ - length);
      if (depth < 3) depth = 1;  // no room for a chain after the guess
    }
    AheadCall& call = by_pool[r->pool];
    call.pool = r->pool;
    spec::ProposeItem item;
    item.id = r->id;
    item.known_length = 0;
    item.new_tokens = r->history;
    item.shape.depth = depth;
    // Prefilling only, the drafter's guess is picked greedily: it is not used, and a sampled
    // one would take a number from the request's draft stream, so that the same seed would
    // give other drafts (and another output) depending on when the request came. A draft made
    // ahead samples as the pipeline's other drafts do.
    if (depth > 1) item.sampling = r->request.sampling;
    call.items.push_back(std::move(item));
    call.members.push_back(r);
    call.history_before.push_back(length);
    call.assumed.emplace_back();
  }
  return TimedAheadCalls(std::move(by_pool));
}

namespace {

// `draft` without its first token: a chain that starts after the guess.
spec::DraftProposal AfterFirstToken(spec::DraftProposal draft) {
  const size_t n = draft.tokens.size();
  const size_t vocab = n > 0 ? draft.probs.size() / n : 0;
  draft.tokens.erase(draft.tokens.begin());
  draft.parents.resize(n - 1);
  for (size_t j = 0; j < draft.parents.size(); ++j) draft.parents[j] = static_cast<int32_t>(j) - 1;
  if (!draft.probs.empty()) {
    draft.probs.erase(draft.probs.begin(), draft.probs.begin() + static_cast<std::ptrdiff_t>(vocab));
  }
  if (!draft.scores.empty()) draft.scores.erase(draft.scores.begin());
  return draft;
}

}  // namespace

void RouterCore::ApplyPrefillDrafts(std::vector<AheadCall>& calls, double prefill_seconds, StepStats* stats) {
  for (AheadCall& call : calls) {
    std::map<RequestId, spec::ProposeResult*> by_id;
    if (call.response.ok()) {
      // The drafter's prefill is draft work like any other; what ran within the verifier's
      // prefill was hidden behind it.
      draft_seconds_total_ += call.response->compute_seconds;
      hidden_draft_seconds_total_ += std::min(call.response->compute_seconds, prefill_seconds);
      for (spec::ProposeResult& res : call.response->results) by_id[res.id] = &res;
    }
    for (size_t m = 0; m < call.members.size(); ++m) {
      Active* r = call.members[m];
      const bool ahead = call.items[m].shape.depth > 1;
      if (ahead) ++stats->draft_ahead_issued;
      auto it = by_id.find(r->id);
      if (r->finished) {
        // Finished by its prefill (an error, a stop, max_tokens 1): any session the call made
        // (even one that failed part way) is released with the others.
        drafter_releases_[call.pool].push_back(r->id);
        continue;
      }
      if (it == by_id.end() || !it->second->status.ok()) {
        r->known[call.pool] = 0;  // the drafter's session is unknown: resend it whole
        continue;
      }
      // The drafter holds the history as it was; the token the prefill emitted is sent next.
      const size_t before = static_cast<size_t>(call.history_before[m]);
      r->known[call.pool] = static_cast<int32_t>(before);
      if (!ahead) continue;
      spec::DraftProposal& draft = it->second->draft;
      const bool held = r->started && r->pool == call.pool && r->history.size() == before + 1 &&
                        draft.tokens.size() >= 2 && IsChain(draft) && draft.tokens[0] == r->history[before];
      if (!held) {
        ++stats->draft_ahead_dropped;
        continue;
      }
      ++stats->draft_ahead_hypothesis_held;
      r->ready_draft = AfterFirstToken(std::move(draft));
      r->ready_pool = call.pool;
    }
  }
}

}  // namespace splitspec::router
