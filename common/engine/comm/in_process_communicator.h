// An in-process Communicator: N ranks are N threads of one process sharing host memory.
// Used to run tensor-parallel forwards on the CPU backend (tests, debugging the sharding).
#ifndef SPLITSPEC_COMMON_ENGINE_COMM_IN_PROCESS_COMMUNICATOR_H_
#define SPLITSPEC_COMMON_ENGINE_COMM_IN_PROCESS_COMMUNICATOR_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/comm/communicator.h"

namespace splitspec::engine {

// Creates the `n_ranks` handles of one group; hand handle r to the thread running rank r.
// The handles share the group's state, which lives until the last handle is destroyed.
// Collectives block until every rank has called them (a barrier), so each rank must run on
// its own thread. AllReduceSum adds rank 0's value first, then rank 1's, ... rank N-1's, for
// every element, so results are reproducible bit for bit. INVALID_ARGUMENT for n_ranks < 1.
absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> CreateInProcessGroup(int n_ranks);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_COMM_IN_PROCESS_COMMUNICATOR_H_
