// The router's table of verifier replicas (`--verifier A,B,...`): which are up, how much KV
// each has and how much the router reserved on it, when a down one is probed next, and which
// sessions a replica may still hold for requests that moved away from it. Plain bookkeeping,
// no RPCs and no clock of its own: RouterCore drives it from its loop thread (router_core.h),
// tests drive it with made-up times.
//
// Placement: a new request goes to the up replica with the most unreserved KV blocks that can
// hold its reservation (ties: the lowest index), so load spreads by free KV.
// Failure: a replica whose call fails or times out is marked down and probed again after
// probe_interval; a replica that timed out and then proves alive was slow, not dead, so its
// call deadlines are doubled (up to 64x) to stop it flapping.
//
// Thread-compatible (loop thread only).
#ifndef SPLITSPEC_ROUTER_VERIFIER_REPLICAS_H_
#define SPLITSPEC_ROUTER_VERIFIER_REPLICAS_H_

#include <cstdint>
#include <vector>

#include "router/worker_clients.h"

namespace splitspec::router {

struct VerifierReplica {
  VerifierClient* client = nullptr;  // not owned
  bool up = false;
  int32_t total_blocks = 0;
  int32_t reserved_blocks = 0;
  double next_probe_at = 0;           // when down: the earliest time to probe it again
  bool timed_out = false;             // its last failure was a deadline
  double timeout_scale = 1.0;         // multiplies its call deadlines
  // Requests that left this replica while it was down or unreachable; released on it before
  // it serves again, so a session that survived (a slow, not dead, replica) is not leaked and
  // cannot collide with the request's later re-prefill here.
  std::vector<spec::RequestId> stale_sessions;
  // Removed (discovery no longer lists it): never chosen or probed again. The entry stays so
  // replica indices held by requests keep their meaning.
  bool retired = false;
};

class VerifierReplicas {
 public:
  VerifierReplicas(std::vector<VerifierClient*> clients, double probe_interval_seconds);

  // A new replica (discovery): down until its first probe, due at `now`. Returns its index.
  int Add(VerifierClient* client, double now);
  // Index of the live (not retired) entry for `client`, or -1.
  int Find(const VerifierClient* client) const;
  // Takes a replica out for good: down, no KV, never probed (its requests must have moved).
  void Retire(int i);

  int size() const { return static_cast<int>(replicas_.size()); }
  VerifierReplica& at(int i) { return replicas_[i]; }
  const VerifierReplica& at(int i) const { return replicas_[i]; }

  // The up replica with the most unreserved blocks that can take `blocks` more; -1 if none.
  int Choose(int32_t blocks) const;
  void Reserve(int i, int32_t blocks) { replicas_[i].reserved_blocks += blocks; }
  void Unreserve(int i, int32_t blocks) { replicas_[i].reserved_blocks -= blocks; }

  void MarkDown(int i, double now, bool deadline_exceeded);
  // Down replicas whose probe time has come.
  std::vector<int> DueForProbe(double now) const;
  // A probe failed: try again one interval later.
  void ProbeFailed(int i, double now);
  // A probe succeeded: the replica serves again with `total_blocks` of KV.
  void MarkUp(int i, int32_t total_blocks);

  bool AnyUp() const;
  // Largest KV among all replicas (a request needing more can never run), and sums over the
  // up replicas (for snapshots).
  int32_t MaxTotalBlocks() const;
  int32_t UpTotalBlocks() const;
  int32_t ReservedBlocks() const;
  // Seconds until the next probe of any down replica (0 when one is due, -1 when none is down).
  double SecondsToNextProbe(double now) const;

 private:
  double probe_interval_;
  std::vector<VerifierReplica> replicas_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_VERIFIER_REPLICAS_H_
