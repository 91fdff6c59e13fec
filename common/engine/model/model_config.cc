// Parsing and range-checking of a Hugging Face config.json into ModelConfig.
//
// Every key is checked for type and range before use, so that a corrupt or hostile config
// produces an INVALID_ARGUMENT naming the key instead of a crash or a giant allocation later.
// Features we do not implement (rope types other than llama3, activations other than silu,
// architectures other than llama/mistral/qwen2) are UNIMPLEMENTED, naming what was asked for.
#include "common/engine/model/model_config.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine {
namespace {

using Json = nlohmann::json;

// Upper bounds far above any model we serve; they exist to reject garbage, not real models.
constexpr int64_t kMaxHidden = 1 << 16;
constexpr int64_t kMaxIntermediate = 1 << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxPositions = 1 << 24;
constexpr int64_t kMaxVocab = std::numeric_limits<int32_t>::max();  // vocab < 2^31

absl::Status KeyError(const std::string& key, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat("config key '", key, "' ", problem));
}

// Checks that `it` (the value of `key`) is an integer in [lo, hi] and stores it in `out`.
absl::Status IntValue(const Json* it, const std::string& key, int64_t lo, int64_t hi,
                      int64_t* out) {
  int64_t value = 0;
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      return KeyError(key, absl::StrCat("= ", u, " is out of range [", lo, ", ", hi, "]"));
    }
    value = static_cast<int64_t>(u);
  } else if (it->is_number_integer()) {
    value = it->get<int64_t>();
  } else {
    return KeyError(key, absl::StrCat("must be an integer, got ", it->dump()));
  }
  if (value < lo || value > hi) {
    return KeyError(key, absl::StrCat("= ", value, " is out of range [", lo, ", ", hi, "]"));
  }
  *out = value;
  return absl::OkStatus();
}

// Reads an integer key into `out` if present; absent keys leave `out` untouched unless required.
absl::Status ReadInt(const Json& json, const char* key, bool required, int64_t lo, int64_t hi,
                     int64_t* out) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) {
    if (required) return KeyError(key, "is required but missing");
    return absl::OkStatus();
  }
  return IntValue(&*it, key, lo, hi, out);
}

absl::Status ReadIntAs(const Json& json, const char* key, bool required, int64_t lo, int64_t hi,
                       int* out) {
  int64_t value = *out;
  absl::Status status = ReadInt(json, key, required, lo, hi, &value);
  if (status.ok()) *out = static_cast<int>(value);
  return status;
}

// Reads a positive, finite float key no larger than `hi`.
absl::Status ReadPositiveFloat(const Json& json, const char* key, double hi, float* out) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return KeyError(key, absl::StrCat("must be a number, got ", it->dump()));
  const double value = it->get<double>();
  if (!std::isfinite(value) || value <= 0.0 || value > hi) {
    return KeyError(key, absl::StrCat("= ", value, " must be > 0 and <= ", hi));
  }
  // The engine computes in float: a value that rounds to 0 there (an rms_norm_eps of 1e-50
  // would divide by zero) is as wrong as 0 itself.
  const float stored = static_cast<float>(value);
  if (!(stored > 0.0f)) {
    return KeyError(key, absl::StrCat("= ", value, " is too small for a float (rounds to 0)"));
  }
  *out = stored;
  return absl::OkStatus();
}

absl::Status ReadBool(const Json& json, const char* key, bool* out) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean())
    return KeyError(key, absl::StrCat("must be true or false, got ", it->dump()));
  *out = it->get<bool>();
  return absl::OkStatus();
}

// bos/eos may be absent, null (no such token: -1), an integer, or (eos) a list: the first entry.
// Absent keeps Llama's default id when the vocabulary has it and means "none" otherwise, so a
// parsed config always names ids inside its vocabulary (and reads back the same when written).
absl::Status ReadTokenId(const Json& json, const char* key, int64_t vocab, int* out) {
  const auto it = json.find(key);
  if (it == json.end()) {
    if (*out >= vocab) *out = -1;
    return absl::OkStatus();
  }
  const Json* value = &*it;
  if (value->is_array()) {
    if (value->empty()) return KeyError(key, "is an empty list");
    value = &(*value)[0];
  }
  if (value->is_null()) {
    *out = -1;
    return absl::OkStatus();
  }
  if (!value->is_number_integer()) {
    return KeyError(key, absl::StrCat("must be a token id, got ", it->dump()));
  }
  int64_t id = 0;
  absl::Status status = IntValue(value, key, 0, vocab - 1, &id);
  if (!status.ok()) return status;
  *out = static_cast<int>(id);
  return absl::OkStatus();
}

