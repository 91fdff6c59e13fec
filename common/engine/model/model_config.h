// A Llama-family model's hyper-parameters, parsed from a Hugging Face config.json.
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_MODEL_CONFIG_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_MODEL_CONFIG_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace splitspec::engine {

// rope_scaling of type "llama3" (Llama-3.1+): frequencies rescaled by wavelength band.
struct Llama3RopeScaling {
  bool enabled = false;
  float factor = 8.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string model_type = "llama";  // "llama", "mistral", "qwen2"
  int hidden_size = 0;
  int intermediate_size = 0;
  int n_layers = 0;                  // num_hidden_layers
  int n_heads = 0;                   // num_attention_heads
  int n_heads_kv = 0;                // num_key_value_heads (defaults to n_heads)
  int head_dim = 0;                  // head_dim if given, else hidden_size / n_heads
  int vocab_size = 0;
  int max_position_embeddings = 2048;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  Llama3RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;       // q/k/v projections carry a bias (Qwen2)
  int bos_token_id = 1;
  int eos_token_id = 2;
};

// Parses config.json text. Every value is range-checked; errors say which key is wrong.
absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text);
// Reads and parses `path` (a config.json file).
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path);
// Serialises back to Hugging Face config.json keys (used by make-model).
std::string ModelConfigToJson(const ModelConfig& config);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_MODEL_CONFIG_H_
