// The verifier's transport-free core: per-request sessions on the target model, prefill, and
// batched verification of draft trees in ONE target forward followed by acceptance and a KV
// commit of the accepted path. The gRPC service (verifier_service.h) is a thin adapter.
//
// Token bookkeeping (common/spec/worker_api.h): a session's KV holds every committed token but
// the pending one; Verify feeds the pending token as node 0 followed by the draft nodes.
//
// Every change to the engine state goes through a StepLeader (verifier/tp_step.h): with
// tensor parallelism the core is rank 0, validates each call, broadcasts the step to the other
// ranks, and alone samples and decides acceptance, whose result it broadcasts before anyone
// commits KV. TP = 1 runs the same code with nothing to broadcast.
//
// Not thread-safe: callers serialise all calls (the service holds one mutex), which matches
// the engine (one forward at a time).
#ifndef SPLITSPEC_VERIFIER_VERIFIER_CORE_H_
#define SPLITSPEC_VERIFIER_VERIFIER_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/model/llama_model.h"
#include "common/engine/comm/communicator.h"
#include "common/engine/sampling/sampler.h"
#include "common/spec/draft_tree.h"
#include "common/spec/session_leases.h"
#include "common/spec/worker_api.h"
#include "verifier/step_channel.h"
#include "verifier/tp_group.h"
#include "verifier/tp_step.h"
#include "verifier/verifier_replica.h"

namespace splitspec::verifier {

struct VerifierOptions {
  std::string model_dir;
  int32_t kv_blocks = 1024;
  int32_t block_size = 16;
  // How the KV cache stores its rows: F32, or F16 on the CPU (engine::KvCacheOptions::dtype).
  engine::DType kv_dtype = engine::DType::kF32;
  int32_t max_draft_tokens = 64;  // nodes per tree (k above this is INVALID_ARGUMENT)
  // Context served per request, in tokens: 0 = the model's max_position_embeddings; a smaller
  // value caps it (less KV per request; tests use it to reach the end quickly).
  int32_t max_context_tokens = 0;
  // Sessions unused for this long are reclaimed by ReclaimIdle (their router is gone); every
  // Prefill/Verify renews a session's lease. <= 0: never.
  double session_lease_seconds = 300;
  // Live sessions at most; a Prefill item beyond it gets RESOURCE_EXHAUSTED. 0: no cap.
  int32_t max_sessions = 4096;
  // Monotonic time in seconds for leases (tests inject one); null: the steady clock.
  std::function<double()> now;
  int32_t n_threads = 0;          // CPU backend threads (per rank), 0 = all cores / tp_size
  std::string device = "cpu";     // cpu, cuda or cuda:N (common/engine/cuda/select_backend.h)
  // Int8 quantizes the target's matrices at load (engine/model/quantize.h).
  engine::WeightQuantization quantize = engine::WeightQuantization::kNone;
  // Tensor parallelism with ranks as threads of this process (in-process communicator, CPU
  // only): rank 0 is the core's caller, ranks 1..tp_size-1 follow on their own threads.
  int32_t tp_size = 1;
  // Tests: called after every step on every rank's thread (concurrently); see tp_step.h.
  StepObserver step_observer;
};

class VerifierCore {
 public:
  // Loads the model from options.model_dir (tp_size shards, ranks as threads, when
  // tp_size > 1) on options.device and sizes the KV cache.
  static absl::StatusOr<std::unique_ptr<VerifierCore>> Create(const VerifierOptions& options);
  // Rank 0 of a group whose other ranks run elsewhere (one process per GPU over NCCL): `replica`
  // is rank 0's, created with `comm`; `comm` reaches the other ranks, which run RunFollower.
  // options.device, tp_size and n_threads are the replica's; the rest apply.
  static absl::StatusOr<std::unique_ptr<VerifierCore>> CreateRank0(const VerifierOptions& options,
                                                                   std::unique_ptr<engine::Communicator> comm,
                                                                   std::unique_ptr<VerifierReplica> replica);
  // With tensor parallelism, tells the other ranks to stop (they leave their loops).
  ~VerifierCore();

