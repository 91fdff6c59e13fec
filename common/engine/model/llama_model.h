// The Llama-family decoder forward over the Backend interface: a batch of sequences, each
// feeding a tree of new tokens (a chain and a plain prefill are special cases).
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_LLAMA_MODEL_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_LLAMA_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/engine/backend.h"
#include "common/engine/kv/kv_cache.h"
#include "common/engine/model/model_config.h"

namespace splitspec::engine {

// One sequence's work in a forward. Tokens are tree nodes: parents[i] is the index of node
// i's parent among this step's nodes, -1 for a node hanging off the committed context; it
// must be < i. Empty `parents` means a chain (parents[i] = i - 1). Node i's position is
// Length(seq) + depth(i), where root nodes have depth 0.
struct SequenceStep {
  SeqId seq = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;
  std::vector<int32_t> logit_nodes;  // nodes whose logits are returned, in this order
};

struct ForwardResult {
  // Row-major (sum of logit_nodes sizes, vocab): sequence 0's rows first, in logit_nodes order.
  std::vector<float> logits;
  int32_t vocab_size = 0;
  const float* Row(int64_t i) const { return logits.data() + i * vocab_size; }
};

struct ModelLoadOptions {
  // Weights keep their file dtype (F16/BF16 halve memory traffic); set to force F32.
  bool weights_to_f32 = false;
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
  // Bytes of weights read by one forward (for bandwidth figures).
  int64_t weight_bytes() const { return weight_bytes_; }

  // A KV cache shaped for this model with `n_blocks` blocks of `block_size` tokens.
  absl::StatusOr<std::unique_ptr<KvCache>> CreateKvCache(int n_blocks, int block_size = 16) const;

  // Runs the steps in one batched forward. Appends each step's nodes to its sequence in `kv`
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
  ModelConfig config_;
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
