// Builds the model directories the reference test runs: random `tiny` models written by
// `splitspec make-model`, and variants derived from them by editing config.json and the
// safetensors file (tied/untied head, Qwen2 q/k/v bias, llama3 rope scaling), so that every
// architectural switch is covered whatever switches make-model itself offers.
//
// Free functions without shared state: safe to call from any thread on distinct directories.
#ifndef SPLITSPEC_TESTS_REFERENCE_MODEL_VARIANTS_H_
#define SPLITSPEC_TESTS_REFERENCE_MODEL_VARIANTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace splitspec::reference {

// `cli make-model --preset tiny --out out_dir --dtype dtype --seed seed extra_flags`.
absl::Status MakeTinyModel(const std::string& cli, const std::string& out_dir, const std::string& dtype,
                           int seed, const std::string& extra_flags = "");

struct Derivation {
  nlohmann::json config_patch = nlohmann::json::object();  // RFC 7386 merge patch on config.json
  std::vector<std::string> drop_tensors;
  // Each added tensor is F32 with values N(0, add_stddev) from `seed`.
  struct NewTensor {
    std::string name;
    std::vector<int64_t> shape;
  };
  std::vector<NewTensor> add_tensors;
  float add_stddev = 0.5f;
  uint32_t seed = 7;
  // > 1: writes the tensors round-robin into model-0000i-of-0000n.safetensors shards plus a
  // model.safetensors.index.json, as Hugging Face ships larger models.
  int n_shards = 1;
};

// Copies `src_dir` to `dst_dir` (config.json, model.safetensors, tokenizer.model) with the edits.
absl::Status DeriveModel(const std::string& src_dir, const std::string& dst_dir, const Derivation& d);

// Reads `dir`/config.json.
absl::Status ReadConfig(const std::string& dir, nlohmann::json* config);

}  // namespace splitspec::reference

#endif  // SPLITSPEC_TESTS_REFERENCE_MODEL_VARIANTS_H_
