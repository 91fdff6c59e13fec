// tokenizer.json loading and decoding on small hand-written files: unsupported components
// fail the load naming the component, broken files are errors (never a crash), streaming
// never splits a character, and a model directory prefers tokenizer.json.
#include <fstream>
#include <string>
#include <vector>

#include "common/engine/tokenizer/hf/hf_tokenizer.h"
#include "common/engine/tokenizer/load_tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/scoped_temp_dir.h"

namespace splitspec::engine {
namespace {

// A byte-level BPE over "é" = C3 A9 (spelled "Ã©" in GPT-2's alphabet) and a few ASCII tokens.
nlohmann::json ByteLevelTokenizer() {
  return nlohmann::json::parse(R"({
    "added_tokens": [{"id": 6, "content": "<|end|>", "special": true},
                     {"id": 7, "content": "<tool>", "special": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": {"type": "ByteLevel"},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"Ã": 0, "©": 1, "a": 2, "Ġ": 3, "Ġa": 4, "aa": 5},
              "merges": ["Ġ a", "a a"]}
  })");
}

std::unique_ptr<Tokenizer> Load(const nlohmann::json& tokenizer, const std::string& config = "") {
  auto loaded = LoadHfTokenizerFromJson(tokenizer.dump(), config);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? std::move(*loaded) : nullptr;
}

TEST(HfTokenizerTest, EncodesAddedTokensAndMerges) {
  auto t = Load(ByteLevelTokenizer(), R"({"eos_token": "<|end|>"})");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("aa a<|end|>é<tool>", false), (std::vector<int32_t>{5, 4, 6, 0, 1, 7}));
  EXPECT_EQ(t->Decode({5, 4, 6, 0, 1, 7}), "aa aé<tool>");  // special token dropped
  EXPECT_EQ(t->eos_id(), 6);
  EXPECT_EQ(t->bos_id(), -1);
  EXPECT_EQ(t->vocab_size(), 8);
}

TEST(HfTokenizerTest, StreamingHoldsBackAHalfCharacter) {
  auto t = Load(ByteLevelTokenizer());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->DecodeIncremental({2}, 0), "");  // C3 alone is half of "é"
  EXPECT_EQ(t->DecodeIncremental({2, 0}, 1), "é");
  EXPECT_EQ(t->Decode({2, 0}), "a\xEF\xBF\xBD");  // the final text shows it as U+FFFD
}

TEST(HfTokenizerTest, UnsupportedComponentsAreNamed) {
  struct Case {
    const char* field;
    const char* value;
    const char* named;
  };
  const Case cases[] = {
      {"normalizer", R"({"type": "BertNormalizer"})", "BertNormalizer"},
      {"pre_tokenizer", R"({"type": "Punctuation"})", "Punctuation"},
      {"decoder", R"({"type": "CTC"})", "CTC"},
      {"post_processor", R"({"type": "RobertaProcessing"})", "RobertaProcessing"},
      {"model", R"({"type": "WordPiece", "vocab": {}})", "WordPiece"},
      {"pre_tokenizer", R"j({"type": "Split", "pattern": {"Regex": "(?<=x)"}, "behavior": "Isolated"})j", "(?<=x)"},
  };
  for (const Case& c : cases) {
    nlohmann::json tokenizer = ByteLevelTokenizer();
    tokenizer[c.field] = nlohmann::json::parse(c.value);
    auto loaded = LoadHfTokenizerFromJson(tokenizer.dump(), "");
    ASSERT_FALSE(loaded.ok()) << c.value;
    EXPECT_NE(loaded.status().message().find(c.named), std::string::npos) << loaded.status();
  }
}