  // Starts one session per item in one forward and returns each request's first generated
  // token, one result per item in item order. An item with bad input (ALREADY_EXISTS for a live
  // id, a duplicate id, an empty prompt or one that fills the context, tokens out of vocab, bad
  // sampling) gets its own status and no session; the others proceed. A call-level error
  // (a broken engine or group) means no session was created.
  absl::StatusOr<std::vector<spec::PrefillResult>> Prefill(const std::vector<spec::PrefillItem>& items);

  // One step for each item's session in one batched forward, then exact acceptance with
  // spec::Verify: greedy sessions accept the longest path matching the target's argmax and
  // emit its next token; sampled sessions run rejection sampling against the target's
  // ComputeProbabilities (the session's temperature / top-k / top-p) with the draft's q
  // distributions (one-hot when the draft sent none), drawing from the session's own Rng
  // seeded at prefill, so a request's output is a function of its seed and its drafts. Either
  // way the output is distributed exactly as target-only decoding. One result per item, in
  // item order: an item with bad input (unknown session, token out of vocab, malformed tree or
  // q, NaN or negative q, too many nodes, duplicate id) gets INVALID_ARGUMENT, one whose step
  // would run past the model's context OUT_OF_RANGE; its session is unchanged and the other
  // items proceed.
  absl::StatusOr<spec::VerifyResponse> Verify(const std::vector<spec::VerifyItem>& items);

  // Frees the sessions' KV; unknown ids are ignored. Returns how many existed.
  int32_t Release(const std::vector<spec::RequestId>& ids);
  // Releases every session whose lease ran out (see common/spec/session_leases.h); returns
  // how many. The service calls it periodically.
  int32_t ReclaimIdle();
  double session_lease_seconds() const { return leases_.lease_seconds(); }

  spec::WorkerInfo Info() const;
  const std::string& model_dir() const { return options_.model_dir; }
  int32_t vocab_size() const;
  // Tokens a session may hold in KV (Info().max_context_tokens).
  int32_t MaxContext() const;
  // Committed tokens in the session's KV (everything but the pending token), -1 if unknown.
  int32_t KvLength(spec::RequestId id) const;
  int tp_size() const { return leader_->tp_size(); }

 private:
  struct Session {
    int32_t pending = 0;  // last committed token, not yet in KV
    engine::SamplingParams sampling;
    // Seeded with sampling.seed at prefill; every sampled token and acceptance test of the
    // request draws from it (greedy sessions never draw).
    std::unique_ptr<engine::Rng> rng;
  };
  explicit VerifierCore(const VerifierOptions& options);
  double Now() const { return options_.now ? options_.now() : spec::SteadySeconds(); }
  absl::Status CheckPrefillItem(const spec::PrefillItem& item) const;
  absl::StatusOr<spec::DraftTree> CheckVerifyItem(const spec::VerifyItem& item) const;
  absl::Status CheckTokens(const std::vector<int32_t>& tokens, const char* what, spec::RequestId id) const;
  int32_t NextToken(Session& session, const float* logits) const;
  const engine::KvCache& kv() const { return leader_->replica().kv(); }
  const engine::ModelConfig& config() const { return leader_->replica().model().config(); }

  VerifierOptions options_;
  // Exactly one of these owns rank 0's replica: the in-process group (ranks as threads), or
  // replica_ (TP = 1, or rank 0 of a multi-process group with comm_ and channel_).
  std::unique_ptr<InProcessTpGroup> group_;
  std::unique_ptr<engine::Communicator> comm_;
  std::unique_ptr<VerifierReplica> replica_;
  std::unique_ptr<StepChannel> channel_;
  std::unique_ptr<StepLeader> leader_;
  std::string model_name_;
  std::unordered_map<spec::RequestId, Session> sessions_;
  spec::SessionLeases leases_;
};

}  // namespace splitspec::verifier

#endif  // SPLITSPEC_VERIFIER_VERIFIER_CORE_H_
