// Random Llama model directories for tests and benchmarks (`splitspec make-model`): presets,
// seeded weights in Hugging Face layout, config.json and a trained tokenizer.model.
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_MODEL_MAKER_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_MODEL_MAKER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/engine/dtype.h"
#include "common/engine/model/model_config.h"

namespace splitspec::engine {

// Called once per tensor written: (tensors done, tensors in all, name of the last one).
using MakeProgress = std::function<void(int done, int total, const std::string& name)>;

struct MakeModelOptions {
  std::string preset = "tiny";  // tiny | small | medium
  std::string out_dir;
  DType dtype = DType::kF32;
  uint64_t seed = 0;
  // Overrides of the preset (unset: keep the preset's choice).
  std::optional<bool> tie_embeddings;
  std::optional<bool> attention_bias;  // Qwen2-style q/k/v biases
  std::optional<bool> rope_llama3;     // llama3 rope_scaling
  std::string corpus;                  // tokenizer corpus; empty: DefaultTokenizerCorpus()
  // A directory with a Hugging Face tokenizer.json (+ tokenizer_config.json) to copy instead
  // of training a tokenizer.model; the vocabulary is sized to it.
  std::string hf_tokenizer_dir;
  MakeProgress progress;               // optional
};

// tiny: 2 layers, hidden 64, 4 heads / 2 KV heads, tied, vocab 512 (unit tests).
// small: 4 layers, hidden 256, 8/4 heads, vocab 4096 (~5M parameters).
// medium: 12 layers, hidden 768, 12/4 heads, intermediate 2048, vocab 8192 (~88M parameters).
// large: 12 layers, hidden 2048, 16/4 heads, intermediate 5632, vocab 8192 (~574M parameters;
// for benchmarks).
// INVALID_ARGUMENT for other names.
absl::StatusOr<ModelConfig> PresetConfig(std::string_view preset);

// Applies the overrides in `options` to `config`.
void ApplyOverrides(const MakeModelOptions& options, ModelConfig* config);

// "f32" | "f16" | "bf16" (any case).
absl::StatusOr<DType> ParseDTypeName(std::string_view name);

// Writes `out_dir`/config.json (with torch_dtype) and `out_dir`/model.safetensors holding
// seeded random weights for `config`. Each tensor's values depend only on `seed` and its name.
// Scales keep a random model's logits spread out (see model_maker.cc).
absl::Status WriteRandomModel(const ModelConfig& config, DType dtype, uint64_t seed,
                              const std::string& out_dir, const MakeProgress& progress = {});

// The whole directory: preset + overrides, weights, and tokenizer.model (vocab_size pieces).
// Creates `out_dir` if needed.
absl::Status MakeModel(const MakeModelOptions& options);

// config.json's torch_dtype for a file dtype: "float32", "float16" or "bfloat16".
const char* TorchDTypeName(DType dtype);

// Writes config.json: ModelConfigToJson plus torch_dtype.
absl::Status WriteConfigJson(const ModelConfig& config, DType dtype, const std::string& out_dir);

// Creates `dir` and missing parents unless it exists as a directory.
absl::Status EnsureDirectory(const std::string& dir);

// `values` stored as `dtype`, little-endian (F16/BF16 rounded to nearest even).
std::vector<uint8_t> EncodeValues(const std::vector<float>& values, DType dtype);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_MODEL_MAKER_H_