// Found by fuzzing (tests/fuzz/corpus/tokenizer_json/crash-strip-two-characters): a Strip
// decoder with a two-character content loaded, and streaming then showed text that decoding
// the whole sequence did not.
TEST(HfTokenizerTest, StripDecoderContentIsOneCharacter) {
  for (const char* content : {"  ", "", "ab"}) {
    nlohmann::json tokenizer = ByteLevelTokenizer();
    tokenizer["decoder"] = {{"type", "Strip"}, {"content", content}, {"start", 1}, {"stop", 0}};
    auto loaded = LoadHfTokenizerFromJson(tokenizer.dump(), "");
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument) << "'" << content << "'";
  }
  nlohmann::json tokenizer = ByteLevelTokenizer();
  tokenizer["decoder"] = {{"type", "Strip"}, {"content", "\xE2\x96\x81"}, {"start", 1}, {"stop", 0}};
  EXPECT_TRUE(LoadHfTokenizerFromJson(tokenizer.dump(), "").ok());
}

// Found by fuzzing (tests/fuzz/corpus/tokenizer_json/crash-strip-count-out-of-range): a Strip
// count of 5e20 was converted to int, which is undefined; counts are non-negative integers.
TEST(HfTokenizerTest, StripDecoderCountsAreNonNegativeIntegers) {
  for (const nlohmann::json& count : {nlohmann::json(5e20), nlohmann::json(-1), nlohmann::json(1.5),
                                      nlohmann::json("2"), nlohmann::json(uint64_t{1} << 40)}) {
    for (const char* key : {"start", "stop"}) {
      nlohmann::json tokenizer = ByteLevelTokenizer();
      tokenizer["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}};
      tokenizer["decoder"][key] = count;
      auto loaded = LoadHfTokenizerFromJson(tokenizer.dump(), "");
      EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument) << key << " = " << count.dump();
    }
  }
  nlohmann::json tokenizer = ByteLevelTokenizer();
  tokenizer["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", 0}, {"stop", 3}};
  EXPECT_TRUE(LoadHfTokenizerFromJson(tokenizer.dump(), "").ok());
}

// Found by fuzzing (tests/fuzz/corpus/tokenizer_json/crash-template-id-outside-vocab): a
// TemplateProcessing special token with id 5551 in a vocabulary of 11 made Encode return it.
TEST(HfTokenizerTest, TemplateProcessingIdsMustBeInTheVocabulary) {
  auto with_id = [](const nlohmann::json& id) {
    nlohmann::json tokenizer = ByteLevelTokenizer();
    tokenizer["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<|end|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<|end|>", {{"id", "<|end|>"}, {"ids", {id}}, {"tokens", {"<|end|>"}}}}}}};
    return LoadHfTokenizerFromJson(tokenizer.dump(), "");
  };
  for (const nlohmann::json& id : {nlohmann::json(5551), nlohmann::json(8), nlohmann::json(-1), nlohmann::json(2.5),
                                   nlohmann::json(1e30)}) {
    EXPECT_EQ(with_id(id).status().code(), absl::StatusCode::kInvalidArgument) << id.dump();
  }
  auto in_range = with_id(6);
  ASSERT_TRUE(in_range.ok()) << in_range.status();
  EXPECT_EQ((*in_range)->Encode("a", /*add_bos=*/true), (std::vector<int32_t>{6, 2}));
}

TEST(HfTokenizerTest, BrokenFilesAreErrors) {
  EXPECT_FALSE(LoadHfTokenizerFromJson("{not json", "").ok());
  EXPECT_FALSE(LoadHfTokenizerFromJson("[]", "").ok());
  nlohmann::json tokenizer = ByteLevelTokenizer();
  tokenizer["model"]["merges"] = nlohmann::json::array({"a zz"});
  EXPECT_FALSE(LoadHfTokenizerFromJson(tokenizer.dump(), "").ok());
  tokenizer = ByteLevelTokenizer();
  tokenizer["model"]["vocab"]["a"] = "two";
  EXPECT_FALSE(LoadHfTokenizerFromJson(tokenizer.dump(), "").ok());
  tokenizer = ByteLevelTokenizer();
  tokenizer["added_tokens"] = 5;
  EXPECT_FALSE(LoadHfTokenizerFromJson(tokenizer.dump(), "").ok());
  tokenizer = ByteLevelTokenizer();
  tokenizer["pre_tokenizer"]["add_prefix_space"] = "yes";  // wrongly typed: an error, no exception
  EXPECT_FALSE(LoadHfTokenizerFromJson(tokenizer.dump(), "").ok());
  EXPECT_FALSE(LoadHfTokenizerFromJson(ByteLevelTokenizer().dump(), "{").ok());
}

