// The tensors a Hugging Face Llama-family checkpoint holds for a given config: names and shapes
// in HF's (out_features, in_features) layout. Shared by make-model (what to write) and the
// loaders (what to expect), so both agree on one list.
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_LLAMA_TENSORS_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_LLAMA_TENSORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/engine/model/model_config.h"

namespace splitspec::engine {

enum class TensorRole : uint8_t {
  kEmbedding,   // model.embed_tokens.weight      (vocab, hidden)
  kNorm,        // *_layernorm.weight, model.norm (hidden)
  kProjection,  // q/k/v/o, gate/up/down, lm_head (out, in)
  kBias,        // q/k/v bias (Qwen2)             (out)
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  TensorRole role;
  int layer = -1;  // decoder layer index; -1 for embedding, final norm and lm_head
};

// Layer-level names, e.g. LayerTensorName(3, "self_attn.q_proj.weight").
std::string LayerTensorName(int layer, const char* suffix);

// Every tensor of `config`'s checkpoint, in forward order: embedding, then per layer
// input_layernorm, q/k/v(/biases)/o, post_attention_layernorm, gate/up/down; final norm;
// lm_head unless tie_word_embeddings.
std::vector<TensorSpec> LlamaTensorSpecs(const ModelConfig& config);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_LLAMA_TENSORS_H_
