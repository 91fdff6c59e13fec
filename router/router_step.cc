// RouterCore::DecodeStep and its named steps:
//   ReconsiderPools -> PlanStep (policy, who runs, k) -> Draft (one Propose per pool, pools
//   in parallel)
//   -> VerifyOnReplicas (one batched call per verifier replica, replicas in parallel)
//   -> ApplyResults (tokens, stop conditions, per-item errors; a failed replica's requests
//      move to another, router_failover.cc) -> ObserveStep (estimators, latency model,
//      policy, metrics).
#include <algorithm>
#include <vector>
#include <functional>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "router/draft_paths.h"
#include "router/goodput.h"
#include "router/parallel_calls.h"
#include "router/router_core.h"
#include "router/router_core_internal.h"

namespace splitspec::router {
namespace {

// Children per node the router asks a tree-building drafter for; the node budget and the
// drafter's ranking decide how many it uses.
constexpr int32_t kTreeBranching = 4;

}  // namespace

bool RouterCore::DecodeStep(StepStats* stats) {
  std::vector<Active*> ready;
  for (auto& r : running_) {
    if (r->prefilled && !r->finished) ready.push_back(r.get());
  }
  if (ready.empty()) return false;
  StepPlan plan;
  plan.started_at = clock_->NowSeconds();
  if (follows_decode_step_) {
    stats->between_steps_seconds = std::max(0.0, plan.started_at - previous_step_end_ - stats->prefill_seconds);
  }
  {
    MutexLock lock(&mu_);
    plan.max_k = max_k_;
    plan.vocab = vocab_size_;
  }
  ResumeSpeculation(ready);
  ReconsiderPools(ready, plan.max_k);
  PlanStep(std::move(ready), &plan, stats);
  if (options_.pipeline) plan.slowdown_probe = ProbesSlowdown();
  stats->schedule_seconds = clock_->NowSeconds() - plan.started_at;
  Draft(&plan, stats);
  stats->draft_seconds = plan.draft_compute;
  stats->batch_size = static_cast<int32_t>(plan.batch.size());
  stats->k = plan.k;
  // Pipeline: the next step's drafts are made while this one verifies (router_pipeline.cc).
  // Where the verify call runs its side work on this thread once its request is out, they are
  // also planned there: their pricing (the latency model, acceptance estimates) then stays off
  // the way from the last answer to the verify request. Elsewhere they are planned here, which
  // spares the side thread a wake-up on steps that draft nothing ahead.
  std::vector<AheadCall> ahead;
  const bool plan_ahead_beside = options_.pipeline && VerifyOverlapsWork(plan);
  if (options_.pipeline && !plan_ahead_beside) ahead = PlanDraftAhead(plan);
  // Beside the verify call: the previous step's deferred tokens, the draft-ahead, then the
  // previous step's report.
  std::function<void()> alongside;
  if (plan_ahead_beside || !deferred_events_.empty() || !ahead.empty() || deferred_report_.has_value()) {
    alongside = [this, &ahead, &plan, plan_ahead_beside] {
      FlushEvents();
      if (plan_ahead_beside) ahead = PlanDraftAhead(plan);
      if (!ahead.empty()) {
        DraftAhead(&ahead);
        PriceNextStepAhead(plan, ahead);
      }
      FlushReport();
    };
  }
  std::vector<ReplicaCall> calls = VerifyOnReplicas(&plan, alongside);
  plan.drafted_ahead = !ahead.empty();
  FlushReport();  // where no call ran the side work
  StepOutcome outcome = ApplyResults(plan, calls, stats);
  // Waking the side thread costs about one hand-off: deferring pays from two requests up, or
  // from one where the next verify call carries the work without a hand-off.
  if (deferred_events_.size() < 2 && !verify_overlaps_work_) FlushEvents();
  if (!ahead.empty()) ApplyDraftAhead(ahead, plan.verify_compute, stats);
  ObserveStep(plan, calls, std::move(outcome), stats);
  return true;
}

void RouterCore::ResumeSpeculation(const std::vector<Active*>& ready) {
  if (pool_names_.empty()) return;
  for (Active* r : ready) {
    // r->pool was chosen at admission; r->known is empty, so the next Propose sends the whole
    // history and the drafter builds its session then.
    if (!r->speculative && r->started && policy_->ResumeSpeculation()) r->speculative = true;
  }
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

int32_t RouterCore::UsefulK(const Active& r, int32_t max_k, int32_t more_tokens) const {
  if (!r.speculative) return 0;
  // A step yields at most k + 1 tokens; drafting past max_tokens is wasted work.
  int32_t useful = r.request.max_tokens - r.usage.completion_tokens - more_tokens - 1;
  // The verifier feeds the pending token plus k nodes after the committed history.
  const int32_t context = static_cast<int32_t>(r.history.size()) + more_tokens;
  if (max_context_ > 0) useful = std::min(useful, max_context_ - context);
  return std::clamp(useful, 0, max_k);
}

int32_t RouterCore::DraftCatchUp(const Active& r) const {
  if (!r.speculative || r.pool.empty()) return 0;
  const auto it = r.known.find(r.pool);
  const int32_t size = static_cast<int32_t>(r.history.size());
  // No session with its pool yet (or one to resend): the drafter prefills the whole history.
  if (it == r.known.end() || it->second <= 0 || it->second > size) return size;
  return std::max(0, size - std::max(r.drafted_through, it->second));
}

PolicyRequest RouterCore::PolicyRequestFor(const Active& r, int32_t max_k, int32_t assumed_tokens) const {
  const int32_t more = assumed_tokens;
  PolicyRequest p;
  p.id = r.id;
  p.context_tokens = static_cast<int32_t>(r.history.size()) + more;
  p.prompt_tokens = r.prompt_len;
  p.speculative = r.speculative;
  p.pool = r.pool;
  p.acceptance = tracker_.Request(r.id, r.pool);
  p.max_useful_k = UsefulK(r, max_k, more);
  // A step that drafted leaves its drafter caught up (drafted_through: ApplyResults).
  p.draft_catch_up = more > 0 ? 0 : DraftCatchUp(r);
  p.remaining_tokens = std::max(0, r.request.max_tokens - r.usage.completion_tokens - more);
  p.greedy = r.request.sampling.greedy();
  p.history = r.history;
  p.must_run = r.sat_out_steps >= std::max(options_.max_sit_out_steps, 0);
  return p;
}

void RouterCore::PlanStep(std::vector<Active*> ready, StepPlan* plan, StepStats* stats) {
  const size_t n = ready.size();
  PolicyInput input;
  input.max_k = plan->max_k;
  input.latency = &latency_;
  input.acceptance = &tracker_;
  input.tree_acceptance = &tree_acceptance_;
  input.requests.reserve(n);
  for (size_t i = 0; i < n; ++i) input.requests.push_back(PolicyRequestFor(*ready[i], plan->max_k));
  std::vector<ProposalChoice> decided = DecideProposals(input, stats);
  decided.resize(n, ProposalChoice{});

  // Who runs: a request sits out only when the policy says so and it may (router_core.h); at
  // least one request runs.
  std::vector<size_t> run;
  for (size_t i = 0; i < n; ++i) {
    if (decided[i].depth >= 0 || input.requests[i].must_run) run.push_back(i);
  }
  if (run.empty()) run.push_back(0);
  NoteRecentChoice(ready, run, decided);
  for (size_t j = 0, i = 0; i < n; ++i) {
    if (j < run.size() && run[j] == i) {
      ++j;
      ready[i]->sat_out_steps = 0;
      plan->batch.push_back(ready[i]);
      int32_t depth = std::clamp(decided[i].depth, 0, input.requests[i].max_useful_k);
      plan->wanted.push_back(depth);
      if (!decided[i].tree() && KeepsPipelineGoing(*ready[i], depth)) --depth;
      plan->k.push_back(depth);
      // A tree's nodes all sit in the verifier's KV during the step: the context bounds them.
      int32_t nodes = depth;
      if (decided[i].tree() && depth > 0) {
        int32_t room = plan->max_k;
        if (max_context_ > 0) room = std::min(room, max_context_ - static_cast<int32_t>(ready[i]->history.size()));
        nodes = std::max(depth, std::min(decided[i].nodes, room));
      }
      plan->nodes.push_back(nodes);
      // The expectation was for the shape the policy chose; a clamped shape has none.
      const bool as_chosen = depth == decided[i].depth && nodes == std::max(decided[i].nodes, depth);
      plan->expected.push_back(as_chosen ? decided[i].expected_tokens : 0.0);
    } else {
      ++ready[i]->sat_out_steps;
      ++stats->sat_out;
    }
  }
  if (options_.step_observer) {
    // What the model expects of this decision, for the estimated-vs-observed goodput metric:
    // priced when the step is reported (RouterCore::Report), off the way to its calls.
    GoodputEstimate estimate;
    estimate.items.reserve(run.size());
    for (size_t i : run) {
      const PolicyRequest& p = input.requests[i];
      estimate.items.push_back(GoodputItem{p.context_tokens, p.acceptance, p.pool, p.speculative, p.draft_catch_up,
                                           p.remaining_tokens, p.greedy});
    }
    estimate.k = plan->k;
    estimate.max_k = plan->max_k;
    step_goodput_ = std::move(estimate);
  }
  plan->drafts.resize(plan->batch.size());
}

void RouterCore::NoteRecentChoice(const std::vector<Active*>& ready, const std::vector<size_t>& run,
                                  const std::vector<ProposalChoice>& decided) {
  int32_t deepest = -1;
  bool tree = false;
  for (size_t i : run) {
    if (!ready[i]->speculative) continue;
    if (decided[i].depth > deepest) {
      deepest = decided[i].depth;
      tree = decided[i].tree();
    }
  }
  if (deepest < 0) return;  // nobody speculative ran: nothing learnt
  recent_k_ = deepest;
  recent_tree_ = tree;
}

void RouterCore::Draft(StepPlan* plan, StepStats* stats) {
  plan->guess.assign(plan->batch.size(), -1);
  std::vector<bool> made_ahead(plan->batch.size(), false);
  for (size_t i = 0; i < plan->batch.size(); ++i) {
    if (!UseDraftMadeAhead(i, plan)) continue;
    if (ValidDraft(plan->drafts[i], plan->k[i], plan->nodes[i], plan->vocab)) {
      made_ahead[i] = true;
      ++stats->draft_ahead_used;
    } else {
      plan->drafts[i] = {};
      plan->guess[i] = -1;
    }
  }
  std::vector<PoolCall> calls;
  for (const std::string& pool : pool_names_) {
    std::vector<size_t> members;
    for (size_t i = 0; i < plan->batch.size(); ++i) {
      if (plan->k[i] > 0 && !made_ahead[i] && plan->batch[i]->pool == pool) members.push_back(i);
    }
    if (!members.empty()) calls.push_back(BuildPoolCall(pool, std::move(members), *plan));
  }
  // Every pool's Propose is in flight at once: no pool waits for another.
  auto call_pool = [this, &calls](size_t c) {
    PoolCall& call = calls[c];
    DrafterClient* drafter = drafters_.at(call.pool);
    drafter->SetCallTimeout(call.timeout);
    const double start = clock_->NowSeconds();
    call.response = drafter->Propose(call.items);
    call.wall_seconds = clock_->NowSeconds() - start;
  };
  const double calls_start = clock_->NowSeconds();
  if (options_.parallel_pool_calls) {
    RunInParallel(calls.size(), call_pool);
  } else {
    for (size_t c = 0; c < calls.size(); ++c) call_pool(c);
  }
  if (!calls.empty()) plan->call_wall += clock_->NowSeconds() - calls_start;
  for (PoolCall& call : calls) ApplyPoolCall(call, plan);
}

RouterCore::PoolCall RouterCore::BuildPoolCall(const std::string& pool, std::vector<size_t> members,
                                               const StepPlan& plan) const {
  PoolCall call;
  call.pool = pool;
  call.members = std::move(members);
  const double verify_seconds = options_.pipeline ? PlannedVerifySeconds(plan, /*drafted=*/false) : 0.0;
  const double slowdown_seconds = options_.pipeline ? SlowdownShareSeconds(plan, verify_seconds) : 0.0;
  for (size_t i : call.members) {
    const Active* r = plan.batch[i];
    int32_t known = 0;
    auto it = r->known.find(pool);
    if (it != r->known.end() && it->second <= static_cast<int32_t>(r->history.size())) {
      known = it->second;
    }
    spec::ProposeItem item;
    item.id = r->id;
    item.known_length = known;
    item.new_tokens.assign(r->history.begin() + known, r->history.end());
    call.catch_up_tokens += static_cast<double>(item.new_tokens.size());
    item.shape.depth = plan.k[i];
    const bool tree = plan.nodes[i] > plan.k[i];
    // Pipeline: a chain one deeper, its last token the guess a draft-ahead builds on.
    if (options_.pipeline && !tree && DraftGuessPays(*r, plan.k[i], plan.max_k, verify_seconds, slowdown_seconds)) {
      item.shape.depth = plan.k[i] + 1;
    }
    item.shape.branching = tree ? kTreeBranching : 1;
    item.shape.max_nodes = tree ? plan.nodes[i] : 0;
    item.sampling = r->request.sampling;
    call.ctx.push_back(static_cast<int32_t>(r->history.size()));
    // The levels really drafted (one more with the pipeline): the draft-time correction
    // compares the drafter's compute with this.
    call.depth.push_back(item.shape.depth);
    call.items.push_back(std::move(item));
  }
  // Catch-up tokens (a whole history after a resend) are bounded by the target's cost for
  // them: generous, as a deadline should be.
  call.timeout = CallTimeout(latency_.DraftSeconds(pool, call.ctx, call.depth) +
                                 latency_.TargetSeconds(0, call.catch_up_tokens) + latency_.RpcSeconds(),
                             1.0);
  return call;
}

void RouterCore::ApplyPoolCall(PoolCall& call, StepPlan* plan) {
  ++plan->rpcs;
  if (!call.response.ok()) {
    // No drafts this step; the drafter's state is unknown, so resend everything next time.
    for (size_t i : call.members) {
      plan->batch[i]->known[call.pool] = 0;
      plan->k[i] = 0;
      plan->nodes[i] = 0;
    }
    plan->rpc_excess += call.wall_seconds;
    return;
  }
  const spec::ProposeResponse& resp = *call.response;
  plan->draft_compute += resp.compute_seconds;
  plan->draft_compute_slowest = std::max(plan->draft_compute_slowest, resp.compute_seconds);
  plan->rpc_excess += std::max(0.0, call.wall_seconds - resp.compute_seconds);
  latency_.ObserveDraft(call.pool, call.ctx, call.depth, resp.compute_seconds, call.catch_up_tokens);
  std::map<RequestId, spec::ProposeResult*> by_id;
  for (spec::ProposeResult& res : call.response->results) by_id[res.id] = &res;
  for (size_t i : call.members) {
    Active* r = plan->batch[i];
    auto it = by_id.find(r->id);
    if (it == by_id.end() || !it->second->status.ok()) {
      // This item only: no draft, and its drafter session is resent in full next time.
      r->known[call.pool] = 0;
      plan->k[i] = 0;
      plan->nodes[i] = 0;
      continue;
    }
    r->known[call.pool] = static_cast<int32_t>(r->history.size());
    plan->drafts[i] = std::move(it->second->draft);
    if (options_.pipeline) KeepGuess(i, plan);
    if (!ValidDraft(plan->drafts[i], plan->k[i], plan->nodes[i], plan->vocab)) {
      plan->drafts[i] = {};
      plan->guess[i] = -1;
    }
  }
}

std::vector<RouterCore::ReplicaCall> RouterCore::VerifyOnReplicas(StepPlan* plan,
                                                                   const std::function<void()>& alongside) {
  std::map<int, ReplicaCall> by_replica;
  for (size_t i = 0; i < plan->batch.size(); ++i) {
    ReplicaCall& call = by_replica[plan->batch[i]->replica];
    call.replica = plan->batch[i]->replica;
    call.members.push_back(i);
  }
  std::vector<ReplicaCall> calls;
  std::vector<std::vector<spec::VerifyItem>> items;
  for (auto& [replica, call] : by_replica) {
    std::vector<spec::VerifyItem> batch;
    for (size_t i : call.members) {
      spec::VerifyItem item;
      item.id = plan->batch[i]->id;
      item.draft = plan->drafts[i];
      call.context_tokens += static_cast<double>(plan->batch[i]->history.size());
      call.fed_tokens += 1.0 + static_cast<double>(plan->drafts[i].tokens.size());
      batch.push_back(std::move(item));
    }
    VerifierReplica& v = replicas_.at(replica);
    v.client->SetCallTimeout(CallTimeout(
        latency_.TargetSeconds(call.context_tokens, call.fed_tokens) + latency_.RpcSeconds(),
        v.timeout_scale));
    items.push_back(std::move(batch));
    calls.push_back(std::move(call));
  }
  verify_overlaps_work_ = VerifyOverlapsWork(*plan);
  const bool on_side_thread = alongside && !verify_overlaps_work_;
  const double calls_start = clock_->NowSeconds();
  if (on_side_thread) side_thread_.Start(alongside);
  // Work run inside the call: what of it outlasted the worker's compute is not the call's.
  double inline_work_seconds = 0;
  RunInParallel(calls.size(), [this, &calls, &items, &alongside, &inline_work_seconds](size_t c) {
    VerifierClient* client = replicas_.at(calls[c].replica).client;
    const double start = clock_->NowSeconds();
    if (c == 0 && alongside && verify_overlaps_work_) {
      calls[c].response = client->VerifyWhile(items[c], [&] {
        const double work_start = clock_->NowSeconds();
        alongside();
        inline_work_seconds = clock_->NowSeconds() - work_start;
      });
    } else {
      calls[c].response = client->Verify(items[c]);
    }
    calls[c].wall_seconds = clock_->NowSeconds() - start;
  });
  if (on_side_thread) side_thread_.Wait();
  plan->call_wall += clock_->NowSeconds() - calls_start;
  for (ReplicaCall& call : calls) {
    ++plan->rpcs;
    if (!call.response.ok()) continue;
    call.wall_seconds -= std::max(0.0, inline_work_seconds - call.response->compute_seconds);
    plan->verify_compute = std::max(plan->verify_compute, call.response->compute_seconds);
    plan->rpc_excess += std::max(0.0, call.wall_seconds - call.response->compute_seconds);
  }
  return calls;
}

bool RouterCore::VerifyOverlapsWork(const StepPlan& plan) const {
  if (plan.batch.empty()) return false;
  const int replica = plan.batch[0]->replica;
  for (const Active* r : plan.batch) {
    if (r->replica != replica) return false;
  }
  return replicas_.at(replica).client->OverlapsWorkWithVerify();
}

StepOutcome RouterCore::ApplyResults(const StepPlan& plan, std::vector<ReplicaCall>& calls,
                                     StepStats* stats) {
  StepOutcome outcome;
  for (ReplicaCall& call : calls) {
    if (!call.response.ok()) {
      // The replica failed, not the requests: they move to another replica, invisibly to
      // their clients (router_failover.cc).
      std::vector<Active*> members;
      for (size_t i : call.members) members.push_back(plan.batch[i]);
      ReplicaFailed(call.replica, call.response.status(), members);
      continue;
    }
    if (call.response->total_blocks > 0) {
      replicas_.at(call.replica).total_blocks = call.response->total_blocks;
      MutexLock lock(&mu_);
      total_blocks_ = replicas_.MaxTotalBlocks();
    }
    std::map<RequestId, const spec::VerifyResult*> results;
    for (const spec::VerifyResult& v : call.response->results) results[v.id] = &v;
    for (size_t i : call.members) {
      Active* r = plan.batch[i];
      const spec::DraftProposal& d = plan.drafts[i];
      StreamEvent e;
      auto it = results.find(r->id);
      const spec::VerifyResult* v = it == results.end() ? nullptr : it->second;
      if (v != nullptr && absl::IsOutOfRange(v->status)) {
        // The context is full (the router keeps k within it, so only a verifier with a
        // smaller context than it reported gets here): the request ends as at max_tokens.
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
      o.tree = drafted > 0 && !IsChain(d);
      o.main_path_proposed = drafted;
      o.main_path_accepted = v->accept_length;
      if (o.tree) {
        const std::vector<int32_t> path =
            AcceptedPath(d, absl::MakeConstSpan(v->tokens.data(), static_cast<size_t>(v->accept_length)));
        tree_acceptance_.Observe(r->pool, plan.k[i], plan.nodes[i], v->accept_length,
                                 HasChildren(d, path.empty() ? -1 : path.back()));
        const ChainView main = MainPathOutcome(d, path);
        o.main_path_proposed = main.proposed;
        o.main_path_accepted = main.accepted;
        ++stats->tree_requests;
      }
      if (drafted > 0) {
        calibration_.Observe(r->pool, plan.k[i], plan.nodes[i], plan.expected[i], v->accept_length + 1.0);
      }
      const int32_t before = r->usage.completion_tokens;
      AppendTokens(*r, v->tokens, &e);
      if (drafted > 0) r->drafted_through = static_cast<int32_t>(r->history.size());
      stats->emitted_tokens += r->usage.completion_tokens - before;
      EmitStepTokens(*r, e);
      outcome.requests.push_back(std::move(o));
    }
  }
  return outcome;
}

void RouterCore::ObserveStep(const StepPlan& plan, const std::vector<ReplicaCall>& calls,
                             StepOutcome outcome, StepStats* stats) {
  ++steps_;
  draft_seconds_total_ += plan.draft_compute + stats->draft_ahead_seconds;
  if (options_.pipeline && plan.draft_compute + stats->draft_ahead_seconds > 0) {
    // What of this step's drafting the step waited for: the serial Propose calls, and what of
    // the drafts made ahead outlasted the verifier.
    const double exposed = plan.draft_compute + (stats->draft_ahead_seconds - stats->hidden_draft_seconds);
    latency_.ObserveDraftExposure(exposed / (plan.draft_compute + stats->draft_ahead_seconds));
  }
  hidden_draft_seconds_total_ += stats->hidden_draft_seconds;
  bool any_verified = false;
  for (const ReplicaCall& call : calls) {
    if (!call.response.ok()) continue;
    any_verified = true;
    if (options_.pipeline) {
      latency_.ObserveVerify(plan.drafted_ahead, call.context_tokens, call.fed_tokens, call.response->compute_seconds);
    }
    latency_.ObserveTarget(call.context_tokens, call.fed_tokens, call.response->compute_seconds);
    target_fit_.SetPrior(latency_.ScaledFileTarget());
    // The refit learns the line; the profiled batch shape stays on top of it.
    target_fit_.Observe(call.context_tokens, call.fed_tokens,
                        call.response->compute_seconds / latency_.TargetShape(call.fed_tokens));
    if (target_fit_.current().has_value()) latency_.SetRefitTarget(target_fit_.current()->coefficients);
  }
  stats->verify_seconds = plan.verify_compute;
  previous_step_end_ = clock_->NowSeconds();
  stats->wall_seconds = previous_step_end_ - plan.started_at;
  if (!any_verified) return;  // nothing was learnt: every replica of the step failed
  std::vector<AcceptanceTracker::Observation> observations;
  for (const RequestOutcome& o : outcome.requests) {
    // A tree's node count is not a chain's length (it would bias the per-token estimates);
    // its main path is a chain (trees also feed their own per-depth estimates, ApplyResults).
    if (o.main_path_proposed > 0) {
      observations.push_back({o.id, o.pool, {o.main_path_proposed, o.main_path_accepted}});
    }
  }
  if (plan.rpcs > 0) latency_.ObserveRpcOverhead(plan.rpc_excess / plan.rpcs);
  tracker_.ObserveStep(observations);
  outcome.draft_seconds = plan.draft_compute;
  outcome.verify_seconds = plan.verify_compute;
  for (int32_t x : plan.k) outcome.max_draft_depth = std::max(outcome.max_draft_depth, x);
  for (size_t i = 0; i < plan.batch.size(); ++i) {
    if (plan.batch[i]->speculative) ++k_histogram_[plan.k[i]];
  }
  outcome.wall_seconds = stats->wall_seconds;
  const double step_seconds = stats->wall_seconds + stats->between_steps_seconds;
  stats->overhead_seconds = StepOverheadSeconds(step_seconds, plan.draft_compute_slowest, stats->verify_seconds,
                                                stats->draft_ahead_slowest_seconds);
  stats->router_seconds = std::max(0.0, step_seconds - plan.call_wall);
  policy_->Observe(outcome);
  if (options_.step_observer) {
    stats->rpc_overhead_seconds = plan.rpc_excess;
    if (options_.pipeline) stats->verify_slowdown = latency_.verify_slowdown_estimate().Extra();
    stats->requests = std::move(outcome.requests);
  }
  step_observed_ = true;  // reported at the end of the run, or beside the next verify call
}

}  // namespace splitspec::router
