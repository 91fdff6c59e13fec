// One rank's copy of the verifier's engine state: its backend, its shard of the target model and
// its KV cache, plus the only operations that change them. Under tensor parallelism every rank
// applies the same operations in the same order (rank 0 broadcasts them, step_protocol.h), so
// the ranks' block tables stay identical and every forward issues the same collectives.
//
// A step is two-phase: Begin{Prefill,Verify} appends the step's nodes to KV and runs the
// forward; then exactly one of Commit (keep: CommitPath per sequence, decided by rank 0) or
// Abort (undo: release the prefilled sequences, truncate verified ones back to their length
// before the step). Release is a step of its own.
//
// Not thread-safe: one thread drives a replica at a time.
#ifndef SPLITSPEC_VERIFIER_VERIFIER_REPLICA_H_
#define SPLITSPEC_VERIFIER_VERIFIER_REPLICA_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/backend.h"
#include "common/engine/comm/communicator.h"
#include "common/engine/cuda/select_backend.h"
#include "common/engine/kv/kv_cache.h"
#include "common/engine/model/llama_model.h"

namespace splitspec::verifier {

struct ReplicaOptions {
  std::string model_dir;
  std::string device = "cpu";  // cpu, cuda, cuda:N (select_backend.h)
  engine::WeightQuantization quantize = engine::WeightQuantization::kNone;
  int32_t n_threads = 0;       // CPU backend threads, 0 = OpenMP default
  int32_t kv_blocks = 1024;
  int32_t block_size = 16;
  engine::DType kv_dtype = engine::DType::kF32;  // engine::KvCacheOptions::dtype
  int tp_rank = 0;
  int tp_size = 1;
};

// Rank 0's decision for one sequence of a verify step: keep `nodes` (indices into the step's
// nodes, root first, increasing) at positions base, base + 1, ... (KvCache::CommitPath).
struct CommitOp {
  engine::SeqId seq = 0;
  int32_t base = 0;
  std::vector<int32_t> nodes;
  bool operator==(const CommitOp& other) const {
    return seq == other.seq && base == other.base && nodes == other.nodes;
  }
};

// The KV bookkeeping a rank holds: what must be equal across the ranks of a group.
struct KvSnapshot {
  int32_t free_blocks = 0;
  std::map<engine::SeqId, int32_t> lengths;
  std::map<engine::SeqId, std::vector<int32_t>> block_tables;
  bool operator==(const KvSnapshot& other) const {
    return free_blocks == other.free_blocks && lengths == other.lengths &&
           block_tables == other.block_tables;
  }
};

class VerifierReplica {
 public:
  // Creates the backend named by options.device, loads shard tp_rank of tp_size and sizes the
  // KV cache. With `comm` (required when tp_size > 1; not owned, must outlive the replica),
  // every rank of the group must call Create concurrently: after loading, the ranks agree on
  // whether all of them succeeded (one all-reduce), so a rank that fails to load makes every
  // rank return an error instead of leaving the others waiting in the first step. A failure to
  // create the backend itself returns before that vote (the device was checked by the caller).
  static absl::StatusOr<std::unique_ptr<VerifierReplica>> Create(const ReplicaOptions& options,
                                                                 engine::Communicator* comm);
  // The same on a backend the caller made for options.device (an NCCL communicator needs the
  // backend's stream before the replica exists).
  static absl::StatusOr<std::unique_ptr<VerifierReplica>> Create(
      const ReplicaOptions& options, std::unique_ptr<engine::Backend> backend,
      engine::Communicator* comm);
  ~VerifierReplica();

  // Adds a sequence per step (INVALID_ARGUMENT / ALREADY_EXISTS on a duplicate) and runs one
  // forward over the steps (logits for each step's logit_nodes into `result`). On error the
  // replica is back where it was and no step is open.
  absl::Status BeginPrefill(const std::vector<engine::SequenceStep>& steps,
                            engine::ForwardResult* result);
  // One forward over steps of existing sequences. On error nothing changed and no step is open.
  absl::Status BeginVerify(const std::vector<engine::SequenceStep>& steps,
                           engine::ForwardResult* result);
  // Ends the open step keeping its work: applies `ops` (verify steps: one per sequence of the
  // step; prefill steps: none). FAILED_PRECONDITION without an open step or for an op on a
  // sequence the step did not feed.
  absl::Status Commit(const std::vector<CommitOp>& ops);
  // Commit's checks alone (changes nothing).
  absl::Status CheckCommit(const std::vector<CommitOp>& ops) const;
  // Ends the open step undoing it (no-op without one).
  void Abort();
  // Frees the sequences' KV; unknown ids are ignored.
  void Release(const std::vector<engine::SeqId>& ids);

  // Makes the calling thread fit to drive the backend (select_backend.h: the CUDA device, the
  // OpenMP team size). Every operation here does it; callers that use backend() directly too.
  absl::Status BindCallingThread() const;

  bool step_open() const { return step_.open; }
  const engine::LlamaModel& model() const { return *model_; }
  const engine::KvCache& kv() const { return *kv_; }
  engine::Backend& backend() { return *backend_; }
  const ReplicaOptions& options() const { return options_; }
  KvSnapshot Snapshot() const;

 private:
  struct OpenStep {
    bool open = false;
    bool prefill = false;
    std::map<engine::SeqId, int32_t> bases;  // the sequences fed and their length before the step
  };
  VerifierReplica(const ReplicaOptions& options, engine::DeviceSpec device,
                  std::unique_ptr<engine::Backend> backend,
                  std::unique_ptr<engine::LlamaModel> model, std::unique_ptr<engine::KvCache> kv);
  // Binds the calling thread to the device, runs the forward, checks the backend's status.
  absl::Status Forward(const std::vector<engine::SequenceStep>& steps,
                       engine::ForwardResult* result);

  ReplicaOptions options_;
  engine::DeviceSpec device_;
  std::unique_ptr<engine::Backend> backend_;
  std::unique_ptr<engine::LlamaModel> model_;
  std::unique_ptr<engine::KvCache> kv_;
  std::set<engine::SeqId> sequences_;  // every sequence in kv_ (KvCache does not list them)
  OpenStep step_;
};

}  // namespace splitspec::verifier

#endif  // SPLITSPEC_VERIFIER_VERIFIER_REPLICA_H_
