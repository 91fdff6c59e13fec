// A drafter pool over several replicas (see replicated_drafter.h).
#include "router/replicated_drafter.h"

#include <utility>

namespace splitspec::router {

ReplicatedDrafter::ReplicatedDrafter(std::vector<DrafterClient*> replicas, const Clock* clock,
                                     double retry_seconds)
    : replicas_(std::move(replicas)),
      clock_(clock),
      retry_seconds_(retry_seconds),
      down_until_(replicas_.size(), 0.0) {}

int ReplicatedDrafter::PickActive() {
  const double now = clock_->NowSeconds();
  const int n = static_cast<int>(replicas_.size());
  for (int step = 0; step < n; ++step) {
    const int candidate = (active_ + step) % n;
    if (down_until_[candidate] <= now) return active_ = candidate;
  }
  return -1;
}

absl::StatusOr<spec::ProposeResponse> ReplicatedDrafter::Propose(const std::vector<spec::ProposeItem>& items) {
  const int replica = PickActive();
  if (replica < 0) return absl::UnavailableError("every replica of this drafter pool is down");
  used_.insert(replica);
  absl::StatusOr<spec::ProposeResponse> response = replicas_[replica]->Propose(items);
  if (!response.ok()) {
    // This step drafts nothing; the next one goes to another replica with full histories.
    down_until_[replica] = clock_->NowSeconds() + retry_seconds_;
    active_ = (replica + 1) % static_cast<int>(replicas_.size());
  }
  return response;
}

absl::Status ReplicatedDrafter::Release(const std::vector<spec::RequestId>& ids) {
  const double now = clock_->NowSeconds();
  absl::Status first_error;
  for (int replica : used_) {
    if (down_until_[replica] > now) continue;  // a dead replica lost them; a live one's lease reclaims them
    absl::Status s = replicas_[replica]->Release(ids);
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  return first_error;
}

absl::StatusOr<spec::WorkerInfo> ReplicatedDrafter::Info() {
  absl::Status last = absl::UnavailableError("no drafter replica");
  for (DrafterClient* replica : replicas_) {
    absl::StatusOr<spec::WorkerInfo> info = replica->Info();
    if (info.ok()) return info;
    last = info.status();
  }
  return last;
}

void ReplicatedDrafter::SetCallTimeout(absl::Duration timeout) {
  for (DrafterClient* replica : replicas_) replica->SetCallTimeout(timeout);
}

}  // namespace splitspec::router
