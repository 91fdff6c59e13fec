// RouterCore::DecodeStep and its named steps:
//   ReconsiderPools -> PlanStep (policy, who runs, k) -> Draft (one Propose per pool)
//   -> Verify (one batched call) -> ApplyResults (tokens, stop conditions, per-item errors)
//   -> ObserveStep (estimators, latency model, policy, metrics).
#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "router/goodput.h"
#include "router/router_core.h"
#include "router/router_core_internal.h"

namespace splitspec::router {
namespace {

// A chain draft of at most `k` in-vocabulary tokens, well formed; anything else is dropped
// (verified as a plain decode) rather than sent to fail at the verifier.
bool ValidChainDraft(const spec::DraftProposal& d, int32_t k, int32_t vocab) {
  const size_t n = d.tokens.size();
  if (static_cast<int32_t>(n) > k || d.parents.size() != n) return false;
  for (size_t j = 0; j < n; ++j) {
    if (d.parents[j] != static_cast<int32_t>(j) - 1) return false;
    if (d.tokens[j] < 0 || (vocab > 0 && d.tokens[j] >= vocab)) return false;
  }
  if (!d.probs.empty() && (vocab <= 0 || d.probs.size() != n * static_cast<size_t>(vocab))) {
    return false;
  }
  return true;
}

// A verifier result the router can apply: accepted tokens are a prefix of the draft, followed
// by exactly one in-vocabulary token.
bool ValidVerifyResult(const spec::VerifyResult& v, const spec::DraftProposal& d, int32_t vocab) {
  if (v.tokens.empty() || v.accept_length < 0 ||
      v.accept_length > static_cast<int32_t>(d.tokens.size()) ||
      static_cast<int32_t>(v.tokens.size()) != v.accept_length + 1) {
    return false;
  }
  for (int32_t j = 0; j < v.accept_length; ++j) {
    if (v.tokens[j] != d.tokens[j]) return false;
  }
  for (int32_t t : v.tokens) {
    if (t < 0 || (vocab > 0 && t >= vocab)) return false;
  }
  return true;
}

}  // namespace

bool RouterCore::DecodeStep(StepStats* stats) {
  std::vector<Active*> ready;
  for (auto& r : running_) {
    if (r->prefilled && !r->finished) ready.push_back(r.get());
  }
  if (ready.empty()) return false;
  StepPlan plan;
  plan.started_at = clock_->NowSeconds();
  {
    MutexLock lock(&mu_);
    plan.max_k = max_k_;
    plan.vocab = vocab_size_;
  }
  ReconsiderPools(ready, plan.max_k);
  PlanStep(std::move(ready), &plan, stats);
  stats->schedule_seconds = clock_->NowSeconds() - plan.started_at;
  Draft(&plan);
  stats->draft_seconds = plan.draft_compute;
  stats->batch_size = static_cast<int32_t>(plan.batch.size());
  stats->k = plan.k;
  absl::StatusOr<spec::VerifyResponse> verified = VerifyPlan(&plan);
  if (!verified.ok()) {
    // Requests with no verifier state we trust cannot continue; fail them loudly instead of
    // guessing.
    const absl::Status failure = absl::UnavailableError(
        absl::StrCat("verifier failed: ", verified.status().ToString()));
    for (Active* r : plan.batch) {
      StreamEvent e;
      Finish(*r, FinishReason::kError, failure, &e);
      Emit(*r, e);
    }
    stats->wall_seconds = clock_->NowSeconds() - plan.started_at;
    ++steps_;
    return true;
  }
  StepOutcome outcome = ApplyResults(plan, *verified, stats);
  ObserveStep(plan, *verified, std::move(outcome), stats);
  return true;
}

void RouterCore::ReconsiderPools(const std::vector<Active*>& ready, int32_t max_k) {
  if (pool_names_.size() <= 1) return;  // only matters with several pools
  for (Active* r : ready) {
    if (!r->speculative || !r->request.drafter.empty()) continue;
    const std::string next =
        ReconsiderPool(pool_names_, r->id, r->pool, static_cast<int32_t>(r->history.size()), max_k,
                       tracker_, latency_, options_.pool_selection);
    if (next == r->pool) continue;
    if (r->known.count(r->pool)) {
      drafter_releases_[r->pool].push_back(r->id);
      r->known.erase(r->pool);
    }
    r->pool = next;
  }
}

int32_t RouterCore::UsefulK(const Active& r, int32_t max_k) const {
  if (!r.speculative) return 0;
  // A step yields at most k + 1 tokens; drafting past max_tokens is wasted work.
  int32_t useful = r.request.max_tokens - r.usage.completion_tokens - 1;
  // The verifier feeds the pending token plus k nodes after the committed history.
  if (max_context_ > 0) useful = std::min(useful, max_context_ - static_cast<int32_t>(r.history.size()));
  return std::clamp(useful, 0, max_k);
}

void RouterCore::PlanStep(std::vector<Active*> ready, StepPlan* plan, StepStats* stats) {
  const size_t n = ready.size();
  PolicyInput input;
  input.max_k = plan->max_k;
  input.latency = &latency_;
  input.acceptance = &tracker_;
  input.requests.reserve(n);
  std::vector<int32_t> useful(n, 0);
  for (size_t i = 0; i < n; ++i) {
    Active* r = ready[i];
    PolicyRequest p;
    p.id = r->id;
    p.context_tokens = static_cast<int32_t>(r->history.size());
    p.prompt_tokens = r->prompt_len;
    p.speculative = r->speculative;
    p.pool = r->pool;
    p.acceptance = tracker_.Request(r->id, r->pool);
    useful[i] = UsefulK(*r, plan->max_k);
    p.max_useful_k = useful[i];
    p.history = r->history;
    p.must_run = r->sat_out_steps >= std::max(options_.max_sit_out_steps, 0);
    input.requests.push_back(std::move(p));
  }
  std::vector<int32_t> decided = policy_->Decide(input);
  decided.resize(n, 0);

  // Who runs: a request sits out only when the policy says so and it may (router_core.h); at
  // least one request runs.
  std::vector<size_t> run;
  for (size_t i = 0; i < n; ++i) {
    if (decided[i] >= 0 || input.requests[i].must_run) run.push_back(i);
  }
  if (run.empty()) run.push_back(0);
  for (size_t j = 0, i = 0; i < n; ++i) {
    if (j < run.size() && run[j] == i) {
      ++j;
      ready[i]->sat_out_steps = 0;
      plan->batch.push_back(ready[i]);
      plan->k.push_back(std::clamp(decided[i], 0, useful[i]));
    } else {
      ++ready[i]->sat_out_steps;
      ++stats->sat_out;
    }
  }
  if (options_.step_observer) {
    // What the model expects of this decision, for the estimated-vs-observed goodput metric.
    std::vector<GoodputItem> items;
    for (size_t i : run) {
      const PolicyRequest& p = input.requests[i];
      items.push_back(GoodputItem{p.context_tokens, p.acceptance, p.pool, p.speculative});
    }
    stats->estimated_goodput = GoodputModel(latency_, std::move(items), plan->max_k).Goodput(plan->k);
  }
  plan->drafts.resize(plan->batch.size());
}

void RouterCore::Draft(StepPlan* plan) {
  for (const std::string& pool : pool_names_) {
    std::vector<size_t> members;
    for (size_t i = 0; i < plan->batch.size(); ++i) {
      if (plan->k[i] > 0 && plan->batch[i]->pool == pool) members.push_back(i);
    }
    if (!members.empty()) DraftForPool(pool, members, plan);
  }
}

void RouterCore::DraftForPool(const std::string& pool, const std::vector<size_t>& members,
                              StepPlan* plan) {
  std::vector<spec::ProposeItem> items;
  std::vector<int32_t> ctx, kk;
  double catch_up_tokens = 0;
  for (size_t i : members) {
    Active* r = plan->batch[i];
    int32_t known = 0;
    auto it = r->known.find(pool);
    if (it != r->known.end() && it->second <= static_cast<int32_t>(r->history.size())) {
      known = it->second;
    }
    spec::ProposeItem item;
    item.id = r->id;
    item.known_length = known;
    item.new_tokens.assign(r->history.begin() + known, r->history.end());
    catch_up_tokens += static_cast<double>(item.new_tokens.size());
    item.shape.depth = plan->k[i];
    item.shape.branching = 1;
    item.sampling = r->request.sampling;
    items.push_back(std::move(item));
    ctx.push_back(static_cast<int32_t>(r->history.size()));
    kk.push_back(plan->k[i]);
  }
  const double ts = clock_->NowSeconds();
  absl::StatusOr<spec::ProposeResponse> resp = drafters_.at(pool)->Propose(items);
  const double wall = clock_->NowSeconds() - ts;
  ++plan->rpcs;
  if (!resp.ok()) {
    // No drafts this step; the drafter's state is unknown, so resend everything next time.
    for (size_t i : members) {
      plan->batch[i]->known[pool] = 0;
      plan->k[i] = 0;
    }
    plan->rpc_excess += wall;
    return;
  }
  plan->draft_compute += resp->compute_seconds;
  plan->rpc_excess += std::max(0.0, wall - resp->compute_seconds);
  latency_.ObserveDraft(pool, ctx, kk, resp->compute_seconds, catch_up_tokens);
  std::map<RequestId, spec::ProposeResult*> by_id;
  for (spec::ProposeResult& res : resp->results) by_id[res.id] = &res;
  for (size_t i : members) {
    Active* r = plan->batch[i];
    auto it = by_id.find(r->id);
    if (it == by_id.end() || !it->second->status.ok()) {
      // This item only: no draft, and its drafter session is resent in full next time.
      r->known[pool] = 0;
      plan->k[i] = 0;
      continue;
    }
    r->known[pool] = static_cast<int32_t>(r->history.size());
    if (ValidChainDraft(it->second->draft, plan->k[i], plan->vocab)) {
      plan->drafts[i] = std::move(it->second->draft);
    }
  }
}

absl::StatusOr<spec::VerifyResponse> RouterCore::VerifyPlan(StepPlan* plan) {
  const size_t n = plan->batch.size();
  std::vector<spec::VerifyItem> items(n);
  for (size_t i = 0; i < n; ++i) {
    items[i].id = plan->batch[i]->id;
    items[i].draft = plan->drafts[i];
    plan->context_tokens += static_cast<double>(plan->batch[i]->history.size());
    plan->fed_tokens += 1.0 + static_cast<double>(plan->drafts[i].tokens.size());
  }
  const double tv = clock_->NowSeconds();
  absl::StatusOr<spec::VerifyResponse> resp = verifier_->Verify(items);
  const double wall = clock_->NowSeconds() - tv;
  ++plan->rpcs;
  if (resp.ok()) plan->rpc_excess += std::max(0.0, wall - resp->compute_seconds);
  return resp;
}

StepOutcome RouterCore::ApplyResults(const StepPlan& plan, const spec::VerifyResponse& resp,
                                     StepStats* stats) {
  std::map<RequestId, const spec::VerifyResult*> results;
  for (const spec::VerifyResult& v : resp.results) results[v.id] = &v;
  StepOutcome outcome;
  for (size_t i = 0; i < plan.batch.size(); ++i) {
    Active* r = plan.batch[i];
    const spec::DraftProposal& d = plan.drafts[i];
    StreamEvent e;
    auto it = results.find(r->id);
    const spec::VerifyResult* v = it == results.end() ? nullptr : it->second;
    if (v != nullptr && absl::IsOutOfRange(v->status)) {
      // The context is full (the router keeps k within it, so only a verifier with a smaller
      // context than it reported gets here): the request ends as if it reached max_tokens.
      Finish(*r, FinishReason::kLength, absl::OkStatus(), &e);
      Emit(*r, e);
      continue;
    }
    if (v != nullptr && !v->status.ok()) {
      Finish(*r, FinishReason::kError, v->status, &e);
      Emit(*r, e);
      continue;
    }
    if (v == nullptr || !ValidVerifyResult(*v, d, plan.vocab)) {
      Finish(*r, FinishReason::kError,
             absl::InternalError("verifier returned no valid result for the request"), &e);
      Emit(*r, e);
      continue;
    }
    const int32_t drafted = static_cast<int32_t>(d.tokens.size());
    ++r->usage.steps;
    r->usage.drafted_tokens += drafted;
    r->usage.accepted_tokens += v->accept_length;
    stats->drafted_tokens += drafted;
    stats->accepted_tokens += v->accept_length;
    RequestOutcome o;
    o.id = r->id;
    o.pool = r->pool;
    o.proposed = drafted;
    o.accepted = v->accept_length;
    o.emitted = v->tokens;
    const int32_t before = r->usage.completion_tokens;
    AppendTokens(*r, v->tokens, &e);
    stats->emitted_tokens += r->usage.completion_tokens - before;
    Emit(*r, e);
    outcome.requests.push_back(std::move(o));
  }
  return outcome;
}

void RouterCore::ObserveStep(const StepPlan& plan, const spec::VerifyResponse& resp,
                             StepOutcome outcome, StepStats* stats) {
  stats->verify_seconds = resp.compute_seconds;
  latency_.ObserveTarget(plan.context_tokens, plan.fed_tokens, resp.compute_seconds);
  if (resp.total_blocks > 0) {
    MutexLock lock(&mu_);
    total_blocks_ = resp.total_blocks;
  }
  std::vector<AcceptanceTracker::Observation> observations;
  for (const RequestOutcome& o : outcome.requests) {
    if (o.proposed > 0) observations.push_back({o.id, o.pool, {o.proposed, o.accepted}});
  }
  if (plan.rpcs > 0) latency_.ObserveRpcOverhead(plan.rpc_excess / plan.rpcs);
  tracker_.ObserveStep(observations);
  outcome.draft_seconds = plan.draft_compute;
  outcome.verify_seconds = resp.compute_seconds;
  for (int32_t x : plan.k) outcome.max_draft_depth = std::max(outcome.max_draft_depth, x);
  for (size_t i = 0; i < plan.batch.size(); ++i) {
    if (plan.batch[i]->speculative) ++k_histogram_[plan.k[i]];
  }
  stats->wall_seconds = clock_->NowSeconds() - plan.started_at;
  outcome.wall_seconds = stats->wall_seconds;
  stats->overhead_seconds =
      stats->wall_seconds - std::max(stats->draft_seconds, stats->verify_seconds);
  policy_->Observe(outcome);
  ++steps_;
  if (options_.step_observer) {
    stats->rpc_overhead_seconds = plan.rpc_excess;
    stats->requests = std::move(outcome.requests);
    options_.step_observer(*stats);
  }
}

}  // namespace splitspec::router
