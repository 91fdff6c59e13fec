// Draft-ahead (RouterOptions::pipeline): the drafter works while the target verifies.
//
// A chain of k is drafted one token deeper than it is verified: the extra token is the
// drafter's guess of the token the target emits after a fully accepted chain. While Verify
// runs, each pool gets a second Propose for those requests, as if the step had emitted the
// chain and the guess: the drafter appends them to its session (sent as new tokens after any
// committed ones it has not seen yet) and drafts the step after. When Verify returns:
//  - hypothesis held (the step emitted exactly chain + guess): the draft is kept for the next
//    step, which sends no Propose for the request; the drafter's session already equals the
//    committed history, so `known` moves to the new length;
//  - otherwise the draft is dropped and `known` stays at the committed length the drafter
//    shared before the hypothesis, so the next Propose truncates the hypothetical tokens
//    (DrafterCore keeps only known_length tokens) and catches up from there.
// A chain gets its guess only where drafting ahead is expected to pay in the steady state
// (DraftGuessPays): the Propose a hit saves (chance: the request's acceptance estimate to the
// power k + 1) against the extra level and the part of the draft made ahead the verify call
// would not hide; elsewhere the request drafts as without the pipeline. Once the guess is
// drafted, a request is drafted ahead when the Propose it saves, times that chance, outweighs
// the part of the draft-ahead the verify call would not hide (PlanDraftAhead; the step waits
// for it, landed or not); a pool's drafts made ahead go in one call, which is priced whole
// (KeepMembersThatPay), with a draft-time correction learnt from drafts made ahead alone
// (LatencyModel::ObserveDraftAhead: beside the verifier a drafter may run slower than
// alone). The drafter's extra work runs on its own process, but where it
// competes with the verifier (one GPU for both, a memory bus) the verify call beside it is
// slower: the latency model learns by how much (LatencyModel::verify_slowdown), and a step
// drafts ahead only where what its drafts save outweighs that too (DraftAheadOutweighsSlowdown;
// DraftGuessPays counts each request's share). One step in RouterOptions::slowdown_probe_steps
// goes the other way, so that verify calls with and without drafts beside them both stay
// observed. Goodput prices a pipelined step's drafting the same way (GoodputModel::Exposure).
// With RouterOptions::draft_ahead_alternatives a request's call also drafts after the
// drafter's likeliest other outcomes of the step (a prefix of chain + guess, then the drafter's
// best other token there: for a sampled request, the likeliest token of the distribution it
// draws from other than its draw), where what they catch outweighs what their chains cost the
// drafter (BestDraftAhead; otherwise the hypothesis alone); the hypothesis goes as assumed
// tokens, which the drafter does not count as committed, so `known` stays at the committed
// length whatever the outcome, and the next step keeps the draft whose outcome the step
// emitted (a hit by another name).
// Output stays exact: a draft made ahead was drafted from exactly the history the next step
// verifies against, as any other draft; the verifier decides acceptance as always. A sampled
// chain token's draw is keyed by its position (drafter/draft_model_proposer.cc), independent
// of the verifier's draws, so a draft made ahead and dropped changes no later draft, and a
// branch drafted after another outcome draws what a Propose after that outcome would: a seeded
// request's output does not depend on what the router chose to draft ahead.
#include <algorithm>
#include <cmath>
#include <map>

#include "router/draft_paths.h"
#include "router/parallel_calls.h"
#include "router/router_core.h"
#include "router/router_core_internal.h"

