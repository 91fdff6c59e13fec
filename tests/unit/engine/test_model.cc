#include "tests/unit/engine/test_model.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/engine/model/model_maker.h"
#include "tests/support/scoped_temp_dir.h"

namespace splitspec::engine::testing {

std::string TinyModelDir(const TestModelSpec& spec) {
  static auto* cache = new std::map<std::tuple<int, bool, bool, uint64_t>, std::string>();
  const auto key = std::make_tuple(static_cast<int>(spec.dtype), spec.attention_bias, spec.tie_embeddings, spec.seed);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  absl::StatusOr<ModelConfig> config = PresetConfig("tiny");
  EXPECT_TRUE(config.ok()) << config.status();
  config->attention_bias = spec.attention_bias;
  config->tie_word_embeddings = spec.tie_embeddings;
  // One directory per test process, removed when it exits.
  const std::string dir =
      absl::StrCat(splitspec::testing::ProcessTempDir("engine_tiny_"), "/tiny_", std::get<0>(key), "_",
                   spec.attention_bias, "_", spec.tie_embeddings, "_", spec.seed);
  const absl::Status status = WriteRandomModel(*config, spec.dtype, spec.seed, dir);
  EXPECT_TRUE(status.ok()) << status;
  (*cache)[key] = dir;
  return dir;
}

LoadedModel LoadTinyModel(const TestModelSpec& spec, int n_blocks) {
  LoadedModel loaded;
  loaded.backend = CreateCpuBackend();
  absl::StatusOr<std::unique_ptr<LlamaModel>> model = LlamaModel::Load(TinyModelDir(spec), *loaded.backend);
  EXPECT_TRUE(model.ok()) << model.status();
  loaded.model = std::move(*model);
  absl::StatusOr<std::unique_ptr<KvCache>> kv = loaded.model->CreateKvCache(n_blocks, 16, spec.kv_dtype);
  EXPECT_TRUE(kv.ok()) << kv.status();
  loaded.kv = std::move(*kv);
  return loaded;
}

std::vector<int32_t> RandomTokens(int n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return tokens;
}

std::vector<float> ChainLogits(LlamaModel& model, KvCache& kv, SeqId seq, const std::vector<int32_t>& tokens) {
  EXPECT_TRUE(kv.AddSequence(seq).ok());
  SequenceStep step;
  step.seq = seq;
  step.tokens = tokens;
  for (int32_t i = 0; i < static_cast<int32_t>(tokens.size()); ++i) step.logit_nodes.push_back(i);
  ForwardResult result;
  const absl::Status status = model.Forward({step}, kv, &result);
  EXPECT_TRUE(status.ok()) << status;
  return result.logits;
}

}  // namespace splitspec::engine::testing
