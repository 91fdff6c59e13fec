// RouterCore's verifier replicas: probing down replicas, (re)prefilling requests on the
// replica chosen for them, and moving requests off a replica whose call failed.
//
// Why re-prefilling is exact: a request's committed history (prompt + every streamed token,
// the last one pending) lives in the router. Prefilling the WHOLE history on another replica
// rebuilds a session whose KV holds all of it and whose returned next token is the token after
// the pending one, i.e. exactly what the next decode step would have produced (for greedy
// requests the same token; sampled requests restart their RNG stream from their seed, so they
// stay correctly distributed but are not reproducible across a failover). The drafter's
// session is unaffected: its `known` count refers to the same history.
#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "router/parallel_calls.h"
#include "router/router_core.h"
#include "router/router_core_internal.h"

namespace splitspec::router {

absl::Duration RouterCore::CallTimeout(double predicted_seconds, double scale) const {
  const double seconds =
      std::clamp(options_.deadline_factor * std::max(predicted_seconds, 0.0) * scale,
                 options_.deadline_floor_seconds * scale, options_.deadline_ceiling_seconds);
  return absl::Seconds(seconds);
}

void RouterCore::ProbeReplicas() {
  const double now = clock_->NowSeconds();
  // Probes run on their own threads: a hung replica's probe waits for its deadline there,
  // never in the step loop that serves everybody else.
  for (auto it = probes_.begin(); it != probes_.end();) {
    if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++it;
      continue;
    }
    const int replica = it->first;
    absl::StatusOr<spec::WorkerInfo> info = it->second.get();
    it = probes_.erase(it);
    if (replicas_.at(replica).retired) continue;  // removed while its probe ran
    if (!info.ok()) {
      replicas_.ProbeFailed(replica, now);
      continue;
    }
    replicas_.MarkUp(replica, info->total_blocks);
    MutexLock lock(&mu_);
    total_blocks_ = replicas_.MaxTotalBlocks();
  }
  for (int replica : replicas_.DueForProbe(now)) {
    if (probes_.count(replica)) continue;
    VerifierReplica& v = replicas_.at(replica);
    v.client->SetCallTimeout(CallTimeout(0, v.timeout_scale));
    // Sessions it may still hold for requests that moved away go before it serves again (the
    // list is cleared when the probe succeeds, kept when it fails).
    const std::vector<RequestId> stale = v.stale_sessions;
    probes_[replica] = std::async(std::launch::async, [client = v.client, stale]() -> absl::StatusOr<spec::WorkerInfo> {
      if (absl::Status health = client->Health(); !health.ok()) return health;
      absl::StatusOr<spec::WorkerInfo> info = client->Info();
      if (info.ok() && !stale.empty()) {
        if (absl::Status released = client->Release(stale); !released.ok()) return released;
      }
      return info;
    });
  }
}

void RouterCore::Displace(Active& r) {
  if (r.replica >= 0) {
    replicas_.Unreserve(r.replica, r.blocks);
    // Its session there must go before the request can be prefilled there again: now (at the
    // end of this step) if the replica still serves, else when it comes back.
    if (r.prefilled && replicas_.at(r.replica).up) {
      verifier_releases_[r.replica].push_back(r.id);
    } else if (r.prefilled) {
      replicas_.at(r.replica).stale_sessions.push_back(r.id);
    }
  }
  r.replica = -1;
  r.prefilled = false;
  if (r.displaced_since < 0) r.displaced_since = clock_->NowSeconds();
}

void RouterCore::UpdateVerifierReplicas(std::vector<VerifierClient*> added, std::vector<VerifierClient*> removed) {
  MutexLock lock(&mu_);
  replicas_to_add_.insert(replicas_to_add_.end(), added.begin(), added.end());
  replicas_to_remove_.insert(replicas_to_remove_.end(), removed.begin(), removed.end());
}

void RouterCore::ApplyReplicaChanges() {
  std::vector<VerifierClient*> added, removed;
  {
    MutexLock lock(&mu_);
    added.swap(replicas_to_add_);
    removed.swap(replicas_to_remove_);
  }
  if (added.empty() && removed.empty()) return;
  const double now = clock_->NowSeconds();
  for (VerifierClient* client : added) {
    if (replicas_.Find(client) < 0) replicas_.Add(client, now);
  }
  for (VerifierClient* client : removed) {
    const int replica = replicas_.Find(client);
    if (replica < 0) continue;
    // Moved while the replica is still marked up, so their sessions there are released.
    for (auto& r : running_) {
      if (!r->finished && r->replica == replica) Displace(*r);
    }
    replicas_.Retire(replica);
  }
  MutexLock lock(&mu_);
  total_blocks_ = replicas_.MaxTotalBlocks();
}

void RouterCore::ReplicaFailed(int replica, const absl::Status& status,
                               const std::vector<Active*>& requests) {
  // A replica out of KV (another router shares it: each router only accounts for its own
  // reservations) is not broken: only this call's requests step back and retry, within the
  // failover wait.
  if (!absl::IsResourceExhausted(status)) {
    replicas_.MarkDown(replica, clock_->NowSeconds(), absl::IsDeadlineExceeded(status));
    // Everything on it moves, not just this call's requests: the replica is gone for all.
    for (auto& r : running_) {
      if (!r->finished && r->replica == replica) Displace(*r);
    }
  }
  for (Active* r : requests) {
    if (!r->finished) Displace(*r);
  }
}

