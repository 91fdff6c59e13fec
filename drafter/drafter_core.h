// The drafter's transport-free core: per-request sessions holding each request's committed
// history, kept in step by the known_length/new_tokens protocol of common/spec/worker_api.h,
// in front of one Proposer (draft model or n-gram). The gRPC service is a thin adapter.
//
// Not thread-safe: callers serialise calls (the service holds one mutex).
#ifndef SPLITSPEC_DRAFTER_DRAFTER_CORE_H_
#define SPLITSPEC_DRAFTER_DRAFTER_CORE_H_

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/worker_api.h"
#include "drafter/proposer.h"

namespace splitspec::drafter {

struct DrafterOptions {
  int32_t max_draft_tokens = 16;  // largest depth (and node budget) a Propose may ask for
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
  // proposer failed.
  absl::StatusOr<spec::ProposeResponse> Propose(const std::vector<spec::ProposeItem>& items);

  // Ends sessions (and the proposer's state for them); unknown ids are ignored.
  int32_t Release(const std::vector<spec::RequestId>& ids);

  spec::WorkerInfo Info() const;
  // The committed history the drafter holds for `id`, nullptr if it has no session.
  const std::vector<int32_t>* History(spec::RequestId id) const;
  Proposer& proposer() { return *proposer_; }

 private:
  absl::Status CheckItem(const spec::ProposeItem& item, int32_t vocab) const;

  std::unique_ptr<Proposer> proposer_;
  DrafterOptions options_;
  std::unordered_map<spec::RequestId, std::vector<int32_t>> histories_;
};

}  // namespace splitspec::drafter

#endif  // SPLITSPEC_DRAFTER_DRAFTER_CORE_H_
