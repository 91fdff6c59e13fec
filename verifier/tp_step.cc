// The step protocol's two sides (see tp_step.h).
#include "verifier/tp_step.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace splitspec::verifier {

StepLeader::StepLeader(VerifierReplica& replica, StepChannel* channel, StepObserver observer)
    : replica_(replica), channel_(channel), observer_(std::move(observer)) {}

absl::Status StepLeader::Send(StepMessage message) {
  if (channel_ == nullptr) return absl::OkStatus();
  // The channel stages messages in backend memory.
  if (absl::Status s = replica_.BindCallingThread(); !s.ok()) return s;
  return channel_->Send(message);
}

void StepLeader::Observe(StepKind kind, bool aborted) {
  if (observer_) observer_(StepRecord{0, kind, aborted, replica_.Snapshot()});
}

absl::Status StepLeader::Begin(StepKind kind, const std::vector<engine::SequenceStep>& steps,
                               engine::ForwardResult* result) {
  if (replica_.step_open()) return absl::FailedPreconditionError("a step is already open");
  StepMessage message;
  message.kind = kind;
  message.steps = steps;
  for (engine::SequenceStep& step : message.steps) step.logit_nodes.clear();  // not sent
  // Followers must start their forward too before rank 0's first collective can complete.
  if (absl::Status s = Send(std::move(message)); !s.ok()) return s;
  absl::Status began = kind == StepKind::kPrefill ? replica_.BeginPrefill(steps, result)
                                                  : replica_.BeginVerify(steps, result);
  if (!began.ok()) {
    // Our forward failed (and undid itself); the followers are inside the step: end it there.
    absl::Status sent = Send(StepMessage{StepKind::kAbort, {}, {}, {}});
    Observe(kind, /*aborted=*/true);
    return sent.ok() ? began : sent;
  }
  open_kind_ = kind;
  return absl::OkStatus();
}

absl::Status StepLeader::BeginPrefill(const std::vector<engine::SequenceStep>& steps,
                                      engine::ForwardResult* result) {
  return Begin(StepKind::kPrefill, steps, result);
}

absl::Status StepLeader::BeginVerify(const std::vector<engine::SequenceStep>& steps,
                                     engine::ForwardResult* result) {
  return Begin(StepKind::kVerify, steps, result);
}

absl::Status StepLeader::Commit(const std::vector<CommitOp>& ops) {
  if (!replica_.step_open()) return absl::FailedPreconditionError("commit without an open step");
  if (absl::Status s = replica_.CheckCommit(ops); !s.ok()) {
    if (absl::Status aborted = Abort(); !aborted.ok()) return aborted;
    return absl::InternalError(
        absl::StrCat("rank 0 made a commit that does not match its step: ", s.message()));
  }
  StepMessage message;
  message.kind = StepKind::kCommit;
  message.commits = ops;
  if (absl::Status sent = Send(std::move(message)); !sent.ok()) {
    // The group is broken; rank 0 undoes the step, matching the error it reports.
    replica_.Abort();
    Observe(open_kind_, /*aborted=*/true);
    return sent;
  }
  const absl::Status committed = replica_.Commit(ops);
  Observe(open_kind_, /*aborted=*/false);
  return committed;
}

absl::Status StepLeader::Abort() {
  if (!replica_.step_open()) return absl::OkStatus();
  const absl::Status sent = Send(StepMessage{StepKind::kAbort, {}, {}, {}});
  replica_.Abort();
  Observe(open_kind_, /*aborted=*/true);
  return sent;
}

absl::Status StepLeader::Release(const std::vector<engine::SeqId>& ids) {
  if (replica_.step_open()) return absl::FailedPreconditionError("release inside an open step");
  StepMessage message;
  message.kind = StepKind::kRelease;
  message.ids = ids;
  const absl::Status sent = Send(std::move(message));
  replica_.Release(ids);
  Observe(StepKind::kRelease, /*aborted=*/false);
  return sent;
}

absl::Status StepLeader::Shutdown() {
  if (channel_ == nullptr) return absl::OkStatus();
  const absl::Status aborted = Abort();
  if (absl::Status s = replica_.BindCallingThread(); !s.ok()) return s;
  const absl::Status sent = channel_->Send(StepMessage{StepKind::kShutdown, {}, {}, {}});
  return aborted.ok() ? sent : aborted;
}

absl::Status RunFollower(VerifierReplica& replica, StepChannel& channel,
                         const StepObserver& observer) {
  const int rank = channel.rank();
  auto observe = [&](StepKind kind, bool aborted) {
    if (observer) observer(StepRecord{rank, kind, aborted, replica.Snapshot()});
  };
  for (;;) {
    absl::StatusOr<StepMessage> message = channel.Receive();
    if (!message.ok()) return message.status();
    switch (message->kind) {
      case StepKind::kShutdown:
        return absl::OkStatus();
      case StepKind::kRelease:
        replica.Release(message->ids);
        observe(StepKind::kRelease, false);
        break;
      case StepKind::kPrefill:
      case StepKind::kVerify: {
        const StepKind kind = message->kind;
        engine::ForwardResult ignored;  // no logit nodes were sent: followers compute none
        const absl::Status began = kind == StepKind::kPrefill
                                       ? replica.BeginPrefill(message->steps, &ignored)
                                       : replica.BeginVerify(message->steps, &ignored);
        absl::StatusOr<StepMessage> end = channel.Receive();
        if (!end.ok()) return end.status();
        if (end->kind == StepKind::kAbort) {
          replica.Abort();  // a no-op when our own forward failed too (it undid itself)
          observe(kind, true);
          break;
        }
        if (end->kind != StepKind::kCommit) {
          return absl::InternalError(
              absl::StrCat("rank ", rank, ": expected commit or abort to end a ",
                           StepKindName(kind), " step, got ", StepKindName(end->kind)));
        }
        if (!began.ok()) {
          return absl::InternalError(absl::StrCat("rank ", rank, ": rank 0 committed a ",
                                                  StepKindName(kind),
                                                  " step this rank failed: ", began.message()));
        }
        if (absl::Status s = replica.Commit(end->commits); !s.ok()) {
          return absl::InternalError(
              absl::StrCat("rank ", rank, ": cannot apply rank 0's commit: ", s.message()));
        }
        observe(kind, false);
        break;
      }
      case StepKind::kCommit:
      case StepKind::kAbort:
        return absl::InternalError(
            absl::StrCat("rank ", rank, ": ", StepKindName(message->kind), " outside a step"));
    }
  }
}

}  // namespace splitspec::verifier
