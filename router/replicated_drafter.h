// One drafter pool served by several replicas (`--drafter NAME=ADDR1,ADDR2`), as one
// DrafterClient for RouterCore. One replica is active at a time and drafts for every request
// of the pool; when a call to it fails, that call's error reaches the core as today (k = 0 for
// the step, full history resent next time) and the next replica that is not known to be down
// becomes active, so speculation continues one step later. A failed replica is tried again
// after `retry_seconds`. With every replica down, Propose fails fast (k = 0, as with no pool).
// Replicas are standbys, not a load-balanced set: the pool drafts at one replica's speed.
//
// Thread-compatible: RouterCore calls it from one thread at a time.
#ifndef SPLITSPEC_ROUTER_REPLICATED_DRAFTER_H_
#define SPLITSPEC_ROUTER_REPLICATED_DRAFTER_H_

#include <set>
#include <vector>

#include "router/clock.h"
#include "router/worker_clients.h"

namespace splitspec::router {

class ReplicatedDrafter : public DrafterClient {
 public:
  // Neither the replicas nor the clock are owned; `replicas` must not be empty.
  ReplicatedDrafter(std::vector<DrafterClient*> replicas, const Clock* clock, double retry_seconds);

  absl::StatusOr<spec::ProposeResponse> Propose(const std::vector<spec::ProposeItem>& items) override;
  // Sent to every replica that drafted for this pool and is not known to be down (sessions
  // may be on any of them); unknown ids are fine there.
  absl::Status Release(const std::vector<spec::RequestId>& ids) override;
  // The first replica that answers.
  absl::StatusOr<spec::WorkerInfo> Info() override;
  void SetCallTimeout(absl::Duration timeout) override;

  int active() const { return active_; }

 private:
  // The active replica, or the next one that is not down; -1 when all are down.
  int PickActive();

  std::vector<DrafterClient*> replicas_;
  const Clock* clock_;
  double retry_seconds_;
  std::vector<double> down_until_;  // clock time before which a failed replica is skipped
  std::set<int> used_;
  int active_ = 0;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_REPLICATED_DRAFTER_H_
