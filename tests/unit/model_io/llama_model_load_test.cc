// A model directory that is bad in one way fails LlamaModel::Load with the expected status
// (never a crash), and the message names the file and the tensor or key at fault.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/engine/backend.h"
#include "common/engine/model/llama_model.h"
#include "common/engine/model/model_maker.h"
#include "common/engine/model/safetensors.h"
#include "nlohmann/json.hpp"
#include "tests/unit/model_io/test_files.h"

namespace splitspec::engine {
namespace {

using testing::FreshDir;
using testing::ReadBytes;
using testing::WriteBytes;

// A tiny model (untied head, q/k/v biases) without tokenizer: Load reads only config + weights.
std::string GoodModelDir() {
  absl::StatusOr<ModelConfig> config = PresetConfig("tiny");
  EXPECT_TRUE(config.ok());
  config->tie_word_embeddings = false;
  config->attention_bias = true;
  const std::string dir = FreshDir();
  EXPECT_TRUE(WriteRandomModel(*config, DType::kF16, 4, dir).ok());
  return dir;
}

// Rewrites `dir`/model.safetensors through `edit`, which may drop or replace tensors.
void RewriteCheckpoint(const std::string& dir,
                       const std::function<bool(const TensorView&, SafetensorsWriter*)>& edit) {
  std::vector<std::string> names;
  std::vector<std::pair<TensorView, std::vector<uint8_t>>> tensors;
  {
    auto archive = SafetensorsArchive::OpenDirectory(dir);
    ASSERT_TRUE(archive.ok()) << archive.status();
    for (const std::string& name : (*archive)->TensorNames()) {
      TensorView view = *(*archive)->Get(name);
      tensors.emplace_back(view, std::vector<uint8_t>(view.data, view.data + view.n_bytes));
    }
  }
  SafetensorsWriter writer;
  for (auto& [view, bytes] : tensors) {
    view.data = bytes.data();  // the archive (and its mapping) is closed by now
    if (!edit(view, &writer)) writer.Add(view.name, view.dtype, view.shape, bytes);
  }
  ASSERT_TRUE(writer.WriteFile(dir + "/model.safetensors").ok());
}

absl::Status LoadStatus(const std::string& dir) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  return LlamaModel::Load(dir, *backend).status();
}

void ExpectError(const absl::Status& status, absl::StatusCode code,
                 const std::vector<std::string>& fragments) {
  EXPECT_EQ(status.code(), code) << status;
  for (const std::string& fragment : fragments) {
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << "'" << fragment << "' missing from: " << status;
  }
}

TEST(LlamaModelLoadTest, GoodDirectoryLoads) {
  EXPECT_TRUE(LoadStatus(GoodModelDir()).ok()) << LoadStatus(GoodModelDir());
}

TEST(LlamaModelLoadTest, MissingTensorIsNotFound) {
  const std::string dir = GoodModelDir();
  RewriteCheckpoint(dir, [](const TensorView& view, SafetensorsWriter*) {
    return view.name == "model.layers.1.self_attn.v_proj.bias";  // dropped
  });
  ExpectError(LoadStatus(dir), absl::StatusCode::kNotFound,
              {"model.layers.1.self_attn.v_proj.bias", dir});
}

TEST(LlamaModelLoadTest, MissingHeadWithUntiedConfigIsNotFound) {
  const std::string dir = GoodModelDir();
  RewriteCheckpoint(dir, [](const TensorView& view, SafetensorsWriter*) {
    return view.name == "lm_head.weight";
  });
  ExpectError(LoadStatus(dir), absl::StatusCode::kNotFound, {"lm_head.weight"});
}

TEST(LlamaModelLoadTest, WrongShapeIsInvalidArgument) {
  const std::string dir = GoodModelDir();
  RewriteCheckpoint(dir, [](const TensorView& view, SafetensorsWriter* writer) {
    if (view.name != "model.layers.0.mlp.down_proj.weight") return false;
    // Same bytes, transposed shape (192, 64) instead of (64, 192).
    writer->Add(view.name, view.dtype, {view.shape[1], view.shape[0]},
                std::vector<uint8_t>(view.data, view.data + view.n_bytes));
    return true;
  });
  ExpectError(LoadStatus(dir), absl::StatusCode::kInvalidArgument,
              {"model.layers.0.mlp.down_proj.weight", "[192, 64]", dir + "/model.safetensors"});
}

TEST(LlamaModelLoadTest, ConfigWithMoreLayersThanCheckpointIsNotFound) {
  const std::string dir = GoodModelDir();
  nlohmann::json config = nlohmann::json::parse(ReadBytes(dir + "/config.json"));
  config["num_hidden_layers"] = 3;
  WriteBytes(dir + "/config.json", config.dump());
  ExpectError(LoadStatus(dir), absl::StatusCode::kNotFound, {"model.layers.2."});
}

TEST(LlamaModelLoadTest, ConfigOutOfRangeIsInvalidArgumentNamingFileAndKey) {
  struct Case {
    const char* key;
    nlohmann::json value;
  };
  for (const Case& c : {Case{"vocab_size", 0}, Case{"num_key_value_heads", 3},
                        Case{"rms_norm_eps", -1.0}, Case{"hidden_size", "64"}}) {
    const std::string dir = GoodModelDir();
    nlohmann::json config = nlohmann::json::parse(ReadBytes(dir + "/config.json"));
    config[c.key] = c.value;
    WriteBytes(dir + "/config.json", config.dump());
    ExpectError(LoadStatus(dir), absl::StatusCode::kInvalidArgument, {c.key, dir + "/config.json"});
  }
}

TEST(LlamaModelLoadTest, MissingConfigIsNotFound) {
  const std::string dir = GoodModelDir();
  std::remove((dir + "/config.json").c_str());
  ExpectError(LoadStatus(dir), absl::StatusCode::kNotFound, {"config.json"});
}

TEST(LlamaModelLoadTest, TruncatedCheckpointIsDataLoss) {
  const std::string dir = GoodModelDir();
  const std::string bytes = ReadBytes(dir + "/model.safetensors");
  WriteBytes(dir + "/model.safetensors", bytes.substr(0, bytes.size() / 2));
  ExpectError(LoadStatus(dir), absl::StatusCode::kDataLoss, {dir + "/model.safetensors"});
}

TEST(LlamaModelLoadTest, BadHeaderIsInvalidArgument) {
  const std::string dir = GoodModelDir();
  WriteBytes(dir + "/model.safetensors", testing::RawSafetensors("{\"oops\"", std::string(64, 0)));
  ExpectError(LoadStatus(dir), absl::StatusCode::kInvalidArgument,
              {"not valid JSON", dir + "/model.safetensors"});
}

TEST(LlamaModelLoadTest, UnsupportedDtypeIsNamed) {
  const std::string dir = GoodModelDir();
  WriteBytes(
      dir + "/model.safetensors",
      testing::RawSafetensors(
          R"({"model.embed_tokens.weight": {"dtype": "I8", "shape": [512, 64], "data_offsets": [0, 32768]}})",
          std::string(32768, 1)));
  ExpectError(LoadStatus(dir), absl::StatusCode::kUnimplemented,
              {"I8", "model.embed_tokens.weight"});
}

}  // namespace
}  // namespace splitspec::engine