// SentencePiece-style BPE as Llama-2's tokenizer.json spells it: Prepend + Replace
// normalizers, byte fallback, TemplateProcessing with <s>, a Strip decoder.
TEST(HfTokenizerTest, SentencePieceStyleWithByteFallback) {
  nlohmann::json tokenizer = nlohmann::json::parse(R"({
    "added_tokens": [{"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                   {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}], "pair": [],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
              "vocab": {"<unk>": 0, "<s>": 1, "<0xE2>": 2, "<0x82>": 3, "<0xAC>": 4, "▁": 5, "h": 6, "i": 7,
                        "▁h": 8, "▁hi": 9},
              "merges": ["▁ h", "▁h i"]}
  })");
  auto t = Load(tokenizer, R"({"bos_token": "<s>"})");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("hi €", true), (std::vector<int32_t>{1, 9, 5, 2, 3, 4}));
  EXPECT_EQ(t->Encode("q", false), (std::vector<int32_t>{5, 0}));  // unknown without a byte token
  EXPECT_EQ(t->Decode({1, 9, 5, 2, 3, 4}), "hi €");
  EXPECT_EQ(t->bos_id(), 1);
  std::string streamed;
  std::vector<int32_t> previous = {1};
  for (int32_t id : {9, 5, 2, 3, 4}) {
    const std::string delta = t->DecodeIncremental(previous, id);
    if (id == 2 || id == 3) {
      EXPECT_EQ(delta, "") << "part of the euro sign must wait";
    }
    streamed += delta;
    previous.push_back(id);
  }
  EXPECT_EQ(streamed, "hi €");
}

// Found by fuzzing (tests/fuzz/corpus/tokenizer_json/crash-strip-leading-spaces-window): with a
// Strip over fused text, a stream that decoded only a window of recent tokens stripped that
// window's leading spaces as if they began the text, and lost spaces the whole decode keeps.
TEST(HfTokenizerTest, StreamingAStripOverFusedTextShowsWhatTheWholeDecodeShows) {
  nlohmann::json tokenizer = nlohmann::json::parse(R"({
    "added_tokens": [{"id": 0, "content": "<unk>", "special": true}],
    "normalizer": null, "pre_tokenizer": null, "post_processor": null,
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 2, "stop": 5}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true,
              "vocab": {"<unk>": 0, "▁": 1, "h": 2, "<0xC3>": 3, "<0xA9>": 4}, "merges": []}
  })");
  auto t = Load(tokenizer);
  ASSERT_NE(t, nullptr);
  // 8 spaces (more than the stream's usual window), "é", 7 spaces, "h".
  std::vector<int32_t> ids(8, 1);
  for (int32_t id : {3, 4, 1, 1, 1, 1, 1, 1, 1, 2}) ids.push_back(id);
  const std::string whole = t->Decode(ids);
  EXPECT_EQ(whole, "      \xC3\xA9       h");  // 2 leading spaces stripped, none trailing
  std::string streamed;
  std::vector<int32_t> previous;
  for (int32_t id : ids) {
    streamed += t->DecodeIncremental(previous, id);
    previous.push_back(id);
  }
  EXPECT_EQ(streamed, whole);
}

TEST(HfTokenizerTest, ModelDirectoryPrefersTokenizerJson) {
  testing::ScopedTempDir dir("hf_tokenizer_dir_");
  EXPECT_EQ(TokenizerPathInModelDir(dir.path()), dir.Join("tokenizer.model"));
  std::ofstream(dir.Join("tokenizer.json")) << ByteLevelTokenizer().dump();
  std::ofstream(dir.Join("tokenizer_config.json")) << R"({"eos_token": {"content": "<|end|>"}})";
  EXPECT_EQ(TokenizerPathInModelDir(dir.path()), dir.Join("tokenizer.json"));
  auto loaded = LoadTokenizer(dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->eos_id(), 6);
}

}  // namespace
}  // namespace splitspec::engine
