// The tensor-parallel verifier's step protocol: rank 0 (StepLeader) broadcasts every operation
// on the engine state before applying it itself; ranks 1..N-1 (RunFollower) replay them. With
// no channel (TP = 1) the leader just applies them, so the verifier core runs one code path for
// every group size and communicator (in-process threads on CPU, NCCL processes on GPUs).
//
// One step, as every rank sees it:
//   kPrefill | kVerify   begin: every rank runs the same forward (its collectives pair up)
//   kCommit | kAbort     end: rank 0 alone samples and decides acceptance, then broadcasts the
//                        accepted paths; followers never decide anything themselves, since
//                        ranks deciding independently can diverge on a near-tie or a sampled
//                        token and then issue different collectives, which hangs NCCL.
// A step that rank 0 refuses before it begins (bad input) is never sent; one that fails after
// it began (the forward, acceptance or a commit check failed on rank 0) always ends with kAbort,
// so followers are never left inside a step and undo exactly what rank 0 undoes.
#ifndef SPLITSPEC_VERIFIER_TP_STEP_H_
#define SPLITSPEC_VERIFIER_TP_STEP_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "verifier/step_channel.h"
#include "verifier/verifier_replica.h"

namespace splitspec::verifier {

// What a rank did at the end of each step; for tests of lockstep (every rank must report the
// same sequence of records, KV snapshots included).
struct StepRecord {
  int rank = 0;
  StepKind kind = StepKind::kPrefill;  // kPrefill, kVerify or kRelease
  bool aborted = false;
  KvSnapshot kv;
};
// Called on the rank's own thread after each step; must not block on other ranks.
using StepObserver = std::function<void(const StepRecord&)>;

// Rank 0. Not thread-safe (one thread drives rank 0; the verifier service serialises calls).
class StepLeader {
 public:
  // `channel` is null for TP = 1. Neither is owned; both must outlive the leader.
  StepLeader(VerifierReplica& replica, StepChannel* channel, StepObserver observer = nullptr);

  // Begin a step on every rank (see VerifierReplica). On error the step is over everywhere.
  absl::Status BeginPrefill(const std::vector<engine::SequenceStep>& steps,
                            engine::ForwardResult* result);
  absl::Status BeginVerify(const std::vector<engine::SequenceStep>& steps,
                           engine::ForwardResult* result);
  // End the open step everywhere, keeping it with `ops` (rank 0's acceptance decision). Ops
  // that do not match the open step abort it instead (INTERNAL).
  absl::Status Commit(const std::vector<CommitOp>& ops);
  // End the open step everywhere, undoing it.
  absl::Status Abort();
  absl::Status Release(const std::vector<engine::SeqId>& ids);
  // Ends the followers' loops (aborting an open step first); later calls are no-ops, and any
  // other call fails afterwards.
  absl::Status Shutdown();

  VerifierReplica& replica() { return replica_; }
  const VerifierReplica& replica() const { return replica_; }
  int tp_size() const { return replica_.options().tp_size; }

 private:
  absl::Status Send(StepMessage message);
  absl::Status Begin(StepKind kind, const std::vector<engine::SequenceStep>& steps,
                     engine::ForwardResult* result);
  void Observe(StepKind kind, bool aborted);

  VerifierReplica& replica_;
  StepChannel* channel_;
  StepObserver observer_;
  StepKind open_kind_ = StepKind::kPrefill;
};

// Ranks 1..N-1: receives and applies rank 0's steps until kShutdown (then OK). Any other
// return means this rank can no longer follow (the channel failed, the group is out of step,
// or rank 0 committed a step this rank could not run); the caller must not continue silently,
// since rank 0 will wait for this rank in its next collective.
absl::Status RunFollower(VerifierReplica& replica, StepChannel& channel,
                         const StepObserver& observer = nullptr);

}  // namespace splitspec::verifier

#endif  // SPLITSPEC_VERIFIER_TP_STEP_H_
