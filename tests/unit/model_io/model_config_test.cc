// config.json parsing: defaults, the variants real checkpoints use, every range check (with the
// status code and the key named in the message), and the ModelConfigToJson round trip.
#include "common/engine/model/model_config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/unit/model_io/test_files.h"

namespace splitspec::engine {
namespace {

using Json = nlohmann::json;

// A TinyLlama-1.1B config as published (trimmed of keys we ignore).
Json TinyLlamaJson() {
  return Json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
    "num_attention_heads": 32, "num_key_value_heads": 4, "vocab_size": 32000,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "rope_scaling": null, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2,
    "torch_dtype": "bfloat16", "initializer_range": 0.02, "use_cache": true})");
}

absl::StatusOr<ModelConfig> Parse(const Json& json) { return ParseModelConfig(json.dump()); }

TEST(ModelConfigTest, ParsesTinyLlama) {
  absl::StatusOr<ModelConfig> c = Parse(TinyLlamaJson());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_type, "llama");
  EXPECT_EQ(c->hidden_size, 2048);
  EXPECT_EQ(c->intermediate_size, 5632);
  EXPECT_EQ(c->n_layers, 22);
  EXPECT_EQ(c->n_heads, 32);
  EXPECT_EQ(c->n_heads_kv, 4);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->vocab_size, 32000);
  EXPECT_EQ(c->max_position_embeddings, 2048);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->rope_theta, 10000.0f);
  EXPECT_FALSE(c->rope_scaling.enabled);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_id, 2);
}

TEST(ModelConfigTest, DefaultsForOptionalKeys) {
  const Json json = Json::parse(R"({"hidden_size": 96, "intermediate_size": 128,
      "num_hidden_layers": 1, "num_attention_heads": 6, "vocab_size": 100})");
  absl::StatusOr<ModelConfig> c = Parse(json);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_heads_kv, 6);  // no GQA unless said
  EXPECT_EQ(c->head_dim, 16);   // 96 / 6
  EXPECT_EQ(c->model_type, "llama");
  EXPECT_FALSE(c->rope_scaling.enabled);
}

TEST(ModelConfigTest, ExplicitHeadDimNeedNotTileHidden) {
  Json json = TinyLlamaJson();
  json["hidden_size"] = 5120;  // Mistral-NeMo style: 32 heads x 128 != 5120
  json["head_dim"] = 128;
  absl::StatusOr<ModelConfig> c = Parse(json);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 128);
}

TEST(ModelConfigTest, EosListTakesFirstAndNullMeansNone) {
  Json json = TinyLlamaJson();
  json["eos_token_id"] = {7, 9, 11};
  json["bos_token_id"] = nullptr;
  absl::StatusOr<ModelConfig> c = Parse(json);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eos_token_id, 7);
  EXPECT_EQ(c->bos_token_id, -1);
}

// Found by fuzzing (tests/fuzz/corpus/model_config/crash-default-ids-outside-vocab): the default
// ids 1 and 2 outside a tiny vocabulary were kept, so the config did not read back once written.
TEST(ModelConfigTest, AbsentTokenIdsOutsideTheVocabularyMeanNone) {
  Json json = TinyLlamaJson();
  json.erase("bos_token_id");
  json.erase("eos_token_id");
  json["vocab_size"] = 2;
  absl::StatusOr<ModelConfig> c = Parse(json);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->bos_token_id, 1);  // inside the vocabulary: Llama's default
  EXPECT_EQ(c->eos_token_id, -1);  // outside it: none
  absl::StatusOr<ModelConfig> again = ParseModelConfig(ModelConfigToJson(*c));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->bos_token_id, 1);
  EXPECT_EQ(again->eos_token_id, -1);
}

// Found by fuzzing (tests/fuzz/corpus/model_config/crash-eps-rounds-to-zero): a positive
// double that rounds to 0 as a float was accepted as rms_norm_eps.
TEST(ModelConfigTest, PositiveValuesThatRoundToZeroAsFloatAreRefused) {
  for (const char* key : {"rms_norm_eps", "rope_theta"}) {
    Json json = TinyLlamaJson();
    json[key] = 2e-65;
    absl::StatusOr<ModelConfig> c = Parse(json);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status();
  }
}

TEST(ModelConfigTest, Qwen2ImpliesAttentionBias) {
  Json json = TinyLlamaJson();
  json["model_type"] = "qwen2";
  json["tie_word_embeddings"] = true;
  absl::StatusOr<ModelConfig> c = Parse(json);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->attention_bias);
  EXPECT_TRUE(c->tie_word_embeddings);
}

