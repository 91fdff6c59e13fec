// Random model directories and small helpers shared by the engine tests.
#ifndef SPLITSPEC_TESTS_UNIT_ENGINE_TEST_MODEL_H_
#define SPLITSPEC_TESTS_UNIT_ENGINE_TEST_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/engine/backend.h"
#include "common/engine/model/llama_model.h"

namespace splitspec::engine::testing {

struct TestModelSpec {
  DType dtype = DType::kF32;
  bool attention_bias = false;
  bool tie_embeddings = true;
  uint64_t seed = 7;
  DType kv_dtype = DType::kF32;  // the KV cache LoadTinyModel creates (KvCacheOptions::dtype)
};

// Writes (once per spec, cached for the test binary's lifetime) a `tiny`-preset model
// directory under the process's temporary directory (removed at exit) and returns its path.
std::string TinyModelDir(const TestModelSpec& spec = {});

// Loads the tiny model on a fresh CPU backend.
struct LoadedModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<KvCache> kv;
};
LoadedModel LoadTinyModel(const TestModelSpec& spec = {}, int n_blocks = 256);

// Seeded token ids in [0, vocab).
std::vector<int32_t> RandomTokens(int n, int vocab, uint64_t seed);

// Logits of every node of a chain fed to a brand-new sequence `seq` (context then `tokens`).
std::vector<float> ChainLogits(LlamaModel& model, KvCache& kv, SeqId seq, const std::vector<int32_t>& tokens);

}  // namespace splitspec::engine::testing

#endif  // SPLITSPEC_TESTS_UNIT_ENGINE_TEST_MODEL_H_
