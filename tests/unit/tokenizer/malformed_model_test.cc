// Broken tokenizer.model files must give a clear absl::Status, never a crash: specific
// semantic errors, truncations, random bytes and random corruption of a real model (run this
// under -DSPLITSPEC_SANITIZE=address,undefined to catch out-of-bounds reads).
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/unit/tokenizer/model_builder.h"
#include "tests/unit/tokenizer/spm_tools.h"

namespace splitspec::testing {
namespace {

using engine::Tokenizer;

absl::Status LoadStatus(const std::string& bytes) {
  return Tokenizer::LoadFromBytes(bytes).status();
}

// Uses a tokenizer that loaded from damaged bytes: whatever it is, encoding and decoding must
// stay in bounds and produce ids of its own vocabulary.
void Exercise(const Tokenizer& t) {
  for (const char* text : {"hello world", "  tabs\tand  spaces ", "\xE6\x97\xA5\xE6\x9C\xAC \xFF",
                           "emoji \xF0\x9F\x98\x80 <s> <0x41>", ""}) {
    const std::vector<int32_t> ids = t.Encode(text, true);
    for (const int32_t id : ids) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, t.vocab_size());
    }
    std::vector<int32_t> previous;
    for (const int32_t id : ids) {
      t.DecodeIncremental(previous, id);
      previous.push_back(id);
    }
    t.Decode(ids);
  }
}

TEST(MalformedModelTest, SemanticErrorsAreNamed) {
  {
    TestModel m;
    m.pieces = {{"a", 0, kNormal}};
    const absl::Status s = LoadStatus(m.Serialize());
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(absl::StrContains(s.message(), "unknown piece")) << s;
  }
  {
    TestModel m = TestModel::WithSpecials(false);
    m.Add("a", -1);
    m.Add("a", -2);
    const absl::Status s = LoadStatus(m.Serialize());
    EXPECT_TRUE(absl::StrContains(s.message(), "defined twice")) << s;
  }
  {
    TestModel m = TestModel::WithSpecials(true);
    m.byte_fallback = false;
    const absl::Status s = LoadStatus(m.Serialize());
    EXPECT_TRUE(absl::StrContains(s.message(), "without byte_fallback")) << s;
  }
  {
    TestModel m = TestModel::WithSpecials(true);
    m.pieces.erase(m.pieces.begin() + 3 + 0x41);
    const absl::Status s = LoadStatus(m.Serialize());
    EXPECT_TRUE(absl::StrContains(s.message(), "<0x41> is missing")) << s;
  }
  {
    TestModel m = TestModel::WithSpecials(false);
    m.Add("<0xZZ>", 0, kByte);
    m.byte_fallback = true;
    EXPECT_FALSE(LoadStatus(m.Serialize()).ok());
  }
  {
    TestModel m = TestModel::WithSpecials(false);
    m.Add("", -1);
    const absl::Status s = LoadStatus(m.Serialize());
    EXPECT_TRUE(absl::StrContains(s.message(), "empty")) << s;
  }
  {
    TestModel m = TestModel::WithSpecials(false);
    m.Add("a", -1, 9);
    const absl::Status s = LoadStatus(m.Serialize());
    EXPECT_TRUE(absl::StrContains(s.message(), "unknown type")) << s;
  }
  {
    TestModel m = TestModel::WithSpecials(false);
    m.model_type = 3;  // WORD
    EXPECT_EQ(LoadStatus(m.Serialize()).code(), absl::StatusCode::kUnimplemented);
  }
  {
    TestModel m = TestModel::WithSpecials(false);
    m.model_type = 7;
    EXPECT_FALSE(LoadStatus(m.Serialize()).ok());
  }
}