TEST(ModelConfigTest, MistralAcceptedOtherArchitecturesNot) {
  Json json = TinyLlamaJson();
  json["model_type"] = "mistral";
  json["sliding_window"] = 4096;
  EXPECT_TRUE(Parse(json).ok());
  json["model_type"] = "gpt2";
  absl::StatusOr<ModelConfig> c = Parse(json);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("gpt2"), std::string::npos) << c.status();
}

TEST(ModelConfigTest, Llama3RopeScalingUnderEitherKey) {
  for (const char* type_key : {"rope_type", "type"}) {
    Json json = TinyLlamaJson();
    json["rope_theta"] = 500000.0;
    json["rope_scaling"] = {{type_key, "llama3"},
                            {"factor", 32.0},
                            {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0},
                            {"original_max_position_embeddings", 8192}};
    absl::StatusOr<ModelConfig> c = Parse(json);
    ASSERT_TRUE(c.ok()) << type_key << ": " << c.status();
    EXPECT_TRUE(c->rope_scaling.enabled);
    EXPECT_FLOAT_EQ(c->rope_scaling.factor, 32.0f);
    EXPECT_FLOAT_EQ(c->rope_scaling.low_freq_factor, 1.0f);
    EXPECT_FLOAT_EQ(c->rope_scaling.high_freq_factor, 4.0f);
    EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
    EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  }
}

TEST(ModelConfigTest, OtherRopeTypesAreUnimplementedAndNamed) {
  for (const char* type : {"linear", "dynamic", "yarn"}) {
    Json json = TinyLlamaJson();
    json["rope_scaling"] = {{"type", type}, {"factor", 2.0}};
    absl::StatusOr<ModelConfig> c = Parse(json);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented) << type;
    EXPECT_NE(c.status().message().find(type), std::string::npos) << c.status();
  }
}

TEST(ModelConfigTest, NonSiluActivationIsUnimplemented) {
  Json json = TinyLlamaJson();
  json["hidden_act"] = "gelu";
  absl::StatusOr<ModelConfig> c = Parse(json);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("gelu"), std::string::npos) << c.status();
}

struct BadCase {
  const char* description;
  const char* key;  // key to set (dotted: inside rope_scaling), or to erase
  Json value;       // null Json with erase=true removes the key
  bool erase;
  const char* expect_in_message;
};

TEST(ModelConfigTest, OutOfRangeValuesAreInvalidArgumentNamingTheKey) {
  const Json llama3 = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  const std::vector<BadCase> cases = {
      {"zero hidden", "hidden_size", 0, false, "hidden_size"},
      {"negative hidden", "hidden_size", -64, false, "hidden_size"},
      {"huge hidden", "hidden_size", 1LL << 40, false, "hidden_size"},
      {"hidden beyond int64", "hidden_size", Json(18446744073709551615ULL), false, "hidden_size"},
      {"string hidden", "hidden_size", "2048", false, "hidden_size"},
      {"fractional hidden", "hidden_size", 2048.5, false, "hidden_size"},
      {"missing hidden", "hidden_size", nullptr, true, "hidden_size"},
      {"zero layers", "num_hidden_layers", 0, false, "num_hidden_layers"},
      {"too many layers", "num_hidden_layers", 100000, false, "num_hidden_layers"},
      {"zero intermediate", "intermediate_size", 0, false, "intermediate_size"},
      {"heads do not divide hidden", "num_attention_heads", 30, false, "num_attention_heads"},
      {"kv heads do not divide heads", "num_key_value_heads", 5, false, "num_key_value_heads"},
      {"zero kv heads", "num_key_value_heads", 0, false, "num_key_value_heads"},
      {"zero vocab", "vocab_size", 0, false, "vocab_size"},
      {"vocab 2^31", "vocab_size", 1LL << 31, false, "vocab_size"},
      {"zero eps", "rms_norm_eps", 0.0, false, "rms_norm_eps"},
      {"negative eps", "rms_norm_eps", -1e-6, false, "rms_norm_eps"},
      {"string eps", "rms_norm_eps", "1e-5", false, "rms_norm_eps"},
      {"zero theta", "rope_theta", 0.0, false, "rope_theta"},
      {"negative theta", "rope_theta", -10000.0, false, "rope_theta"},
      {"zero positions", "max_position_embeddings", 0, false, "max_position_embeddings"},
      {"odd head_dim", "head_dim", 63, false, "head_dim"},
      {"eos beyond vocab", "eos_token_id", 32000, false, "eos_token_id"},
      {"negative bos", "bos_token_id", -5, false, "bos_token_id"},
      {"empty eos list", "eos_token_id", Json::array(), false, "eos_token_id"},
      {"non-bool tie", "tie_word_embeddings", "yes", false, "tie_word_embeddings"},
      {"rope_scaling not an object", "rope_scaling", 3, false, "rope_scaling"},
      {"rope_scaling without type", "rope_scaling", {{"factor", 2.0}}, false, "rope_scaling"},
      {"llama3 zero factor", "rope_scaling.factor", 0.0, false, "factor"},
      {"llama3 high <= low", "rope_scaling.high_freq_factor", 1.0, false, "high_freq_factor"},
      {"llama3 zero original", "rope_scaling.original_max_position_embeddings", 0, false,
       "original_max_position_embeddings"},
  };
  for (const BadCase& bad : cases) {
    Json json = TinyLlamaJson();
    json["rope_scaling"] = llama3;
    const std::string key = bad.key;
    Json* target = &json;
    std::string leaf = key;
    if (key.rfind("rope_scaling.", 0) == 0) {
      target = &json["rope_scaling"];
      leaf = key.substr(std::string("rope_scaling.").size());
    }
    if (bad.erase) {
      target->erase(leaf);
    } else {
      (*target)[leaf] = bad.value;
    }
    absl::StatusOr<ModelConfig> c = Parse(json);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad.description;
    EXPECT_NE(c.status().message().find(bad.expect_in_message), std::string::npos)
        << bad.description << ": " << c.status();
  }
}

