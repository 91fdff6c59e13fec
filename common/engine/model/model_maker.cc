// make-model: presets and seeded random weights.
//
// Weight scales. A Llama initialised the usual way (everything N(0, 0.02)) makes a degenerate
// random model: the residual stream stays dominated by the current token's embedding, so with
// tied embeddings the head's largest logit is the input token and greedy decoding repeats it
// forever. Instead:
//  - embedding (and lm_head) std 3/sqrt(hidden): logits spread by ~3 units, so sampling is
//    neither uniform nor one-hot;
//  - projections reading the normalised stream std 1/sqrt(fan_in): outputs of RMS ~1; q and k
//    get a gain of 2 so attention scores spread by a few units and attention picks out
//    positions (with near-uniform attention a tiny model falls into one-token loops);
//  - the two projections writing into the residual (o_proj, down_proj) scaled so that all
//    layers together add RMS ~kResidualRms: the embedding is then ~1/sqrt(hidden) of the final
//    stream, and a tied head's self-logit is no larger than a typical logit.
// Checked with a plain PyTorch forward: 48 greedy tokens from a few prompts hold 30-48 distinct
// tokens for tiny (3 seeds), small and medium.
// Norm weights are 1 + N(0, 0.1) and biases N(0, 0.1) so that a kernel ignoring them shows up
// in the reference comparisons.
#include "common/engine/model/model_maker.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/engine/model/llama_tensors.h"
#include "common/engine/model/random_weights.h"
#include "common/engine/model/safetensors.h"
#include "common/engine/model/hf_tokenizer_copy.h"
#include "common/engine/model/tokenizer_trainer.h"
#include "common/engine/sampling/seed.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine {
namespace {

constexpr float kQueryKeyGain = 2.0f;  // see the file comment
constexpr float kResidualRms = 6.0f;

struct Scale {
  float mean;
  float std;
};

Scale InitScale(const TensorSpec& spec, const ModelConfig& config) {
  const float residual = kResidualRms / std::sqrt(2.0f * static_cast<float>(config.n_layers));
  switch (spec.role) {
    case TensorRole::kEmbedding:
      return {0.0f, 3.0f / std::sqrt(static_cast<float>(config.hidden_size))};
    case TensorRole::kNorm:
      return {1.0f, 0.1f};
    case TensorRole::kBias:
      return {0.0f, 0.1f};
    case TensorRole::kProjection:
      break;
  }
  if (spec.name == "lm_head.weight") {
    return {0.0f, 3.0f / std::sqrt(static_cast<float>(config.hidden_size))};
  }
  const float fan_in_std = 1.0f / std::sqrt(static_cast<float>(spec.shape[1]));
  const bool writes_residual = spec.name.find("o_proj") != std::string::npos ||
                               spec.name.find("down_proj") != std::string::npos;
  const bool query_or_key = spec.name.find("q_proj") != std::string::npos ||
                            spec.name.find("k_proj") != std::string::npos;
  if (writes_residual) return {0.0f, fan_in_std * residual};
  return {0.0f, query_or_key ? fan_in_std * kQueryKeyGain : fan_in_std};
}

}  // namespace

absl::StatusOr<ModelConfig> PresetConfig(std::string_view preset) {
  ModelConfig c;
  c.model_type = "llama";
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  if (preset == "tiny") {
    c.hidden_size = 64, c.intermediate_size = 192, c.n_layers = 2, c.n_heads = 4, c.n_heads_kv = 2;
    c.vocab_size = 512, c.tie_word_embeddings = true;
  } else if (preset == "small") {
    c.hidden_size = 256, c.intermediate_size = 768, c.n_layers = 4, c.n_heads = 8, c.n_heads_kv = 4;
    c.vocab_size = 4096;
  } else if (preset == "medium") {
    c.hidden_size = 768, c.intermediate_size = 2048, c.n_layers = 12, c.n_heads = 12;
    c.n_heads_kv = 4, c.vocab_size = 8192;
  } else if (preset == "large") {
    // A shape whose decode is its weight reads: attention and the small ops stay a few
    // microseconds a layer while the weights grow with hidden_size squared.
    c.hidden_size = 2048, c.intermediate_size = 5632, c.n_layers = 12, c.n_heads = 16;
    c.n_heads_kv = 4, c.vocab_size = 8192;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown preset '", std::string(preset), "' (tiny, small, medium, large)"));
  }
  c.head_dim = c.hidden_size / c.n_heads;
  return c;
}

