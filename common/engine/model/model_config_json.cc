// Serialisation of ModelConfig back to Hugging Face config.json keys, so that the files
// make-model writes load both here and in transformers.
#include <charconv>
#include <string>

#include "common/engine/model/model_config.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine {
namespace {

// A float as the double with the same shortest decimal form (1e-5f -> 1e-05, not
// 9.999999747378752e-06), so config files stay readable and round-trip exactly to float.
double ShortestDouble(float value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::stod(std::string(buffer, result.ptr));
}

const char* Architecture(const std::string& model_type) {
  if (model_type == "mistral") return "MistralForCausalLM";
  if (model_type == "qwen2") return "Qwen2ForCausalLM";
  return "LlamaForCausalLM";
}

}  // namespace

std::string ModelConfigToJson(const ModelConfig& config) {
  nlohmann::ordered_json json;
  json["architectures"] = {Architecture(config.model_type)};
  json["model_type"] = config.model_type;
  json["hidden_act"] = "silu";
  json["hidden_size"] = config.hidden_size;
  json["intermediate_size"] = config.intermediate_size;
  json["num_hidden_layers"] = config.n_layers;
  json["num_attention_heads"] = config.n_heads;
  json["num_key_value_heads"] = config.n_heads_kv;
  json["head_dim"] = config.head_dim;
  json["vocab_size"] = config.vocab_size;
  json["max_position_embeddings"] = config.max_position_embeddings;
  json["rms_norm_eps"] = ShortestDouble(config.rms_norm_eps);
  json["rope_theta"] = ShortestDouble(config.rope_theta);
  if (config.rope_scaling.enabled) {
    json["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", ShortestDouble(config.rope_scaling.factor)},
        {"low_freq_factor", ShortestDouble(config.rope_scaling.low_freq_factor)},
        {"high_freq_factor", ShortestDouble(config.rope_scaling.high_freq_factor)},
        {"original_max_position_embeddings", config.rope_scaling.original_max_position_embeddings},
    };
  } else {
    json["rope_scaling"] = nullptr;
  }
  json["tie_word_embeddings"] = config.tie_word_embeddings;
  json["attention_bias"] = config.attention_bias;
  json["bos_token_id"] =
      config.bos_token_id >= 0 ? nlohmann::ordered_json(config.bos_token_id) : nullptr;
  json["eos_token_id"] =
      config.eos_token_id >= 0 ? nlohmann::ordered_json(config.eos_token_id) : nullptr;
  return json.dump(2) + "\n";
}

}  // namespace splitspec::engine