TEST(ModelConfigTest, MalformedJsonIsInvalidArgument) {
  for (const char* text : {"", "{", "[1, 2]", "\"llama\"", "{\"hidden_size\": }"}) {
    absl::StatusOr<ModelConfig> c = ParseModelConfig(text);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(ModelConfigTest, ToJsonRoundTrips) {
  ModelConfig config;
  config.model_type = "llama";
  config.hidden_size = 96;
  config.intermediate_size = 200;
  config.n_layers = 3;
  config.n_heads = 6;
  config.n_heads_kv = 2;
  config.head_dim = 16;
  config.vocab_size = 777;
  config.max_position_embeddings = 1234;
  config.rms_norm_eps = 1e-6f;
  config.rope_theta = 500000.0f;
  config.rope_scaling.enabled = true;
  config.rope_scaling.factor = 8.0f;
  config.rope_scaling.low_freq_factor = 1.5f;
  config.rope_scaling.high_freq_factor = 4.25f;
  config.rope_scaling.original_max_position_embeddings = 300;
  config.tie_word_embeddings = true;
  config.attention_bias = true;
  config.bos_token_id = 5;
  config.eos_token_id = 6;
  const std::string text = ModelConfigToJson(config);
  absl::StatusOr<ModelConfig> back = ParseModelConfig(text);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << text;
  EXPECT_EQ(back->hidden_size, 96);
  EXPECT_EQ(back->intermediate_size, 200);
  EXPECT_EQ(back->n_layers, 3);
  EXPECT_EQ(back->n_heads, 6);
  EXPECT_EQ(back->n_heads_kv, 2);
  EXPECT_EQ(back->head_dim, 16);
  EXPECT_EQ(back->vocab_size, 777);
  EXPECT_EQ(back->max_position_embeddings, 1234);
  EXPECT_EQ(back->rms_norm_eps, 1e-6f);  // exact: floats survive the decimal text
  EXPECT_EQ(back->rope_theta, 500000.0f);
  EXPECT_TRUE(back->rope_scaling.enabled);
  EXPECT_EQ(back->rope_scaling.factor, 8.0f);
  EXPECT_EQ(back->rope_scaling.low_freq_factor, 1.5f);
  EXPECT_EQ(back->rope_scaling.high_freq_factor, 4.25f);
  EXPECT_EQ(back->rope_scaling.original_max_position_embeddings, 300);
  EXPECT_TRUE(back->tie_word_embeddings);
  EXPECT_TRUE(back->attention_bias);
  EXPECT_EQ(back->bos_token_id, 5);
  EXPECT_EQ(back->eos_token_id, 6);
  // Readable decimals, as Hugging Face writes them.
  EXPECT_NE(text.find("1e-06"), std::string::npos) << text;
}

TEST(ModelConfigTest, LoadNamesTheFile) {
  const std::string dir = testing::FreshDir();
  absl::StatusOr<ModelConfig> missing = LoadModelConfig(dir + "/config.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir), std::string::npos) << missing.status();

  Json json = TinyLlamaJson();
  json["vocab_size"] = -3;
  testing::WriteBytes(dir + "/config.json", json.dump());
  absl::StatusOr<ModelConfig> bad = LoadModelConfig(dir + "/config.json");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(dir + "/config.json"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("vocab_size"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace splitspec::engine
