// LlamaTensorSpecs: the Hugging Face LlamaForCausalLM / Qwen2ForCausalLM state-dict layout.
#include "common/engine/model/llama_tensors.h"

#include "absl/strings/str_cat.h"

namespace splitspec::engine {

std::string LayerTensorName(int layer, const char* suffix) {
  return absl::StrCat("model.layers.", layer, ".", suffix);
}

std::vector<TensorSpec> LlamaTensorSpecs(const ModelConfig& config) {
  const int64_t hidden = config.hidden_size;
  const int64_t q_dim = static_cast<int64_t>(config.n_heads) * config.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(config.n_heads_kv) * config.head_dim;
  const int64_t inter = config.intermediate_size;
  std::vector<TensorSpec> specs;
  specs.push_back(
      {"model.embed_tokens.weight", {config.vocab_size, hidden}, TensorRole::kEmbedding});
  for (int i = 0; i < config.n_layers; ++i) {
    auto add = [&](const char* suffix, std::vector<int64_t> shape, TensorRole role) {
      specs.push_back({LayerTensorName(i, suffix), std::move(shape), role, i});
    };
    add("input_layernorm.weight", {hidden}, TensorRole::kNorm);
    add("self_attn.q_proj.weight", {q_dim, hidden}, TensorRole::kProjection);
    add("self_attn.k_proj.weight", {kv_dim, hidden}, TensorRole::kProjection);
    add("self_attn.v_proj.weight", {kv_dim, hidden}, TensorRole::kProjection);
    if (config.attention_bias) {
      add("self_attn.q_proj.bias", {q_dim}, TensorRole::kBias);
      add("self_attn.k_proj.bias", {kv_dim}, TensorRole::kBias);
      add("self_attn.v_proj.bias", {kv_dim}, TensorRole::kBias);
    }
    add("self_attn.o_proj.weight", {hidden, q_dim}, TensorRole::kProjection);
    add("post_attention_layernorm.weight", {hidden}, TensorRole::kNorm);
    add("mlp.gate_proj.weight", {inter, hidden}, TensorRole::kProjection);
    add("mlp.up_proj.weight", {inter, hidden}, TensorRole::kProjection);
    add("mlp.down_proj.weight", {hidden, inter}, TensorRole::kProjection);
  }
  specs.push_back({"model.norm.weight", {hidden}, TensorRole::kNorm});
  if (!config.tie_word_embeddings) {
    specs.push_back({"lm_head.weight", {config.vocab_size, hidden}, TensorRole::kProjection});
  }
  return specs;
}

}  // namespace splitspec::engine
