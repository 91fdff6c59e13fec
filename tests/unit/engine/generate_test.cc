// GenerateTokens at the edge of the model's context: it stops where the verifier stops a
// request (a forward feeds positions below max_position_embeddings), and refuses a prompt that
// leaves no position to decode at.
#include "common/engine/generation/generate.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/engine/model/model_maker.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/unit/engine/test_model.h"

namespace splitspec::engine {
namespace {

constexpr int kContext = 12;

struct ShortContextModel {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<KvCache> kv;
};

// The tiny preset with a context of kContext positions.
ShortContextModel LoadShortContextModel() {
  absl::StatusOr<ModelConfig> config = PresetConfig("tiny");
  EXPECT_TRUE(config.ok()) << config.status();
  config->max_position_embeddings = kContext;
  const std::string dir = splitspec::testing::ProcessTempDir("generate_") + "/short_context";
  EXPECT_TRUE(WriteRandomModel(*config, DType::kF32, 5, dir).ok());
  ShortContextModel loaded;
  absl::StatusOr<std::unique_ptr<LlamaModel>> model = LlamaModel::Load(dir, *loaded.backend);
  EXPECT_TRUE(model.ok()) << model.status();
  loaded.model = std::move(*model);
  absl::StatusOr<std::unique_ptr<KvCache>> kv = loaded.model->CreateKvCache(8, 16, DType::kF32);
  EXPECT_TRUE(kv.ok()) << kv.status();
  loaded.kv = std::move(*kv);
  return loaded;
}

TEST(GenerateTest, StopsWhenTheContextIsFull) {
  ShortContextModel m = LoadShortContextModel();
  ASSERT_NE(m.model, nullptr);
  GenerateOptions options;
  options.max_tokens = 100;
  for (int prompt_length : {1, 5, kContext - 1}) {
    const std::vector<int32_t> prompt = testing::RandomTokens(prompt_length, m.model->config().vocab_size, 3);
    absl::StatusOr<std::vector<int32_t>> tokens = GenerateTokens(*m.model, *m.kv, prompt, options);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    // The prompt's forward gives one token; each further forward feeds one more position.
    EXPECT_EQ(static_cast<int>(tokens->size()), kContext - prompt_length + 1) << prompt_length;
  }
  // max_tokens short of the context still counts.
  options.max_tokens = 3;
  absl::StatusOr<std::vector<int32_t>> tokens =
      GenerateTokens(*m.model, *m.kv, testing::RandomTokens(4, m.model->config().vocab_size, 3), options);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 3u);
}

TEST(GenerateTest, APromptThatFillsTheContextIsOutOfRange) {
  ShortContextModel m = LoadShortContextModel();
  ASSERT_NE(m.model, nullptr);
  for (int prompt_length : {kContext, kContext + 5}) {
    const std::vector<int32_t> prompt = testing::RandomTokens(prompt_length, m.model->config().vocab_size, 3);
    absl::StatusOr<std::vector<int32_t>> tokens = GenerateTokens(*m.model, *m.kv, prompt, GenerateOptions{});
    EXPECT_EQ(tokens.status().code(), absl::StatusCode::kOutOfRange) << prompt_length;
    EXPECT_NE(tokens.status().message().find("context is 12"), std::string::npos) << tokens.status();
  }
  // Nothing was left behind: the next call gets the sequence and the cache it needs.
  GenerateOptions options;
  options.max_tokens = 2;
  absl::StatusOr<std::vector<int32_t>> tokens =
      GenerateTokens(*m.model, *m.kv, testing::RandomTokens(3, m.model->config().vocab_size, 3), options);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 2u);
}

}  // namespace
}  // namespace splitspec::engine