absl::Status ParseRopeScaling(const Json& json, Llama3RopeScaling* scaling) {
  const auto it = json.find("rope_scaling");
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return KeyError("rope_scaling", "must be an object or null");
  const Json& rope = *it;
  // Newer configs say "rope_type", older ones "type".
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    const auto t = rope.find(key);
    if (t == rope.end()) continue;
    if (!t->is_string()) return KeyError(absl::StrCat("rope_scaling.", key), "must be a string");
    type = t->get<std::string>();
    break;
  }
  if (type.empty()) return KeyError("rope_scaling", "has no 'rope_type'");
  if (type == "default") return absl::OkStatus();  // HF's name for "no scaling"
  if (type != "llama3") {
    return absl::UnimplementedError(
        absl::StrCat("config: rope_scaling type '", type, "' is not supported (only llama3)"));
  }
  scaling->enabled = true;
  absl::Status status = ReadPositiveFloat(rope, "factor", 1e6, &scaling->factor);
  if (status.ok())
    status = ReadPositiveFloat(rope, "low_freq_factor", 1e6, &scaling->low_freq_factor);
  if (status.ok())
    status = ReadPositiveFloat(rope, "high_freq_factor", 1e6, &scaling->high_freq_factor);
  if (status.ok()) {
    status = ReadIntAs(rope, "original_max_position_embeddings", false, 1, kMaxPositions,
                       &scaling->original_max_position_embeddings);
  }
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(status.message(), " (in rope_scaling)"));
  }
  // The llama3 formula interpolates over (high - low); equal factors would divide by zero.
  if (scaling->high_freq_factor <= scaling->low_freq_factor) {
    return KeyError("rope_scaling.high_freq_factor", "must be greater than low_freq_factor");
  }
  return absl::OkStatus();
}

absl::Status ParseModelType(const Json& json, ModelConfig* config) {
  const auto it = json.find("model_type");
  if (it != json.end() && !it->is_null()) {
    if (!it->is_string()) return KeyError("model_type", "must be a string");
    config->model_type = it->get<std::string>();
  }
  if (config->model_type != "llama" && config->model_type != "mistral" &&
      config->model_type != "qwen2") {
    return absl::UnimplementedError(absl::StrCat("config: model_type '", config->model_type,
                                                 "' is not supported (llama, mistral, qwen2)"));
  }
  // Qwen2 always has q/k/v biases and its configs do not say so.
  if (config->model_type == "qwen2") config->attention_bias = true;
  const auto act = json.find("hidden_act");
  if (act != json.end() && !act->is_null() && *act != "silu") {
    return absl::UnimplementedError(
        absl::StrCat("config: hidden_act ", act->dump(), " is not supported (only silu)"));
  }
  return absl::OkStatus();
}

absl::Status ParseSizes(const Json& json, ModelConfig* c) {
  absl::Status s = ReadIntAs(json, "hidden_size", true, 1, kMaxHidden, &c->hidden_size);
  if (s.ok())
    s = ReadIntAs(json, "intermediate_size", true, 1, kMaxIntermediate, &c->intermediate_size);
  if (s.ok()) s = ReadIntAs(json, "num_hidden_layers", true, 1, kMaxLayers, &c->n_layers);
  if (s.ok()) s = ReadIntAs(json, "num_attention_heads", true, 1, kMaxHeads, &c->n_heads);
  if (s.ok()) c->n_heads_kv = c->n_heads;
  if (s.ok()) s = ReadIntAs(json, "num_key_value_heads", false, 1, kMaxHeads, &c->n_heads_kv);
  if (s.ok()) s = ReadIntAs(json, "vocab_size", true, 1, kMaxVocab, &c->vocab_size);
  if (s.ok()) {
    s = ReadIntAs(json, "max_position_embeddings", false, 1, kMaxPositions,
                  &c->max_position_embeddings);
  }
  if (!s.ok()) return s;
  c->head_dim = 0;
  s = ReadIntAs(json, "head_dim", false, 2, kMaxHeadDim, &c->head_dim);
  if (!s.ok()) return s;
  if (c->head_dim == 0) {  // not given: derived, so the heads must tile hidden_size
    if (c->hidden_size % c->n_heads != 0) {
      return KeyError(
          "num_attention_heads",
          absl::StrCat("= ", c->n_heads, " does not divide hidden_size = ", c->hidden_size));
    }
    c->head_dim = c->hidden_size / c->n_heads;
  }
  if (c->head_dim % 2 != 0 || c->head_dim > kMaxHeadDim) {
    return KeyError(
        "head_dim",
        absl::StrCat("= ", c->head_dim, " must be even and <= ", kMaxHeadDim, " (rotary pairs)"));
  }
  if (c->n_heads % c->n_heads_kv != 0) {
    return KeyError(
        "num_key_value_heads",
        absl::StrCat("= ", c->n_heads_kv, " does not divide num_attention_heads = ", c->n_heads));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text) {
  const Json json =
      Json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError("config: not valid JSON");
  if (!json.is_object()) return absl::InvalidArgumentError("config: not a JSON object");
  ModelConfig config;
  absl::Status s = ParseModelType(json, &config);
  if (s.ok()) s = ParseSizes(json, &config);
  if (s.ok()) s = ReadPositiveFloat(json, "rms_norm_eps", 1.0, &config.rms_norm_eps);
  if (s.ok()) s = ReadPositiveFloat(json, "rope_theta", 1e12, &config.rope_theta);
  if (s.ok()) s = ParseRopeScaling(json, &config.rope_scaling);
  if (s.ok()) s = ReadBool(json, "tie_word_embeddings", &config.tie_word_embeddings);
  if (s.ok()) s = ReadBool(json, "attention_bias", &config.attention_bias);
  if (s.ok() && config.model_type == "qwen2") config.attention_bias = true;
  if (s.ok()) s = ReadTokenId(json, "bos_token_id", config.vocab_size, &config.bos_token_id);
  if (s.ok()) s = ReadTokenId(json, "eos_token_id", config.vocab_size, &config.eos_token_id);
  if (!s.ok()) return s;
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open model config ", path));
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<ModelConfig> config = ParseModelConfig(text.str());
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

}  // namespace splitspec::engine
