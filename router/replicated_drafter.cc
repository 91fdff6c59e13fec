// A drafter pool spread over several replicas (see replicated_drafter.h).
#include "router/replicated_drafter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "router/parallel_calls.h"

namespace splitspec::router {

ReplicatedDrafter::ReplicatedDrafter(std::vector<DrafterClient*> replicas, const Clock* clock,
                                     double retry_seconds)
    : clock_(clock), retry_seconds_(retry_seconds) {
  for (DrafterClient* client : replicas) Add(client);
}

void ReplicatedDrafter::UpdateReplicas(std::vector<DrafterClient*> added,
                                       std::vector<DrafterClient*> removed) {
  std::lock_guard<std::mutex> lock(updates_mu_);
  to_add_.insert(to_add_.end(), added.begin(), added.end());
  to_remove_.insert(to_remove_.end(), removed.begin(), removed.end());
}

void ReplicatedDrafter::ApplyUpdates() {
  std::vector<DrafterClient*> added, removed;
  {
    std::lock_guard<std::mutex> lock(updates_mu_);
    added.swap(to_add_);
    removed.swap(to_remove_);
  }
  for (DrafterClient* client : added) Add(client);
  for (DrafterClient* client : removed) {
    for (int r = 0; r < static_cast<int>(replicas_.size()); ++r) {
      if (replicas_[r].client == client && !replicas_[r].retired) Retire(r);
    }
  }
}

void ReplicatedDrafter::Add(DrafterClient* client) {
  for (const Replica& replica : replicas_) {
    if (replica.client == client && !replica.retired) return;
  }
  if (timeout_.has_value()) client->SetCallTimeout(*timeout_);
  Replica replica;
  replica.client = client;
  replicas_.push_back(replica);
}

void ReplicatedDrafter::Retire(int replica) {
  const bool reachable = Usable(replica, clock_->NowSeconds());
  std::vector<spec::RequestId> held;
  for (auto& [id, placement] : placements_) {
    auto it = std::find(placement.holders.begin(), placement.holders.end(), replica);
    if (it == placement.holders.end()) continue;
    placement.holders.erase(it);
    held.push_back(id);
  }
  Unplace(replica);
  replicas_[replica].retired = true;
  // Best effort: a replica that is gone lost them anyway.
  if (reachable && !held.empty()) (void)replicas_[replica].client->Release(held);
}

bool ReplicatedDrafter::Usable(int replica, double now) const {
  return !replicas_[replica].retired && replicas_[replica].down_until <= now;
}

void ReplicatedDrafter::Unplace(int replica) {
  for (auto& [id, placement] : placements_) {
    if (placement.replica == replica) placement.replica = -1;
    if (placement.in_sync == replica) placement.in_sync = -1;
  }
}

void ReplicatedDrafter::MarkDown(int replica, double now) {
  replicas_[replica].down_until = now + retry_seconds_;
  Unplace(replica);
}

std::vector<ReplicatedDrafter::ReplicaCall> ReplicatedDrafter::Place(
    const std::vector<spec::ProposeItem>& items, double now,
    std::vector<spec::ProposeResult>* local) {
  // Requests per usable replica, for choosing where new and moving requests go.
  std::vector<int> load(replicas_.size(), 0);
  for (const auto& [id, placement] : placements_) {
    if (placement.replica >= 0) ++load[placement.replica];
  }
  auto least_loaded = [&]() {
    int best = -1;
    for (int r = 0; r < static_cast<int>(replicas_.size()); ++r) {
      if (Usable(r, now) && (best < 0 || load[r] < load[best])) best = r;
    }
    return best;
  };
  std::map<int, ReplicaCall> calls;
  for (const spec::ProposeItem& item : items) {
    Placement& placement = placements_[item.id];
    if (placement.replica < 0 || !Usable(placement.replica, now)) {
      if (placement.replica >= 0) --load[placement.replica];
      placement.replica = least_loaded();
      ++load[placement.replica];  // Propose checked that one is usable
    }
    if (item.known_length > 0 && placement.in_sync != placement.replica) {
      spec::ProposeResult moved;
      moved.id = item.id;
      moved.status = absl::FailedPreconditionError(absl::StrCat(
          "request ", item.id, " moved to another drafter replica; resend with known_length 0"));
      local->push_back(std::move(moved));
      continue;
    }
    if (std::find(placement.holders.begin(), placement.holders.end(), placement.replica) ==
        placement.holders.end()) {
      placement.holders.push_back(placement.replica);
    }
    ReplicaCall& call = calls[placement.replica];
    call.replica = placement.replica;
    call.items.push_back(item);
  }
  std::vector<ReplicaCall> out;
  for (auto& [replica, call] : calls) out.push_back(std::move(call));
  return out;
}

absl::StatusOr<spec::ProposeResponse> ReplicatedDrafter::Propose(
    const std::vector<spec::ProposeItem>& items) {
  return ProposeOnReplicas(items, /*beside_verify=*/false);
}

absl::StatusOr<spec::ProposeResponse> ReplicatedDrafter::ProposeBesideVerify(
    const std::vector<spec::ProposeItem>& items) {
  return ProposeOnReplicas(items, /*beside_verify=*/true);
}

absl::StatusOr<spec::ProposeResponse> ReplicatedDrafter::ProposeOnReplicas(const std::vector<spec::ProposeItem>& items,
                                                                          bool beside_verify) {
  ApplyUpdates();
  const double now = clock_->NowSeconds();
  bool any_usable = false;
  for (int r = 0; r < static_cast<int>(replicas_.size()); ++r)
    any_usable = any_usable || Usable(r, now);
  if (!any_usable) return absl::UnavailableError("every replica of this drafter pool is down");

  spec::ProposeResponse out;
  std::vector<ReplicaCall> calls = Place(items, now, &out.results);
  // One call per replica, at once; each client is used by one thread.
  RunInParallel(calls.size(), [this, &calls, beside_verify](size_t c) {
    DrafterClient* client = replicas_[calls[c].replica].client;
    calls[c].response = beside_verify ? client->ProposeBesideVerify(calls[c].items) : client->Propose(calls[c].items);
  });

  absl::Status first_error;
  size_t failed = 0;
  for (ReplicaCall& call : calls) {
    absl::StatusOr<spec::ProposeResponse>& response = *call.response;
    if (!response.ok()) {
      // This replica's items draft nothing this step; its requests move.
      MarkDown(call.replica, now);
      for (const spec::ProposeItem& item : call.items) {
        spec::ProposeResult failed_item;
        failed_item.id = item.id;
        failed_item.status = response.status();
        out.results.push_back(std::move(failed_item));
      }
      if (first_error.ok()) first_error = response.status();
      ++failed;
      continue;
    }
    out.compute_seconds = std::max(out.compute_seconds, response->compute_seconds);
    for (spec::ProposeResult& result : response->results) {
      auto placement = placements_.find(result.id);
      if (result.status.ok() && placement != placements_.end() &&
          placement->second.replica == call.replica) {
        placement->second.in_sync = call.replica;
      }
      out.results.push_back(std::move(result));
    }
  }
  // Nothing drafted anywhere: a call-level error, as a single drafter's would be.
  if (!calls.empty() && failed == calls.size()) return first_error;
  return out;
}

absl::Status ReplicatedDrafter::Release(const std::vector<spec::RequestId>& ids) {
  ApplyUpdates();
  const double now = clock_->NowSeconds();
  std::map<int, std::vector<spec::RequestId>> by_replica;
  for (spec::RequestId id : ids) {
    auto it = placements_.find(id);
    if (it == placements_.end()) continue;  // never drafted here: no session anywhere
    for (int replica : it->second.holders) {
      if (Usable(replica, now)) by_replica[replica].push_back(id);
    }
    placements_.erase(it);
  }
  absl::Status first_error;
  for (const auto& [replica, held] : by_replica) {
    absl::Status s = replicas_[replica].client->Release(held);
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  return first_error;
}

absl::StatusOr<spec::WorkerInfo> ReplicatedDrafter::Info() {
  ApplyUpdates();
  absl::Status last = absl::UnavailableError("no drafter replica");
  for (const Replica& replica : replicas_) {
    if (replica.retired) continue;
    absl::StatusOr<spec::WorkerInfo> info = replica.client->Info();
    if (info.ok()) return info;
    last = info.status();
  }
  return last;
}

void ReplicatedDrafter::SetCallTimeout(absl::Duration timeout) {
  ApplyUpdates();
  timeout_ = timeout;
  for (const Replica& replica : replicas_) {
    if (!replica.retired) replica.client->SetCallTimeout(timeout);
  }
}

const DrafterClient* ReplicatedDrafter::ReplicaOf(spec::RequestId id) const {
  auto it = placements_.find(id);
  if (it == placements_.end() || it->second.replica < 0) return nullptr;
  return replicas_[it->second.replica].client;
}

int ReplicatedDrafter::size() const {
  int n = 0;
  for (const Replica& replica : replicas_) n += replica.retired ? 0 : 1;
  return n;
}

}  // namespace splitspec::router
