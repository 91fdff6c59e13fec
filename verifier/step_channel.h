// The wire format of the tensor-parallel verifier's step broadcast, and the channel that carries
// it from rank 0 to every other rank over a Communicator.
//
// A message is a fixed 32-byte header {magic, kind, sequence number, payload bytes} followed by
// the payload, each sent as one Broadcast from rank 0; followers learn the payload size from the
// header, so both broadcasts have equal sizes on every rank (NCCL and the in-process group both
// require it). The sequence number counts messages on each side: a follower that finds another
// number is out of step with rank 0 and stops with an error instead of replaying garbage.
//
// Payloads (host byte order; all ranks of a group run on one kind of machine):
//   kPrefill, kVerify  u32 n_steps, per step: u64 seq, u32 n_tokens, u32 has_parents,
//                      i32 tokens[n_tokens], i32 parents[n_tokens] when has_parents
//                      (logit_nodes are not sent: only rank 0 reads logits)
//   kCommit            u32 n_ops, per op: u64 seq, i32 base, u32 n_nodes, i32 nodes[n_nodes]
//   kRelease           u32 n_ids, u64 ids[n_ids]
//   kAbort, kShutdown  empty
#ifndef SPLITSPEC_VERIFIER_STEP_CHANNEL_H_
#define SPLITSPEC_VERIFIER_STEP_CHANNEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/engine/backend.h"
#include "common/engine/comm/communicator.h"
#include "common/engine/model/llama_model.h"
#include "verifier/verifier_replica.h"

namespace splitspec::verifier {

enum class StepKind : uint32_t {
  kPrefill = 1,   // begin a prefill step (followers: add the sequences, forward)
  kVerify = 2,    // begin a verify step (followers: forward)
  kCommit = 3,    // end the open step keeping it, with rank 0's accepted paths
  kAbort = 4,     // end the open step undoing it (rank 0 failed after the step began)
  kRelease = 5,   // free sequences
  kShutdown = 6,  // leave the follower loop
};
const char* StepKindName(StepKind kind);

struct StepMessage {
  StepKind kind = StepKind::kShutdown;
  std::vector<engine::SequenceStep> steps;  // kPrefill, kVerify
  std::vector<CommitOp> commits;            // kCommit
  std::vector<engine::SeqId> ids;           // kRelease
};

std::vector<uint8_t> EncodePayload(const StepMessage& message);
// INVALID_ARGUMENT (never a crash or a huge allocation) for payloads that do not parse exactly.
absl::StatusOr<StepMessage> DecodePayload(StepKind kind, absl::Span<const uint8_t> payload);

// One rank's end of the channel. Bytes travel through a staging tensor in the rank's backend
// memory (Communicator works on backend memory: device memory under NCCL), grown on demand.
// Not thread-safe: used by the rank's thread only; `backend` and `comm` must outlive it.
class StepChannel {
 public:
  StepChannel(engine::Backend& backend, engine::Communicator& comm);
  ~StepChannel();
  StepChannel(const StepChannel&) = delete;
  StepChannel& operator=(const StepChannel&) = delete;

  int rank() const { return comm_.rank(); }
  // Rank 0 only: broadcasts the message. FAILED_PRECONDITION on other ranks. After a kShutdown
  // the followers are gone: a second kShutdown is a no-op, any other message FAILED_PRECONDITION.
  absl::Status Send(const StepMessage& message);
  bool closed() const { return closed_; }
  // Ranks 1..N-1: blocks until rank 0 sends the next message. INTERNAL when the header is not
  // the next one (bad magic, kind or sequence number); decode errors as DecodePayload.
  absl::StatusOr<StepMessage> Receive();

 private:
  // Broadcasts `*bytes` (the same size on every rank) from rank 0 into every rank's `*bytes`.
  absl::Status Broadcast(std::vector<uint8_t>* bytes);

  engine::Backend& backend_;
  engine::Communicator& comm_;
  engine::Tensor staging_;  // (rows, kStagingCols) f32 viewed as bytes
  uint64_t next_sequence_ = 0;
  bool closed_ = false;  // rank 0 sent kShutdown
};

}  // namespace splitspec::verifier

#endif  // SPLITSPEC_VERIFIER_STEP_CHANNEL_H_