void ApplyOverrides(const MakeModelOptions& options, ModelConfig* config) {
  if (options.tie_embeddings) config->tie_word_embeddings = *options.tie_embeddings;
  if (options.attention_bias) config->attention_bias = *options.attention_bias;
  if (options.rope_llama3) {
    config->rope_scaling = Llama3RopeScaling();
    config->rope_scaling.enabled = *options.rope_llama3;
    // A short original context puts the scaled, interpolated and unscaled frequency bands all
    // inside a small model's head_dim (with theta 1e4, wavelengths run 6 .. ~2e4 positions).
    config->rope_scaling.original_max_position_embeddings = 512;
  }
}

absl::StatusOr<DType> ParseDTypeName(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  if (lower == "f32" || lower == "float32") return DType::kF32;
  if (lower == "f16" || lower == "float16") return DType::kF16;
  if (lower == "bf16" || lower == "bfloat16") return DType::kBF16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", std::string(name), "' (f32, f16, bf16)"));
}

std::vector<uint8_t> EncodeValues(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * DTypeSize(dtype));
  if (dtype == DType::kF32) {
    std::memcpy(bytes.data(), values.data(), bytes.size());  // x86: already little-endian
    return bytes;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = dtype == DType::kF16 ? F32ToF16(values[i]) : F32ToBF16(values[i]);
    bytes[2 * i] = static_cast<uint8_t>(h);
    bytes[2 * i + 1] = static_cast<uint8_t>(h >> 8);
  }
  return bytes;
}

absl::Status EnsureDirectory(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("empty output directory");
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a directory"));
  }
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    absl::Status parent = EnsureDirectory(dir.substr(0, slash));
    if (!parent.ok()) return parent;
  }
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

const char* TorchDTypeName(DType dtype) {
  return dtype == DType::kF32 ? "float32" : dtype == DType::kF16 ? "float16" : "bfloat16";
}

absl::Status WriteConfigJson(const ModelConfig& config, DType dtype, const std::string& out_dir) {
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(ModelConfigToJson(config));
  json["torch_dtype"] = TorchDTypeName(dtype);
  const std::string path = out_dir + "/config.json";
  std::ofstream out(path);
  out << json.dump(2) << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status WriteRandomModel(const ModelConfig& config, DType dtype, uint64_t seed,
                              const std::string& out_dir, const MakeProgress& progress) {
  absl::Status status = EnsureDirectory(out_dir);
  if (status.ok()) status = WriteConfigJson(config, dtype, out_dir);
  if (!status.ok()) return status;
  const std::vector<TensorSpec> specs = LlamaTensorSpecs(config);
  SafetensorsWriter writer;
  int done = 0;
  for (const TensorSpec& spec : specs) {
    int64_t n = 1;
    for (int64_t dim : spec.shape) n *= dim;
    const Scale scale = InitScale(spec, config);
    const std::vector<float> values =
        NormalValues(n, scale.mean, scale.std, NamedSeed(seed, spec.name));
    writer.Add(spec.name, dtype, spec.shape, EncodeValues(values, dtype));
    if (progress) progress(++done, static_cast<int>(specs.size()), spec.name);
  }
  return writer.WriteFile(out_dir + "/model.safetensors");
}

absl::Status MakeModel(const MakeModelOptions& options) {
  absl::StatusOr<ModelConfig> config = PresetConfig(options.preset);
  if (!config.ok()) return config.status();
  ApplyOverrides(options, &*config);
  absl::Status status = EnsureDirectory(options.out_dir);
  if (!status.ok()) return status;
  // The tokenizer first: it is the step most likely to fail (missing spm_train or corpus).
  if (!options.hf_tokenizer_dir.empty()) {
    status = CopyHfTokenizer(options.hf_tokenizer_dir, options.out_dir, &*config);
  } else {
    status = TrainTokenizer(options.corpus.empty() ? DefaultTokenizerCorpus() : options.corpus,
                            config->vocab_size, options.out_dir);
  }
  if (!status.ok()) return status;
  return WriteRandomModel(*config, options.dtype, options.seed, options.out_dir, options.progress);
}

}  // namespace splitspec::engine
