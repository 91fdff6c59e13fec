// One drafter pool served by several replicas (`--drafter NAME=A,B`, or a dns:/// name that
// resolves to several addresses), as one DrafterClient for RouterCore.
//
// The pool's requests are spread over its replicas. A request drafts on one replica, where its
// session lives, chosen when it first drafts as the usable replica with the fewest requests:
// a replica that joins takes new requests at once. A step's items go to their replicas in
// parallel, one Propose per replica, so the pool drafts at the speed of its busiest replica.
//
// A request whose replica fails or leaves moves to another. The pool answers its next item
// FAILED_PRECONDITION itself, the answer of a drafter that lost a session, so the router
// resends the whole history next step (one step without a draft) and the new replica never
// sees a known_length it did not build. A failed call fails only its own items; the replica
// then gets no requests for `retry_seconds`. With every replica down, Propose fails fast
// (k = 0, as with no pool). A replica that leaves (UpdateReplicas) is told to release the
// sessions it holds, since a pod being scaled down may still be draining.
//
// Thread-safety: RouterCore calls Propose, Release, Info and SetCallTimeout from one thread at
// a time; UpdateReplicas may be called from any thread and takes effect at the next of those.
#ifndef SPLITSPEC_ROUTER_REPLICATED_DRAFTER_H_
#define SPLITSPEC_ROUTER_REPLICATED_DRAFTER_H_

#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "router/clock.h"
#include "router/worker_clients.h"

namespace splitspec::router {

class ReplicatedDrafter : public DrafterClient {
 public:
  // Neither the replicas nor the clock are owned. `replicas` may be empty (a name not resolved
  // yet): Propose fails fast until one joins.
  ReplicatedDrafter(std::vector<DrafterClient*> replicas, const Clock* clock, double retry_seconds);

  absl::StatusOr<spec::ProposeResponse> Propose(
      const std::vector<spec::ProposeItem>& items) override;
  // The same, each replica's call through its ProposeBesideVerify.
  absl::StatusOr<spec::ProposeResponse> ProposeBesideVerify(const std::vector<spec::ProposeItem>& items) override;
  // Sent to each replica that drafted for these requests and is not known to be down (a dead
  // replica lost them; a live one's lease reclaims what a failed Release leaves).
  absl::Status Release(const std::vector<spec::RequestId>& ids) override;
  // The first replica that answers.
  absl::StatusOr<spec::WorkerInfo> Info() override;
  void SetCallTimeout(absl::Duration timeout) override;

  // Replicas that join or leave the pool (discovery). A removed client must stay alive until
  // the pool is destroyed; an added one that is already serving is ignored.
  void UpdateReplicas(std::vector<DrafterClient*> added, std::vector<DrafterClient*> removed);

  // The client a request drafts on (null: none yet, or it is moving). For tests.
  const DrafterClient* ReplicaOf(spec::RequestId id) const;
  // Replicas in the pool, down ones included.
  int size() const;

 private:
  struct Replica {
    DrafterClient* client = nullptr;
    double down_until = 0;  // clock time before which it gets no requests
    bool retired = false;   // left the pool; the entry stays so indices keep their meaning
  };
  struct Placement {
    int replica = -1;          // where the request drafts; -1 = choose one
    int in_sync = -1;          // the replica whose session matches the router's known_length
    std::vector<int> holders;  // replicas that may hold a session for it
  };
  struct ReplicaCall {
    int replica = -1;
    std::vector<spec::ProposeItem> items;
    std::optional<absl::StatusOr<spec::ProposeResponse>> response;
  };

  void ApplyUpdates();
  void Add(DrafterClient* client);
  void Retire(int replica);
  bool Usable(int replica, double now) const;
  // Sends each item to its request's replica (choosing one where needed); items that must
  // first be resent in full are answered in `local`.
  std::vector<ReplicaCall> Place(const std::vector<spec::ProposeItem>& items, double now,
                                 std::vector<spec::ProposeResult>* local);
  // Propose or ProposeBesideVerify: each replica's items through the same method.
  absl::StatusOr<spec::ProposeResponse> ProposeOnReplicas(const std::vector<spec::ProposeItem>& items,
                                                          bool beside_verify);
  // A failed replica: down for retry_seconds, its requests move.
  void MarkDown(int replica, double now);
  void Unplace(int replica);

  std::vector<Replica> replicas_;
  std::map<spec::RequestId, Placement> placements_;  // until the request is released
  const Clock* clock_;
  double retry_seconds_;
  std::optional<absl::Duration> timeout_;  // the last SetCallTimeout, for replicas that join

  mutable std::mutex updates_mu_;
  std::vector<DrafterClient*> to_add_;     // guarded by updates_mu_
  std::vector<DrafterClient*> to_remove_;  // guarded by updates_mu_
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_REPLICATED_DRAFTER_H_
