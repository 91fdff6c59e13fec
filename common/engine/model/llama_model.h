// The Llama-family decoder forward over the Backend interface: a batch of sequences, each
// feeding a tree of new tokens (a chain and a plain prefill are special cases).
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_LLAMA_MODEL_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_LLAMA_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/engine/backend.h"
#include "common/engine/comm/communicator.h"
#include "common/engine/kv/kv_cache.h"
#include "common/engine/model/model_config.h"

namespace splitspec::engine {

// One sequence's work in a forward. Tokens are tree nodes: parents[i] is the index of node
// i's parent among this step's nodes, -1 for a node hanging off the committed context; it
// must be < i. Empty `parents` means a chain (parents[i] = i - 1). Node i's position is
// Length(seq) + depth(i), where root nodes have depth 0.
//
// A tree can also grow over several forwards (a drafter feeding one depth at a time): then
// `tree_context` describes the m tree nodes earlier forwards left at the end of the
// sequence's KV, tree_context[j] being cached node j's parent (-1 = the committed context,
// else an earlier cached node). Parents then index the cached nodes followed by this step's
// tokens: parents[i] in [-1, m + i), values below m naming cached nodes, and `parents` may
// not be empty. Positions count from the committed length Length(seq) - m, so every node
// sits where its root-to-node path would sit as a chain, and sees only its ancestors among
// the tree nodes.
struct SequenceStep {
  SeqId seq = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;
  std::vector<int32_t> logit_nodes;  // nodes whose logits are returned, in this order
  std::vector<int32_t> tree_context = {};
};

struct ForwardResult {
  // Row-major (sum of logit_nodes sizes, vocab): sequence 0's rows first, in logit_nodes order.
  std::vector<float> logits;
  int32_t vocab_size = 0;
  const float* Row(int64_t i) const { return logits.data() + i * vocab_size; }
};

// How matrices are stored after loading (norms and biases always stay f32).
enum class WeightQuantization {
  kNone,  // the file dtype (or f32 with weights_to_f32)
  kInt8,  // Q8_0 (dtype.h, quantize.h) for every matrix whose rows are whole blocks (CPU and CUDA)
};

// "none" or "int8" (the --quantize flag's values); INVALID_ARGUMENT naming them otherwise.
absl::StatusOr<WeightQuantization> ParseWeightQuantization(std::string_view name);

struct ModelLoadOptions {
  // Weights keep their file dtype (F16/BF16 halve memory traffic); set to force F32.
  bool weights_to_f32 = false;
  // Int8 quantizes at load from whatever the file holds (F32, F16 or BF16); matrices whose row
  // length is not a multiple of 32 keep their file dtype. Takes precedence over weights_to_f32.
  WeightQuantization quantize = WeightQuantization::kNone;
  // Tensor parallelism (Megatron splits): this process/thread holds shard `tp_rank` of
  // `tp_size`. q/k/v and gate/up are split by output rows (whole heads; KV heads too), o and
  // down by input columns, and each of those two is followed by an all-reduce over `comm`.
  // Embedding, norms and lm_head are replicated, so every rank returns the full logits.
  // n_heads, n_heads_kv and intermediate_size must be divisible by tp_size; with tp_size > 1,
  // `comm` (not owned; must outlive the model) must have size tp_size and rank tp_rank.
  // tp_size == 1 runs exactly the unsharded forward (no collectives).
  int tp_rank = 0;
  int tp_size = 1;
  Communicator* comm = nullptr;
};

// Not thread-safe: Forward reuses scratch buffers; one thread drives a model at a time.
class LlamaModel {
 public:
  // Loads `model_dir` (config.json + safetensors). Errors name the file and tensor at fault.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(const std::string& model_dir, Backend& backend,
                                                          const ModelLoadOptions& options = {});
  ~LlamaModel();

  const ModelConfig& config() const { return config_; }
  Backend& backend() { return backend_; }
  // Bytes of weights read by one forward (for bandwidth figures; this shard's under TP).
  int64_t weight_bytes() const { return weight_bytes_; }
  int tp_rank() const { return tp_rank_; }
  int tp_size() const { return tp_size_; }

  // A KV cache shaped for this model (this shard's KV heads under TP) with `n_blocks` blocks of `block_size` tokens.
  // `kv_dtype`: KvCacheOptions::dtype (F32, or F16 where the backend supports it).
  absl::StatusOr<std::unique_ptr<KvCache>> CreateKvCache(int n_blocks, int block_size = 16,
                                                         DType kv_dtype = DType::kF32) const;

  // Runs the steps in one batched forward. Under TP every rank must call Forward with the
  // same steps (rank 0 broadcasts them), since the forward runs collectives. Appends each step's nodes to its sequence in `kv`
  // (positions Length .. Length + n - 1, in node order); callers then CommitPath/Truncate.
  // INVALID_ARGUMENT for unknown sequences, bad token ids or parents, duplicate sequences;
  // RESOURCE_EXHAUSTED when the cache lacks blocks (then nothing is appended).
  absl::Status Forward(absl::Span<const SequenceStep> steps, KvCache& kv, ForwardResult* result);

 private:
  struct Layer;
  LlamaModel(Backend& backend, ModelConfig config);
  // Scratch activation `index` viewed as (rows, cols), grown on demand and reused across calls.
  absl::StatusOr<Tensor> Workspace(int index, int64_t rows, int64_t cols);

  Backend& backend_;
  ModelConfig config_;  // the whole model's shape, also under TP
  int tp_rank_ = 0;
  int tp_size_ = 1;
  Communicator* comm_ = nullptr;
  // This shard's head counts and MLP width (the whole model's when tp_size_ == 1).
  int n_heads_local_ = 0;
  int n_heads_kv_local_ = 0;
  int64_t intermediate_local_ = 0;
  RopeTables rope_;
  std::vector<Layer> layers_;
  Tensor embedding_;   // (vocab, hidden)
  Tensor final_norm_;  // (1, hidden)
  Tensor lm_head_;     // (vocab, hidden); aliases embedding_ when tied
  bool lm_head_owned_ = false;
  bool weights_owned_ = false;  // set once Load has loaded every tensor
  int64_t weight_bytes_ = 0;
  std::vector<Tensor> workspace_;
};

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_LLAMA_MODEL_H_
