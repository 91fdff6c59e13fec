// RouterCore::DecodeStep: policy -> Propose per pool -> one batched Verify -> bookkeeping.
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
// (verified as a plain decode) rather than allowed to fail the whole Verify batch.
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

}  // namespace

bool RouterCore::DecodeStep(StepStats* stats) {
  std::vector<Active*> batch;
  for (auto& r : running_) {
    if (r->prefilled && !r->finished) batch.push_back(r.get());
  }
  if (batch.empty()) return false;
  const double t0 = clock_->NowSeconds();
  int32_t max_k, vocab;
  {
    MutexLock lock(&mu_);
    max_k = max_k_;
    vocab = vocab_size_;
  }
  size_t n = batch.size();

  // 1. Drafter pool per request (only matters with several pools).
  if (pool_names_.size() > 1) {
    for (Active* r : batch) {
      if (!r->speculative || !r->request.drafter.empty()) continue;
      const std::string next =
          ReconsiderPool(pool_names_, r->id, r->pool, static_cast<int32_t>(r->history.size()),
                         max_k, tracker_, latency_, options_.pool_selection);
      if (next == r->pool) continue;
      if (r->known.count(r->pool)) {
        drafter_releases_[r->pool].push_back(r->id);
        r->known.erase(r->pool);
      }
      r->pool = next;
    }
  }

  // 2. The policy's k per request, clamped to what can be used.
  PolicyInput input;
  input.max_k = max_k;
  input.latency = &latency_;
  input.acceptance = &tracker_;
  input.requests.reserve(n);
  std::vector<int32_t> useful(n, 0);
  for (size_t i = 0; i < n; ++i) {
    Active* r = batch[i];
    PolicyRequest p;
    p.id = r->id;
    p.context_tokens = static_cast<int32_t>(r->history.size());
    p.prompt_tokens = r->prompt_len;
    p.speculative = r->speculative;
    p.pool = r->pool;
    p.acceptance = tracker_.Request(r->id, r->pool);
    // A step yields at most k + 1 tokens; drafting past max_tokens is wasted work.
    const int32_t remaining = r->request.max_tokens - r->usage.completion_tokens;
    useful[i] = r->speculative ? std::clamp(remaining - 1, 0, max_k) : 0;
    p.max_useful_k = useful[i];
    p.history = r->history;
    p.must_run = r->sat_out_steps >= std::max(options_.max_sit_out_steps, 0);
    input.requests.push_back(std::move(p));
  }
  std::vector<int32_t> decided = policy_->Decide(input);
  decided.resize(n, 0);

  // 3. Who runs: a request sits out only when the policy says so and it may (router_core.h);
  // at least one request runs. From here on `batch` and `k` hold the forwarded requests.
  std::vector<size_t> run;
  for (size_t i = 0; i < n; ++i) {
    if (decided[i] >= 0 || input.requests[i].must_run) run.push_back(i);
  }
  if (run.empty()) run.push_back(0);
  std::vector<Active*> forwarded;
  std::vector<int32_t> k;
  for (size_t j = 0, i = 0; i < n; ++i) {
    if (j < run.size() && run[j] == i) {
      ++j;
      batch[i]->sat_out_steps = 0;
      forwarded.push_back(batch[i]);
      k.push_back(std::clamp(decided[i], 0, useful[i]));
    } else {
      ++batch[i]->sat_out_steps;
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
    stats->estimated_goodput = GoodputModel(latency_, std::move(items), max_k).Goodput(k);
  }
  batch = std::move(forwarded);
  n = batch.size();
  stats->schedule_seconds = clock_->NowSeconds() - t0;

  // 4. Drafts, one Propose per pool.
  std::vector<spec::DraftProposal> drafts(n);
  double draft_compute = 0, rpc_excess = 0;
  int32_t rpcs = 0;
  for (const std::string& pool : pool_names_) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < n; ++i) {
      if (k[i] > 0 && batch[i]->pool == pool) idx.push_back(i);
    }
    if (idx.empty()) continue;
    std::vector<spec::ProposeItem> items;
    std::vector<int32_t> ctx, kk;
    double catch_up_tokens = 0;
    for (size_t i : idx) {
      Active* r = batch[i];
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
      item.shape.depth = k[i];
      item.shape.branching = 1;
      item.sampling = r->request.sampling;
      items.push_back(std::move(item));
      ctx.push_back(static_cast<int32_t>(r->history.size()));
      kk.push_back(k[i]);
    }
    const double ts = clock_->NowSeconds();
    absl::StatusOr<spec::ProposeResponse> resp = drafters_.at(pool)->Propose(items);
    const double wall = clock_->NowSeconds() - ts;
    ++rpcs;
    if (!resp.ok()) {
      // No drafts this step; the drafter's state is unknown, so resend everything next time.
      for (size_t i : idx) {
        batch[i]->known[pool] = 0;
        k[i] = 0;
      }
      rpc_excess += wall;
      continue;
    }
    draft_compute += resp->compute_seconds;
    rpc_excess += std::max(0.0, wall - resp->compute_seconds);
    latency_.ObserveDraft(pool, ctx, kk, resp->compute_seconds, catch_up_tokens);
    std::map<RequestId, spec::DraftProposal*> by_id;
    for (spec::ProposeResult& res : resp->results) by_id[res.id] = &res.draft;
    for (size_t i : idx) {
      Active* r = batch[i];
      r->known[pool] = static_cast<int32_t>(r->history.size());
      auto it = by_id.find(r->id);
      if (it != by_id.end() && ValidChainDraft(*it->second, k[i], vocab)) {
        drafts[i] = std::move(*it->second);
      }
    }
  }
  stats->draft_seconds = draft_compute;

  // 5. One batched verification.
  std::vector<spec::VerifyItem> items(n);
  double n_ctx = 0, n_tok = 0;
  for (size_t i = 0; i < n; ++i) {
    items[i].id = batch[i]->id;
    items[i].draft = drafts[i];
    n_ctx += static_cast<double>(batch[i]->history.size());
    n_tok += 1.0 + drafts[i].tokens.size();
  }
  const double tv = clock_->NowSeconds();
  absl::StatusOr<spec::VerifyResponse> resp = verifier_->Verify(items);
  const double verify_wall = clock_->NowSeconds() - tv;
  ++rpcs;
  stats->batch_size = static_cast<int32_t>(n);
  stats->k = k;
  if (!resp.ok()) {
    // Requests with no verifier state we trust cannot continue; fail them loudly instead of
    // guessing (their histories are intact, so a future version can re-prefill instead).
    const absl::Status failure = absl::UnavailableError(
        absl::StrCat("verifier failed: ", resp.status().ToString()));
    for (Active* r : batch) {
      StreamEvent e;
      Finish(*r, FinishReason::kError, failure, &e);
      Emit(*r, e);
    }
    stats->wall_seconds = clock_->NowSeconds() - t0;
    ++steps_;
    return true;
  }
  stats->verify_seconds = resp->compute_seconds;
  rpc_excess += std::max(0.0, verify_wall - resp->compute_seconds);
  latency_.ObserveTarget(n_ctx, n_tok, resp->compute_seconds);
  if (resp->total_blocks > 0) {
    MutexLock lock(&mu_);
    total_blocks_ = resp->total_blocks;
  }

  std::map<RequestId, const spec::VerifyResult*> results;
  for (const spec::VerifyResult& v : resp->results) results[v.id] = &v;
  std::vector<AcceptanceTracker::Observation> observations;
  StepOutcome outcome;
  for (size_t i = 0; i < n; ++i) {
    Active* r = batch[i];
    const spec::DraftProposal& d = drafts[i];
    StreamEvent e;
    auto it = results.find(r->id);
    const spec::VerifyResult* v = it == results.end() ? nullptr : it->second;
    bool valid = v != nullptr && !v->tokens.empty() && v->accept_length >= 0 &&
                 v->accept_length <= static_cast<int32_t>(d.tokens.size()) &&
                 static_cast<int32_t>(v->tokens.size()) == v->accept_length + 1;
    for (int32_t j = 0; valid && j < v->accept_length; ++j) valid = v->tokens[j] == d.tokens[j];
    for (size_t j = 0; valid && j < v->tokens.size(); ++j) {
      valid = v->tokens[j] >= 0 && (vocab <= 0 || v->tokens[j] < vocab);
    }
    if (!valid) {
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
    if (drafted > 0) observations.push_back({r->id, r->pool, {drafted, v->accept_length}});
    const int32_t before = r->usage.completion_tokens;
    AppendTokens(*r, v->tokens, &e);
    stats->emitted_tokens += r->usage.completion_tokens - before;
    Emit(*r, e);
    outcome.requests.push_back(std::move(o));
  }

  if (rpcs > 0) latency_.ObserveRpcOverhead(rpc_excess / rpcs);
  tracker_.ObserveStep(observations);
  outcome.draft_seconds = draft_compute;
  outcome.verify_seconds = resp->compute_seconds;
  for (int32_t x : k) {
    outcome.max_draft_depth = std::max(outcome.max_draft_depth, x);
  }
  for (size_t i = 0; i < n; ++i) {
    if (batch[i]->speculative) ++k_histogram_[k[i]];
  }
  stats->wall_seconds = clock_->NowSeconds() - t0;
  outcome.wall_seconds = stats->wall_seconds;
  stats->overhead_seconds =
      stats->wall_seconds - std::max(stats->draft_seconds, stats->verify_seconds);
  policy_->Observe(outcome);
  ++steps_;
  if (options_.step_observer) {
    stats->rpc_overhead_seconds = rpc_excess;
    stats->requests = std::move(outcome.requests);
    options_.step_observer(*stats);
  }
  return true;
}

}  // namespace splitspec::router
