// Draft-model proposer: a small Llama-family model proposes a chain of k tokens per request,
// or a tree (ProposalShape::branching > 1; tree_growth.h chooses its shape), all requests of a
// step batched into the same forwards (one forward per draft depth: a chain feeds its last
// token, a tree the nodes it expands at that depth, with the tree nodes already in its KV as
// masked context, so a node attends only to its own ancestors). Greedy
// requests get the draft's argmax tokens and no q (one-hot). Sampled requests (temperature > 0)
// get tokens drawn from the draft's ComputeProbabilities under the request's temperature /
// top-k / top-p, with those dense q rows returned in DraftProposal.probs: exact rejection
// sampling at the verifier needs the whole q each token was drawn from. The draws come from the
// request's seed (mixed so they are distinct from the verifier's): a chain token's from a draw
// keyed by its position in the sequence, so the same context gives the same token whichever
// call drafts it, a tree's from a per-request stream; a request's drafts are reproducible.
//
// KV sync: the proposer remembers the tokens it put in each request's KV cache (the committed
// history it had seen plus the draft tokens it speculated). On each Propose it keeps the
// longest prefix of those that agrees with the committed history, truncates the rest (the
// rejected tail) and feeds the missing committed tokens together with the first draft forward,
// so it catches up also after steps where it proposed nothing. A tree's nodes stay in the KV
// after the committed history until the next Propose, which moves the nodes of the accepted
// path into place (KvCache::CommitPath) and drops the rest. A draft made ahead with alternatives
// (ProposeTask::alternatives) keeps its assumed tokens as tree nodes the same way, with a
// branch for each other outcome it drafts after.
#ifndef SPLITSPEC_DRAFTER_DRAFT_MODEL_PROPOSER_H_
#define SPLITSPEC_DRAFTER_DRAFT_MODEL_PROPOSER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/engine/backend.h"
#include "common/engine/cuda/select_backend.h"
#include "common/engine/kv/kv_cache.h"
#include "common/engine/model/llama_model.h"
#include "common/engine/sampling/sampler.h"
#include "drafter/proposer.h"

namespace splitspec::drafter {

struct DraftModelOptions {
  std::string model_dir;
  int32_t kv_blocks = 1024;
  int32_t block_size = 16;
  int32_t n_threads = 0;       // CPU backend threads, 0 = all cores
  std::string device = "cpu";  // cpu, cuda or cuda:N (common/engine/cuda/select_backend.h)
  engine::WeightQuantization quantize = engine::WeightQuantization::kNone;  // int8: Q8_0 matrices
  engine::DType kv_dtype = engine::DType::kF32;  // engine::KvCacheOptions::dtype (F16: CPU only)
};

// Not thread-safe (see Proposer).
class DraftModelProposer : public Proposer {
 public:
  static absl::StatusOr<std::unique_ptr<DraftModelProposer>> Create(const DraftModelOptions& options);
  ~DraftModelProposer() override;

  absl::StatusOr<std::vector<spec::DraftProposal>> Propose(absl::Span<const ProposeTask> tasks) override;
  void Release(spec::RequestId id) override;
  ProposerInfo Info() const override;

  // Tokens held in the request's draft KV (committed prefix + speculated tail); nullptr when the
  // proposer has no state for it. For tests.
  const std::vector<int32_t>* KvTokens(spec::RequestId id) const;
  int32_t KvLength(spec::RequestId id) const;

 private:
  DraftModelProposer(const DraftModelOptions& options, engine::DeviceSpec device,
                     std::unique_ptr<engine::Backend> backend, std::unique_ptr<engine::LlamaModel> model,
                     std::unique_ptr<engine::KvCache> kv);
  // The model's forward, then the backend's sticky status (the CUDA backend's ops report
  // errors only there).
  absl::Status Forward(const std::vector<engine::SequenceStep>& steps, engine::ForwardResult* result);

  struct RequestState {
    std::vector<int32_t> kv_tokens;  // what the draft KV holds for the request (a linear prefix)
    // Tree nodes the KV holds after kv_tokens: token and parent (-1 = the last of kv_tokens,
    // else an earlier tree column), in KV order.
    std::vector<int32_t> tree_tokens;
    std::vector<int32_t> tree_parents;
    std::unique_ptr<engine::Rng> rng;  // made on the first sampled step
  };
  // Keeps the tree path that `history` continues with as committed KV and drops the rest of
  // the tree; the next forward then catches up from there.
  absl::Status CommitTreePath(spec::RequestId id, absl::Span<const int32_t> history, RequestState& state);
  // Rolls the request's draft KV back to the longest prefix of `history` (committed tokens,
  // the last one pending) it still agrees with, after keeping the tree path `history` takes
  // (a new request gets a sequence); returns that prefix's length, always short of the pending
  // token, which is fed again for its logits.
  absl::StatusOr<size_t> KeepCommittedPrefix(spec::RequestId id, absl::Span<const int32_t> history,
                                             RequestState& state);
  // Chains after a task's hypothesis and after its likeliest other outcomes
  // (ProposeTask::alternatives), for the tasks `which` (their depths in `depth`): the hypothesis
  // and the branches all sit in the draft KV as tree nodes after the committed history, so
  // whichever outcome the verifier takes, the next Propose keeps its path (CommitTreePath).
  // The hypothesis's chain goes to proposals, the others to each task's alternatives_out.
  absl::Status DraftAfterOutcomes(absl::Span<const ProposeTask> tasks, const std::vector<size_t>& which,
                                  const std::vector<int32_t>& depth, std::vector<spec::DraftProposal>& proposals);
  engine::Rng& RngFor(const ProposeTask& task, RequestState& state) const;
  // Appends the next draft token for `task` from `logits` (argmax, or the draw keyed by the
  // token's `position` in the request's sequence, its q row appended to proposal->probs) as a
  // child of the proposal's last node (-1 for none).
  void AppendDraftToken(const ProposeTask& task, size_t position, const float* logits,
                        spec::DraftProposal* proposal) const;

  DraftModelOptions options_;
  engine::DeviceSpec device_;
  std::unique_ptr<engine::Backend> backend_;
  std::unique_ptr<engine::LlamaModel> model_;
  std::unique_ptr<engine::KvCache> kv_;
  std::unordered_map<spec::RequestId, RequestState> states_;
};

}  // namespace splitspec::drafter

#endif  // SPLITSPEC_DRAFTER_DRAFT_MODEL_PROPOSER_H_
