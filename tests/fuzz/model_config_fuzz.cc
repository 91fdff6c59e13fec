// Fuzz target: config.json text. Parsing returns an error or a config whose sizes are usable
// (positive, heads dividing evenly) and which survives writing back to JSON unchanged.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/engine/model/model_config.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using splitspec::engine::ModelConfig;

bool SameConfig(const ModelConfig& a, const ModelConfig& b) {
  return a.model_type == b.model_type && a.hidden_size == b.hidden_size &&
         a.intermediate_size == b.intermediate_size && a.n_layers == b.n_layers && a.n_heads == b.n_heads &&
         a.n_heads_kv == b.n_heads_kv && a.head_dim == b.head_dim && a.vocab_size == b.vocab_size &&
         a.max_position_embeddings == b.max_position_embeddings && a.rms_norm_eps == b.rms_norm_eps &&
         a.rope_theta == b.rope_theta && a.rope_scaling.enabled == b.rope_scaling.enabled &&
         a.tie_word_embeddings == b.tie_word_embeddings && a.attention_bias == b.attention_bias &&
         a.bos_token_id == b.bos_token_id && a.eos_token_id == b.eos_token_id;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ModelConfig> config = splitspec::engine::ParseModelConfig(text);
  if (!config.ok()) return 0;
  FUZZ_CHECK(config->hidden_size > 0 && config->intermediate_size > 0 && config->n_layers > 0);
  FUZZ_CHECK(config->n_heads > 0 && config->n_heads_kv > 0 && config->head_dim > 0);
  FUZZ_CHECK(config->n_heads % config->n_heads_kv == 0);
  FUZZ_CHECK(config->vocab_size > 0 && config->max_position_embeddings > 0);
  absl::StatusOr<ModelConfig> again = splitspec::engine::ParseModelConfig(splitspec::engine::ModelConfigToJson(*config));
  FUZZ_CHECK_OK(again);
  FUZZ_CHECK(SameConfig(*config, *again));
  return 0;
}