TEST(MalformedModelTest, WireFormatErrors) {
  EXPECT_FALSE(LoadStatus("").ok());
  std::string varint_pieces;
  AppendVarintField(1, 5, &varint_pieces);  // pieces must be a message
  EXPECT_FALSE(LoadStatus(varint_pieces).ok());
  EXPECT_FALSE(LoadStatus(std::string("\x0A\xFF\xFF\xFF\xFF\x0F", 6)).ok());  // 4 GiB length
  EXPECT_FALSE(LoadStatus(std::string(12, '\xFF')).ok());  // endless varint
  EXPECT_FALSE(LoadStatus(std::string("\x0B", 1)).ok());   // start-group wire type
  EXPECT_FALSE(LoadStatus(std::string("\x00\x00", 2)).ok());  // field number 0
  EXPECT_EQ(Tokenizer::LoadFromFile("/nonexistent/tokenizer.model").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(MalformedModelTest, BrokenCharsmapIsRejectedOrHarmless) {
  TestModel m = TestModel::WithSpecials(true);
  m.Add("a", -1);
  m.precompiled_charsmap = "abc";  // shorter than its size header
  EXPECT_FALSE(LoadStatus(m.Serialize()).ok());
  m.precompiled_charsmap = std::string("\xFF\x00\x00\x00" "abcd", 8);  // trie past the end
  EXPECT_FALSE(LoadStatus(m.Serialize()).ok());

  // Tries of random units: offsets point anywhere. Loading may succeed; using must be safe.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const uint32_t n_units = 1 + rng() % 64;
    std::string blob(4, '\0');
    const uint32_t trie_bytes = n_units * 4;
    std::memcpy(blob.data(), &trie_bytes, 4);
    for (uint32_t i = 0; i < n_units * 4 + rng() % 16; ++i) blob.push_back(static_cast<char>(rng()));
    m.precompiled_charsmap = blob;
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::LoadFromBytes(m.Serialize());
    if (t.ok()) Exercise(**t);
  }
}

TEST(MalformedModelTest, RandomBytesAreRejected) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes(rng() % 512, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    EXPECT_FALSE(LoadStatus(bytes).ok()) << "trial " << trial;
  }
}

class TrainedModelDamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<std::string>> lines = ReadLines(CorpusPath());
    ASSERT_TRUE(lines.ok()) << lines.status();
    lines->resize(std::min<size_t>(lines->size(), 800));
    std::string text;
    for (const std::string& line : *lines) text += line + "\n";
    ASSERT_TRUE(WriteFile(dir_.path() + "/train.txt", text).ok());
    absl::StatusOr<std::string> model =
        TrainModel(dir_.path(), "damage", dir_.path() + "/train.txt",
                   "--model_type=bpe --vocab_size=400 --byte_fallback=true");
    ASSERT_TRUE(model.ok()) << model.status();
    absl::StatusOr<std::string> bytes = ReadFile(*model);
    ASSERT_TRUE(bytes.ok());
    bytes_ = *bytes;
    absl::StatusOr<std::unique_ptr<Tokenizer>> intact = Tokenizer::LoadFromBytes(bytes_);
    ASSERT_TRUE(intact.ok()) << intact.status();
    vocab_size_ = (*intact)->vocab_size();
  }

  ScratchDir dir_;
  std::string bytes_;
  int32_t vocab_size_ = 0;
};

TEST_F(TrainedModelDamageTest, TruncatedFilesFailOrLoadFewerPieces) {
  std::mt19937 rng(3);
  std::vector<size_t> cuts;
  for (size_t n = 0; n < 6000 && n < bytes_.size(); ++n) cuts.push_back(n);  // the pieces
  for (int i = 0; i < 200; ++i) cuts.push_back(rng() % bytes_.size());
  cuts.push_back(bytes_.size() - 1);
  for (const size_t n : cuts) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::LoadFromBytes(bytes_.substr(0, n));
    if (!t.ok()) continue;
    // A cut can land between two fields and leave a smaller but valid model.
    EXPECT_LE((*t)->vocab_size(), vocab_size_) << "cut at " << n;
    Exercise(**t);
  }
  // Dropping the last byte leaves the final (normalizer) field short.
  EXPECT_FALSE(LoadStatus(bytes_.substr(0, bytes_.size() - 1)).ok());
  // Cut inside the byte pieces: byte_fallback (stored after the pieces) is not yet known.
  EXPECT_FALSE(LoadStatus(bytes_.substr(0, 200)).ok());
}

TEST_F(TrainedModelDamageTest, CorruptedBytesNeverCrash) {
  std::mt19937 rng(11);
  int loaded = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string damaged = bytes_;
    const int n_changes = 1 + rng() % 4;
    for (int i = 0; i < n_changes; ++i) {
      // Favour the piece table at the front, where most of the structure is.
      const size_t pos = rng() % 2 ? rng() % std::min<size_t>(damaged.size(), 8000)
                                   : rng() % damaged.size();
      damaged[pos] = static_cast<char>(rng());
    }
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::LoadFromBytes(damaged);
    if (!t.ok()) {
      EXPECT_FALSE(t.status().message().empty());
      continue;
    }
    ++loaded;
    Exercise(**t);
  }
  // Changing a score or a character leaves a valid model: the damaged models were used.
  EXPECT_GT(loaded, 0);
}

}  // namespace
}  // namespace splitspec::testing
