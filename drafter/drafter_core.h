// The drafter's transport-free core: per-request sessions holding each request's committed
// history, kept in step by the known_length/new_tokens protocol of common/spec/worker_api.h,
// in front of one Proposer (draft model or n-gram). The gRPC service is a thin adapter.
//
// Not thread-safe: callers serialise calls (the service holds one mutex).
#ifndef SPLITSPEC_DRAFTER_DRAFTER_CORE_H_
#define SPLITSPEC_DRAFTER_DRAFTER_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/session_leases.h"
#include "common/spec/worker_api.h"
#include "drafter/proposer.h"

namespace splitspec::drafter {

struct DrafterOptions {
  int32_t max_draft_tokens = 16;  // largest depth (and node budget) a Propose may ask for
  // Sessions unused for this long are reclaimed by ReclaimIdle (their router is gone); every
  // Propose renews a session's lease. <= 0: never.
  double session_lease_seconds = 300;
  // Bounds on what sessions may hold (0: no bound). An item that would open a session beyond
  // max_sessions, or grow the history held across all sessions beyond max_history_tokens,
  // gets RESOURCE_EXHAUSTED (the router then decodes it without drafts).
  int32_t max_sessions = 1024;
  int64_t max_history_tokens = 4 << 20;
  // Monotonic time in seconds for leases (tests inject one); null: the steady clock.
  std::function<double()> now;
};

class DrafterCore {
 public:
  DrafterCore(std::unique_ptr<Proposer> proposer, const DrafterOptions& options);

  // Syncs each item's session (creating it when known_length is 0), then asks the proposer for
  // all good items at once. One result per item, in item order; an item with bad input gets
  // its own status and no draft while the others proceed: INVALID_ARGUMENT (duplicate id,
  // depth above the maximum, token ids outside the vocabulary, an empty history) or
  // FAILED_PRECONDITION when known_length disagrees with the session (unknown session with
  // known_length > 0, or more tokens than it holds): the router then resends the whole history
  // with known_length = 0. A bad item's session is left unchanged. A call-level error means the
  // proposer failed. An item's assumed tokens (spec::ProposeItem::assumed_tokens) reach the
  // proposer but not the session's committed history.
  absl::StatusOr<spec::ProposeResponse> Propose(const std::vector<spec::ProposeItem>& items);

  // Ends sessions (and the proposer's state for them); unknown ids are ignored.
  int32_t Release(const std::vector<spec::RequestId>& ids);
  // Releases every session whose lease ran out; returns how many. The service calls it
  // periodically.
  int32_t ReclaimIdle();
  double session_lease_seconds() const { return leases_.lease_seconds(); }

  spec::WorkerInfo Info() const;
  // The committed history the drafter holds for `id`, nullptr if it has no session.
  const std::vector<int32_t>* History(spec::RequestId id) const;
  Proposer& proposer() { return *proposer_; }

 private:
  absl::Status CheckItem(const spec::ProposeItem& item, int32_t vocab) const;
  // INVALID_ARGUMENT for assumed tokens that leave no committed history, or alternatives the
  // item cannot have (more than its assumed tokens, or for a sampled request).
  absl::Status CheckHypothesis(const spec::ProposeItem& item) const;
  // RESOURCE_EXHAUSTED when the item's session would exceed the caps, given what the items
  // admitted before it in this call add (`new_sessions`, `added_tokens`).
  absl::Status CheckCaps(const spec::ProposeItem& item, int32_t new_sessions, int64_t added_tokens) const;
  double Now() const { return options_.now ? options_.now() : spec::SteadySeconds(); }

  std::unique_ptr<Proposer> proposer_;
  DrafterOptions options_;
  std::unordered_map<spec::RequestId, std::vector<int32_t>> histories_;
  int64_t held_tokens_ = 0;  // sum of the histories' sizes
  spec::SessionLeases leases_;
};

}  // namespace splitspec::drafter

#endif  // SPLITSPEC_DRAFTER_DRAFTER_CORE_H_
