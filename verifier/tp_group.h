// A tensor-parallel verifier group whose ranks are threads of this process: the in-process
// communicator over CPU backends (`splitspec-verifier --tp N` without --tp-rank, and the tests).
// Rank 0's replica and channel are driven by the caller (through a StepLeader); ranks 1..N-1
// each load their shard and run RunFollower on a thread of their own. The same replica, channel
// and step code serve the one-process-per-GPU deployment over NCCL (verifier/main.cc).
#ifndef SPLITSPEC_VERIFIER_TP_GROUP_H_
#define SPLITSPEC_VERIFIER_TP_GROUP_H_

#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/comm/communicator.h"
#include "verifier/step_channel.h"
#include "verifier/tp_step.h"
#include "verifier/verifier_replica.h"

namespace splitspec::verifier {

// Thread-safety: created, used and destroyed by rank 0's thread; the followers' threads touch
// only their own replica. `observer` (tests) is called on every rank's thread, concurrently.
class InProcessTpGroup {
 public:
  // Loads all options.tp_size ranks concurrently (options.tp_rank is ignored), rank 0 on the
  // calling thread. The device must be the CPU (the in-process communicator sums host memory).
  // When any rank fails to load, every rank stops and the error of rank 0 (or the vote's
  // ABORTED naming the failed count) is returned; no thread is left running.
  static absl::StatusOr<std::unique_ptr<InProcessTpGroup>> Start(const ReplicaOptions& options,
                                                                 StepObserver observer = nullptr);
  // Sends kShutdown on rank 0's channel (a no-op when a StepLeader already did) and joins the
  // followers. A follower that cannot follow rank 0 any more (out of step: a bug) aborts the
  // process with its reason: rank 0 would otherwise wait for it forever.
  ~InProcessTpGroup();

  VerifierReplica& rank0() { return *rank0_; }
  StepChannel& rank0_channel() { return *channel0_; }

 private:
  InProcessTpGroup() = default;

  std::vector<std::unique_ptr<engine::Communicator>> comms_;  // outlives everything below
  std::vector<std::thread> followers_;
  std::unique_ptr<VerifierReplica> rank0_;
  std::unique_ptr<StepChannel> channel0_;
};

}  // namespace splitspec::verifier

#endif  // SPLITSPEC_VERIFIER_TP_GROUP_H_