void RouterCore::PlaceDisplaced(std::vector<Active*>* to_prefill) {
  const double now = clock_->NowSeconds();
  for (auto& owned : running_) {
    Active& r = *owned;
    if (r.finished || r.replica >= 0) continue;
    StreamEvent e;
    if (max_context_ > 0 && static_cast<int64_t>(r.history.size()) >= max_context_) {
      // A full context cannot be re-prefilled (the pending token has no position left).
      Finish(r, FinishReason::kLength, absl::OkStatus(), &e);
      Emit(r, e);
      continue;
    }
    const int replica = replicas_.Choose(r.blocks);
    if (replica >= 0) {
      replicas_.Reserve(replica, r.blocks);
      r.replica = replica;
      to_prefill->push_back(&r);
      continue;
    }
    if (now - r.displaced_since >= options_.failover_wait_seconds) {
      Finish(r, FinishReason::kError,
             absl::UnavailableError(absl::StrCat("no verifier replica could take the request within ",
                                                 options_.failover_wait_seconds, " s")),
             &e);
      Emit(r, e);
    }
  }
}

void RouterCore::PrefillOnReplicas(const std::vector<Active*>& requests, StepStats* stats) {
  int32_t max_k, vocab;
  {
    MutexLock lock(&mu_);
    max_k = max_k_;
    vocab = vocab_size_;
  }
  for (Active* r : requests) ChooseSpeculation(*r, max_k);
  std::vector<AheadCall> drafts = PlanPrefillDrafts(requests, max_k);
  std::map<int, std::vector<Active*>> by_replica;
  for (Active* r : requests) by_replica[r->replica].push_back(r);
  struct Call {
    int replica = -1;
    std::vector<Active*> members;
    std::vector<spec::PrefillItem> items;
    absl::StatusOr<std::vector<spec::PrefillResult>> results = absl::UnknownError("not called");
  };
  std::vector<Call> calls;
  for (auto& [replica, members] : by_replica) {
    Call call;
    call.replica = replica;
    call.members = std::move(members);
    double tokens = 0;
    for (Active* r : call.members) {
      call.items.push_back(spec::PrefillItem{r->id, r->history, r->request.sampling});
      tokens += static_cast<double>(r->history.size());
    }
    VerifierReplica& v = replicas_.at(replica);
    v.client->SetCallTimeout(
        CallTimeout(latency_.TargetSeconds(0, tokens) + latency_.RpcSeconds(), v.timeout_scale));
    calls.push_back(std::move(call));
  }
  const double t0 = clock_->NowSeconds();
  // The pools' prefills run beside the verifier's (router_prefill_drafts.cc).
  RunInParallel(calls.size() + (drafts.empty() ? 0 : 1), [this, &calls, &drafts](size_t i) {
    if (i == calls.size()) {
      DraftAhead(&drafts);
      return;
    }
    calls[i].results = replicas_.at(calls[i].replica).client->Prefill(calls[i].items);
  });
  stats->prefill_seconds = clock_->NowSeconds() - t0;
  stats->prefills = static_cast<int32_t>(requests.size());

  for (Call& call : calls) {
    if (!call.results.ok()) {
      // Not the requests' fault: they wait for another replica (PlaceDisplaced, next step).
      // A session may have been created before the failure: Displace records it as stale.
      for (Active* r : call.members) r->prefilled = true;
      ReplicaFailed(call.replica, call.results.status(), call.members);
      continue;
    }
    std::map<RequestId, const spec::PrefillResult*> by_id;
    for (const spec::PrefillResult& p : *call.results) by_id[p.id] = &p;
    for (Active* r : call.members) {
      StreamEvent e;
      auto it = by_id.find(r->id);
      const spec::PrefillResult* p = it == by_id.end() ? nullptr : it->second;
      // No session exists after a failed item: an ALREADY_EXISTS item's session is someone
      // else's, so it must not be released.
      r->prefilled = p != nullptr && p->status.ok();
      if (p != nullptr && !p->status.ok()) {
        Finish(*r, FinishReason::kError, p->status, &e);
      } else if (p == nullptr || p->next_token < 0 || (vocab > 0 && p->next_token >= vocab)) {
        r->prefilled = p != nullptr;
        Finish(*r, FinishReason::kError,
               absl::InternalError("verifier prefill returned no valid token for the request"), &e);
      } else {
        r->displaced_since = -1;
        ++r->usage.steps;
        r->started = true;
        const int32_t token = p->next_token;
        AppendTokens(*r, absl::MakeConstSpan(&token, 1), &e);
      }
      Emit(*r, e);
    }
  }
  if (!drafts.empty()) ApplyPrefillDrafts(drafts, stats->prefill_seconds, stats);
}

}  // namespace splitspec::router
