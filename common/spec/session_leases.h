// Leases on worker sessions. A worker keeps per-request state (KV, histories) on behalf of a
// router; if that router dies, nobody will ever Release it. Every use of a session renews its
// lease, and a session idle for longer than the lease is reclaimed, so orphans cost memory
// for at most one lease period. Routers use a session at least once every few decode steps
// (router_core.h: no request sits out more than max_sit_out_steps), so a lease of seconds is
// plenty for a live router.
//
// Plain bookkeeping with caller-supplied times (seconds on a monotonic clock): no threads, no
// clock of its own, so it is unit-tested with made-up times. Not thread-safe (the cores that
// use it are serialised by their services).
#ifndef SPLITSPEC_COMMON_SPEC_SESSION_LEASES_H_
#define SPLITSPEC_COMMON_SPEC_SESSION_LEASES_H_

#include <chrono>
#include <cstddef>
#include <unordered_map>
#include <vector>

#include "common/spec/worker_api.h"

namespace splitspec::spec {

class SessionLeases {
 public:
  // `lease_seconds` <= 0: sessions never expire.
  explicit SessionLeases(double lease_seconds) : lease_seconds_(lease_seconds) {}

  void Touch(RequestId id, double now) { last_used_[id] = now; }
  void Forget(RequestId id) { last_used_.erase(id); }
  // Ids whose last use is more than the lease before `now`, in no particular order; they are
  // forgotten here, and the caller frees their state.
  std::vector<RequestId> TakeExpired(double now);
  double lease_seconds() const { return lease_seconds_; }
  size_t size() const { return last_used_.size(); }

 private:
  double lease_seconds_;
  std::unordered_map<RequestId, double> last_used_;
};

// Seconds on the steady clock (the workers' default time source for leases).
inline double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace splitspec::spec

#endif  // SPLITSPEC_COMMON_SPEC_SESSION_LEASES_H_