namespace splitspec::router {

bool RouterCore::KeepsPipelineGoing(const Active& r, int32_t depth) const {
  // A chain that uses the whole draft made ahead has no guess left, so the next step could not
  // be drafted ahead and would wait for a serial Propose. The draft was made one deeper than
  // the step it was made for, so this happens whenever a policy deepens its chain by one (a
  // goodput policy between two depths of near-equal value does so every few steps: a quarter of
  // its steps on the 8-bit self-draft of docs/benchmarks.md). One token less keeps the pipeline
  // going, and the next draft ahead goes to the depth chosen (PlanDraftAhead).
  if (!options_.pipeline || depth < 2 || !r.ready_draft.has_value() || r.ready_pool != r.pool) return false;
  return IsChain(*r.ready_draft) && static_cast<int32_t>(r.ready_draft->tokens.size()) == depth;
}

bool RouterCore::UseDraftMadeAhead(size_t i, StepPlan* plan) {
  Active* r = plan->batch[i];
  std::optional<spec::DraftProposal> ready = std::move(r->ready_draft);
  r->ready_draft.reset();
  const int32_t k = plan->k[i];
  if (!ready.has_value() || r->ready_pool != r->pool || plan->nodes[i] != k || k <= 0) return false;
  // Made ahead for a chain one deeper than the step it was made for; this step may ask for
  // less (a prefix of a chain is a chain) but not for more.
  if (static_cast<int32_t>(ready->tokens.size()) < k) return false;
  plan->drafts[i] = std::move(*ready);
  KeepGuess(i, plan);
  return true;
}

void RouterCore::KeepGuess(size_t i, StepPlan* plan) {
  spec::DraftProposal& d = plan->drafts[i];
  const size_t k = static_cast<size_t>(plan->k[i]);
  plan->guess[i] = -1;
  if (d.tokens.size() <= k) return;
  if (!IsChain(d)) return;  // a tree: no guess
  plan->guess[i] = d.tokens[k];
  const size_t vocab = d.probs.size() / d.tokens.size();
  d.tokens.resize(k);
  d.parents.resize(k);
  if (!d.probs.empty()) d.probs.resize(k * vocab);
  if (!d.scores.empty()) d.scores.resize(k);
}

double RouterCore::PlannedVerifySeconds(const StepPlan& plan, bool drafted) const {
  double context = 0, fed = 0;
  for (size_t i = 0; i < plan.batch.size(); ++i) {
    context += static_cast<double>(plan.batch[i]->history.size());
    const size_t nodes = drafted ? plan.drafts[i].tokens.size() : static_cast<size_t>(std::max(plan.nodes[i], 0));
    fed += 1.0 + static_cast<double>(nodes);
  }
  return latency_.TargetSeconds(context, fed);
}

double RouterCore::ChainAndGuessLand(const Active& r, int32_t k) const {
  return std::pow(std::clamp(tracker_.Request(r.id, r.pool), 0.0, 1.0), k + 1);
}

int32_t RouterCore::AlternativesAhead(const Active& r, int32_t assumed) const {
  return std::min(latency_.draft_ahead_alternatives(r.request.sampling.greedy()), assumed);
}

double RouterCore::DraftAheadLands(const Active& r, int32_t k, int32_t alternatives) const {
  return latency_.DraftAheadLands(ChainAndGuessLand(r, k), r.request.sampling.greedy(), alternatives > 0);
}

double RouterCore::AheadDraftSeconds(const Active& r, int32_t context, int32_t depth, int32_t alternatives,
                                     int32_t fed) const {
  // Each other outcome drafted for is one more chain of the same depth in the call's forwards.
  const size_t chains = 1 + static_cast<size_t>(alternatives);
  return latency_.DraftSeconds(latency_.ResolveAhead(r.pool), std::vector<int32_t>(chains, context),
                               std::vector<int32_t>(chains, depth), fed);
}

RouterCore::DraftAheadOption RouterCore::BestDraftAhead(const Active& r, int32_t k, int32_t assumed, int32_t context,
                                                        int32_t depth, double verify_seconds,
                                                        double saved_seconds) const {
  auto option = [&](int32_t alternatives) {
    DraftAheadOption o;
    o.alternatives = alternatives;
    o.lands = DraftAheadLands(r, k, alternatives);
    o.outlasting = std::max(0.0, AheadDraftSeconds(r, context, depth, alternatives, assumed) - verify_seconds);
    return o;
  };
  const DraftAheadOption alone = option(0);
  const int32_t allowed = AlternativesAhead(r, assumed);
  if (allowed == 0) return alone;
  const DraftAheadOption covered = option(allowed);
  return covered.Net(saved_seconds) >= alone.Net(saved_seconds) ? covered : alone;
}

bool RouterCore::DraftGuessPays(const Active& r, int32_t k, int32_t max_k, double verify_seconds,
                                double slowdown_seconds) const {
  if (k <= 0 || k >= max_k) return false;  // no chain, or no level left for a guess
  // Steady state, as goodput prices it (GoodputModel::Exposure): with the guess, the step's
  // own Propose (k + 1 levels) is needed only when the previous draft made ahead missed, and
  // the step waits for what of this one's draft made ahead outlasts the verify call and for
  // its share of what drafting beside the call adds to it; without it, every step waits for a
  // Propose of k levels.
  const int32_t context = static_cast<int32_t>(r.history.size());
  const double rpc = latency_.RpcSeconds();
  const LatencyModel::ResolvedDrafter drafter = latency_.Resolve(r.pool);
  const std::vector<int32_t> ctx = {context}, levels = {k}, deeper_levels = {k + 1};
  const double chain = latency_.DraftSeconds(drafter, ctx, levels);
  const double deeper = latency_.DraftSeconds(drafter, ctx, deeper_levels);
  // A hit spares the next step's Propose (k + 1 levels, as it would draft with the guess).
  const DraftAheadOption ahead = BestDraftAhead(r, k, k + 1, context + k + 1, k + 1, verify_seconds, deeper + rpc);
  return (1 - ahead.lands) * (deeper + rpc) + ahead.outlasting + slowdown_seconds < chain + rpc;
}

bool RouterCore::ProbesSlowdown() {
  const int32_t every = options_.slowdown_probe_steps;
  if (every <= 0) return false;
  // Where drafting ahead does not pay, a probe costs the slowdown itself: rarer, so that the
  // probes add at most kMaxSlowdownProbeShare of the verify time.
  double steps = every;
  if (!drafting_ahead_paid_) steps = std::max(steps, std::ceil(latency_.verify_slowdown() / kMaxSlowdownProbeShare));
  if (++steps_since_slowdown_probe_ < static_cast<int64_t>(steps)) return false;
  steps_since_slowdown_probe_ = 0;
  return true;
}

double RouterCore::SlowdownShareSeconds(const StepPlan& plan, double verify_seconds) const {
  if (plan.slowdown_probe || plan.batch.empty()) return 0.0;
  return latency_.verify_slowdown() * verify_seconds / static_cast<double>(plan.batch.size());
}

bool RouterCore::DraftAheadOutweighsSlowdown(const StepPlan& plan, double saving_seconds, double verify_seconds) {
  // The whole verify call slows while any request's draft is made beside it, so the step
  // weighs what all of them save.
  const bool pays = saving_seconds >= latency_.verify_slowdown() * verify_seconds;
  if (plan.slowdown_probe) return !pays;
  drafting_ahead_paid_ = pays;
  return pays;
}

namespace {

// Whether the step emitted exactly `tokens` after the `before` history tokens it started from.
bool Emitted(const std::vector<int32_t>& history, size_t before, const std::vector<int32_t>& tokens) {
  return history.size() == before + tokens.size() &&
         std::equal(tokens.begin(), tokens.end(), history.begin() + static_cast<std::ptrdiff_t>(before));
}

// A Propose call in the latency model's terms: each item's context once its new tokens are
// fed, its depth, and the tokens the first forward feeds.
struct ProposeShape {
  std::vector<int32_t> ctx, depth;
  double fed = 0;
};
void AddToShape(const spec::ProposeItem& item, ProposeShape* shape) {
  // Each other outcome drafted for is one more chain (RouterCore::AheadDraftSeconds).
  for (int32_t chain = 0; chain <= item.alternatives; ++chain) {
    shape->ctx.push_back(item.known_length + static_cast<int32_t>(item.new_tokens.size()));
    shape->depth.push_back(item.shape.depth);
  }
  shape->fed += static_cast<double>(item.new_tokens.size());
}
ProposeShape ShapeOf(const std::vector<spec::ProposeItem>& items) {
  ProposeShape shape;
  for (const spec::ProposeItem& item : items) AddToShape(item, &shape);
  return shape;
}

}  // namespace

std::vector<RouterCore::AheadCall> RouterCore::PlanDraftAhead(const StepPlan& plan) {
  // The verify call this step is about to make, as the latency model predicts it: a draft made
  // ahead that takes longer than that delays the step even when it turns out useless.
  const double verify_seconds = PlannedVerifySeconds(plan, /*drafted=*/true);
  std::map<std::string, AheadCall> by_pool;
  double step_saving = 0;
  for (size_t i = 0; i < plan.batch.size(); ++i) {
    const Active* r = plan.batch[i];
    const spec::DraftProposal& d = plan.drafts[i];
    const int32_t k = plan.k[i];
    if (plan.guess[i] < 0 || static_cast<int32_t>(d.tokens.size()) != k || k <= 0) continue;
    // The drafter's session may lag the committed history by a few tokens (a draft made during
    // the prefill, or one whose hypothesis held, leaves the last emitted token to send): they go
    // first. A session to resend whole is left to the next step's own Propose.
    auto known = r->known.find(r->pool);
    const int32_t history_size = static_cast<int32_t>(r->history.size());
    if (known == r->known.end() || known->second <= 0 || known->second > history_size ||
        history_size - known->second > plan.max_k + 1) {
      continue;
    }
    std::vector<int32_t> assumed = d.tokens;
    assumed.push_back(plan.guess[i]);
    // Only when the request would still be drafting after the hypothetical tokens.
    const int32_t remaining = r->request.max_tokens - r->usage.completion_tokens - static_cast<int32_t>(assumed.size());
    const int32_t room = max_context_ > 0 ? max_context_ - static_cast<int32_t>(r->history.size() + assumed.size())
                                          : plan.max_k + 1;
    // One past the depth the policy chose: a step that kept a token back as its guess
    // (KeepsPipelineGoing) asked for more than it verifies.
    const int32_t depth = std::min({std::max(k, plan.wanted[i]) + 1, plan.max_k, remaining, room});
    if (depth <= 1) continue;
    // Worth it when the Propose it saves the next step (with the chance that it is used: chain
    // and guess all land, each token at the request's acceptance estimate, or an alternative
    // catches the miss) outweighs the part of it the verify call does not hide, which this step
    // waits for whether it lands or not. The Propose saved is one chain: the alternatives' own
    // chains add to what is drafted ahead, not to what a hit saves.
    const int32_t ahead_context = static_cast<int32_t>(r->history.size() + assumed.size());
    // What a hit spares: the next step's serial Propose of the chain.
    const double spared_seconds =
        latency_.DraftSeconds(r->pool, std::vector<int32_t>{ahead_context}, std::vector<int32_t>{depth});
    const double saved_seconds = spared_seconds + latency_.RpcSeconds();
    const DraftAheadOption ahead = BestDraftAhead(*r, k, static_cast<int32_t>(assumed.size()), ahead_context, depth,
                                                  verify_seconds, saved_seconds);
    if (ahead.Net(saved_seconds) < 0) continue;
    AheadCall& call = by_pool[r->pool];
    call.gains.push_back(ahead.lands * saved_seconds);
    call.pool = r->pool;
    spec::ProposeItem item;
    item.id = r->id;
    item.known_length = known->second;
    item.new_tokens.assign(r->history.begin() + known->second, r->history.end());
    item.new_tokens.insert(item.new_tokens.end(), assumed.begin(), assumed.end());
    item.shape.depth = depth;
    item.sampling = r->request.sampling;
    item.alternatives = ahead.alternatives;
    // With alternatives the hypothesis stays out of the drafter's committed history, so that
    // whichever outcome holds, the next call sends the committed tokens from before it.
    if (item.alternatives > 0) item.assumed_tokens = static_cast<int32_t>(assumed.size());
    call.items.push_back(std::move(item));
    call.members.push_back(plan.batch[i]);
    call.history_before.push_back(static_cast<int32_t>(r->history.size()));
    call.assumed.push_back(std::move(assumed));
  }
  for (auto it = by_pool.begin(); it != by_pool.end();) {
    step_saving += KeepMembersThatPay(&it->second, verify_seconds);
    it = it->second.members.empty() ? by_pool.erase(it) : std::next(it);
  }
  if (!by_pool.empty() && !DraftAheadOutweighsSlowdown(plan, step_saving, verify_seconds)) return {};
  return TimedAheadCalls(std::move(by_pool));
}

double RouterCore::KeepMembersThatPay(AheadCall* call, double verify_seconds) const {
  const size_t n = call->members.size();
  const LatencyModel::ResolvedDrafter drafter = latency_.ResolveAhead(call->pool);
  // Where the whole call fits in the verify call (a cheap drafter: most steps), it is kept as
  // it is, priced once.
  const ProposeShape whole = ShapeOf(call->items);
  if (latency_.DraftSeconds(drafter, whole.ctx, whole.depth, whole.fed) <= verify_seconds) {
    double gains = 0;
    for (double gain : call->gains) gains += gain;
    return gains;
  }
  std::vector<size_t> by_gain(n);
  for (size_t m = 0; m < n; ++m) by_gain[m] = m;
  std::stable_sort(by_gain.begin(), by_gain.end(),
                   [call](size_t a, size_t b) { return call->gains[a] > call->gains[b]; });
  double best_net = 0, gains = 0;
  size_t best_count = 0;
  ProposeShape shape;  // of the members taken so far
  for (size_t count = 1; count <= n; ++count) {
    AddToShape(call->items[by_gain[count - 1]], &shape);
    gains += call->gains[by_gain[count - 1]];
    const double seconds = latency_.DraftSeconds(drafter, shape.ctx, shape.depth, shape.fed);
    const double net = gains - std::max(0.0, seconds - verify_seconds);
    if (net > best_net) {
      best_net = net;
      best_count = count;
    }
  }
  std::vector<bool> keep(n, false);
  for (size_t i = 0; i < best_count; ++i) keep[by_gain[i]] = true;
  AheadCall kept;
  kept.pool = call->pool;
  for (size_t m = 0; m < n; ++m) {
    if (!keep[m]) continue;
    kept.members.push_back(call->members[m]);
    kept.history_before.push_back(call->history_before[m]);
    kept.assumed.push_back(std::move(call->assumed[m]));
    kept.items.push_back(std::move(call->items[m]));
    kept.gains.push_back(call->gains[m]);
  }
  *call = std::move(kept);
  return best_net;
}

std::vector<RouterCore::AheadCall> RouterCore::TimedAheadCalls(std::map<std::string, AheadCall> by_pool) const {
  std::vector<AheadCall> calls;
  for (auto& [pool, call] : by_pool) {
    const ProposeShape shape = ShapeOf(call.items);
    // Feeding the new tokens costs the drafter at most what it costs the target.
    call.timeout = CallTimeout(latency_.DraftSeconds(latency_.ResolveAhead(pool), shape.ctx, shape.depth) +
                                   latency_.TargetSeconds(0, shape.fed) + latency_.RpcSeconds(),
                               1.0);
    calls.push_back(std::move(call));
  }
  return calls;
}

void RouterCore::DraftAhead(std::vector<AheadCall>* calls) {
  RunInParallel(calls->size(), [this, calls](size_t c) {
    AheadCall& call = (*calls)[c];
    DrafterClient* drafter = drafters_.at(call.pool);
    drafter->SetCallTimeout(call.timeout);
    call.response = drafter->ProposeBesideVerify(call.items);
  });
}

void RouterCore::ObserveAheadCall(const AheadCall& call) {
  // Drafts made ahead have a correction of their own (LatencyModel::ObserveDraftAhead): they
  // run beside the verifier, which may slow them, as the drafts made ahead they price do.
  const ProposeShape shape = ShapeOf(call.items);
  latency_.ObserveDraftAhead(call.pool, shape.ctx, shape.depth, call.response->compute_seconds, shape.fed);
}

void RouterCore::ApplyDraftAhead(std::vector<AheadCall>& calls, double verify_compute, StepStats* stats) {
  for (AheadCall& call : calls) {
    std::map<RequestId, spec::ProposeResult*> by_id;
    if (call.response.ok()) {
      ObserveAheadCall(call);
      stats->draft_ahead_seconds += call.response->compute_seconds;
      stats->draft_ahead_slowest_seconds = std::max(stats->draft_ahead_slowest_seconds, call.response->compute_seconds);
      // Pools draft ahead in parallel with each other and with the verifier: what a pool
      // computed within the verifier's compute time was hidden behind it.
      stats->hidden_draft_seconds += std::min(call.response->compute_seconds, verify_compute);
      for (spec::ProposeResult& res : call.response->results) by_id[res.id] = &res;
    }
    for (size_t m = 0; m < call.members.size(); ++m) {
      Active* r = call.members[m];
      ++stats->draft_ahead_issued;
      auto it = by_id.find(r->id);
      if (it == by_id.end() || !it->second->status.ok()) {
        r->known[call.pool] = 0;  // the drafter's session is unknown: resend it whole
        continue;
      }
      const size_t before = static_cast<size_t>(call.history_before[m]);
      // The drafter counts the hypothesis as seen unless it was sent as assumed tokens; either
      // way it holds the committed prefix, and the next call sends what the step emitted.
      r->known[call.pool] = static_cast<int32_t>(before);
      const bool live = !r->finished && r->pool == call.pool;
      spec::ProposeResult& result = *it->second;
      if (live && Emitted(r->history, before, call.assumed[m])) {
        if (call.items[m].assumed_tokens == 0) r->known[call.pool] = static_cast<int32_t>(r->history.size());
        r->ready_draft = std::move(result.draft);
        r->ready_pool = call.pool;
        ++stats->draft_ahead_hypothesis_held;
        continue;
      }
      bool rescued = false;
      for (spec::AlternativeDraft& alternative : result.alternatives) {
        if (!live || !Emitted(r->history, before, alternative.assumed)) continue;
        r->ready_draft = std::move(alternative.draft);
        r->ready_pool = call.pool;
        rescued = true;
        break;
      }
      if (live && call.items[m].alternatives > 0) {
        latency_.ObserveAlternativeOutcome(rescued, r->request.sampling.greedy());
      }
      ++(rescued ? stats->draft_ahead_alternatives_held : stats->draft_ahead_dropped);
    }
  }
}

}  // namespace splitspec::router
