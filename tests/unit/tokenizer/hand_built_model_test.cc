// Segmentation and decoding rules checked on tiny hand-built vocabularies, where the expected
// pieces follow from the rules (merge order, tie-breaks, fallbacks) rather than from a tool.
#include <memory>
#include <string>
#include <vector>

#include "common/engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/tokenizer/model_builder.h"

namespace splitspec::testing {
namespace {

using engine::Tokenizer;
using ::testing::ElementsAre;

std::unique_ptr<Tokenizer> Load(const TestModel& model) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::LoadFromBytes(model.Serialize());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(HandBuiltBpeTest, MergesHighestScoringPairFirst) {
  TestModel m = TestModel::WithSpecials(false);
  const int a = m.Add("a", -10), b = m.Add("b", -10), c = m.Add("c", -10);
  const int ab = m.Add("ab", -2), bc = m.Add("bc", -1);
  auto t = Load(m);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("abc", false), ElementsAre(a, bc));
  EXPECT_THAT(t->Encode("ab", false), ElementsAre(ab));
  EXPECT_THAT(t->Encode("cab", false), ElementsAre(c, ab));
  EXPECT_THAT(t->Encode("ba", false), ElementsAre(b, a));
}

TEST(HandBuiltBpeTest, EqualScoresMergeLeftmostFirst) {
  TestModel m = TestModel::WithSpecials(false);
  const int a = m.Add("a", -10), b = m.Add("b", -10), c = m.Add("c", -10);
  const int ab = m.Add("ab", -1);
  m.Add("bc", -1);
  const int aa = m.Add("aa", -1);
  auto t = Load(m);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("abc", false), ElementsAre(ab, c));
  EXPECT_THAT(t->Encode("aaa", false), ElementsAre(aa, a));
  EXPECT_THAT(t->Encode("aaaaa", false), ElementsAre(aa, aa, a));
  (void)b;
}

TEST(HandBuiltBpeTest, MergedPiecesMergeAgain) {
  TestModel m = TestModel::WithSpecials(false);
  m.Add("a", -10);
  m.Add("b", -10);
  m.Add("c", -10);
  m.Add("d", -10);
  const int ab = m.Add("ab", -3), cd = m.Add("cd", -1), abcd = m.Add("abcd", -2);
  auto t = Load(m);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("abcd", false), ElementsAre(abcd));
  EXPECT_THAT(t->Encode("abcdab", false), ElementsAre(abcd, ab));
  EXPECT_THAT(t->Encode("cdcd", false), ElementsAre(cd, cd));
}

TEST(HandBuiltBpeTest, UnusedPiecesAreSplitBackIntoTheirParts) {
  TestModel m = TestModel::WithSpecials(false);
  const int a = m.Add("a", -10), b = m.Add("b", -10);
  m.Add("c", -10);
  m.Add("ab", -1, kUnused);
  const int abc = m.Add("abc", -2);
  auto t = Load(m);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("abc", false), ElementsAre(abc));  // via the unused "ab"
  EXPECT_THAT(t->Encode("ab", false), ElementsAre(a, b));
}

TEST(HandBuiltBpeTest, UserDefinedSymbolsAreMatchedWholeAndNeverMerged) {
  TestModel m = TestModel::WithSpecials(false);
  const int a = m.Add("a", -10), b = m.Add("b", -10);
  m.Add("<", -10);
  m.Add(">", -10);
  const int sep = m.Add("<sep>", 0, kUserDefined);
  const int se = m.Add("<se", 0, kUserDefined);
  m.Add("a<", -1);
  auto t = Load(m);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("a<sep>b", false), ElementsAre(a, sep, b));  // longest symbol wins
  EXPECT_THAT(t->Encode("<seb", false), ElementsAre(se, b));
}

TEST(HandBuiltBpeTest, UnknownCharactersFallBackToBytes) {
  TestModel m = TestModel::WithSpecials(true);
  const int a = m.Add("a", -10);
  auto t = Load(m);
  ASSERT_NE(t, nullptr);
  const int byte0 = 3;  // <0x00> follows <unk>, <s>, </s>
  // "é" is C3 A9 in UTF-8; an invalid byte (FF) is replaced by U+FFFD (EF BF BD) first.
  EXPECT_THAT(t->Encode("a\xC3\xA9" "a", false),
              ElementsAre(a, byte0 + 0xC3, byte0 + 0xA9, a));
  EXPECT_THAT(t->Encode("\xFF", false), ElementsAre(byte0 + 0xEF, byte0 + 0xBF, byte0 + 0xBD));
  EXPECT_EQ(t->Decode({a, byte0 + 0xC3, byte0 + 0xA9}), "a\xC3\xA9");
}

TEST(HandBuiltBpeTest, UnknownRunsBecomeOneUnkWithoutByteFallback) {
  TestModel m = TestModel::WithSpecials(false);
  const int a = m.Add("a", -10);
  auto t = Load(m);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("axyza", false), ElementsAre(a, 0, a));
  EXPECT_EQ(t->Decode({a, 0, a}), "a \xE2\x81\x87 a");
}

TEST(HandBuiltBpeTest, WhitespaceIsCollapsedAndEscaped) {
  TestModel m = TestModel::WithSpecials(false);
  m.add_dummy_prefix = true;
  m.remove_extra_whitespaces = true;
  const int space = m.Add("\xE2\x96\x81", -10);
  const int a = m.Add("a", -10), b = m.Add("b", -10);
  const int space_a = m.Add("\xE2\x96\x81" "a", -1);
  auto t = Load(m);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("  a   b ", false), ElementsAre(space_a, space, b));
  EXPECT_THAT(t->Encode("a", true), ElementsAre(1, space_a));
  EXPECT_TRUE(t->Encode("   ", false).empty());
  EXPECT_EQ(t->Decode({space_a, space, b}), "a b");
  EXPECT_EQ(t->Decode({1, space, space_a, 2}), "a");  // leading markers all dropped
  EXPECT_EQ(t->Decode({a, space_a}), "a a");
}

TEST(HandBuiltBpeTest, WhitespaceIsKeptWhenNotCollapsing) {
  TestModel m = TestModel::WithSpecials(false);
  m.add_dummy_prefix = true;
  m.remove_extra_whitespaces = false;
  const int space = m.Add("\xE2\x96\x81", -10);
  const int a = m.Add("a", -10);
  auto t = Load(m);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode(" a ", false), ElementsAre(space, space, a, space));
  // Only the dummy prefix is removed when decoding.
  EXPECT_EQ(t->Decode({space, space, a, space}), " a ");
}

TEST(HandBuiltDecodeTest, BytePiecesAreReassembledIntoCharacters) {
  TestModel m = TestModel::WithSpecials(true);
  const int a = m.Add("a", -10);
  auto t = Load(m);
  ASSERT_NE(t, nullptr);
  const int byte0 = 3;
  // U+4E00 is E4 B8 80.
  EXPECT_EQ(t->Decode({byte0 + 0xE4, byte0 + 0xB8, byte0 + 0x80}), "\xE4\xB8\x80");
  // A cut-short character shows as one U+FFFD per byte.
  EXPECT_EQ(t->Decode({byte0 + 0xE4, byte0 + 0xB8, a}), "\xEF\xBF\xBD\xEF\xBF\xBD" "a");
  EXPECT_EQ(t->Decode({1, a, 2, -5, 100000}), "a");  // control and out-of-range ids vanish

  std::vector<int32_t> ids = {byte0 + 0xE4, byte0 + 0xB8, byte0 + 0x80, a};
  std::vector<std::string> steps;
  std::vector<int32_t> previous;
  for (const int32_t id : ids) {
    steps.push_back(t->DecodeIncremental(previous, id));
    previous.push_back(id);
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"", "", "\xE4\xB8\x80", "a"}));
}

TEST(HandBuiltUnigramTest, PicksTheBestScoringSegmentation) {
  TestModel m = TestModel::WithSpecials(false);
  m.model_type = 1;
  const int a = m.Add("a", -1), b = m.Add("b", -1);
  const int ab = m.Add("ab", -1.5f);
  const int bb = m.Add("bb", -3.0f);
  auto t = Load(m);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("ab", false), ElementsAre(ab));      // -1.5 beats -2
  EXPECT_THAT(t->Encode("abb", false), ElementsAre(ab, b));  // -2.5 beats -4
  EXPECT_THAT(t->Encode("bb", false), ElementsAre(b, b));    // -2 beats -3
  EXPECT_THAT(t->Encode("xa", false), ElementsAre(0, a));
  (void)bb;
}

TEST(HandBuiltTokenizerTest, ReportsSpecialIds) {
  TestModel m = TestModel::WithSpecials(false);
  m.Add("a", -1);
  auto t = Load(m);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->vocab_size(), 4);
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_id(), 2);
  EXPECT_EQ(t->Piece(3), "a");

  TestModel no_specials;
  no_specials.pieces = {{"<unk>", 0, kUnknown}, {"a", -1, kNormal}};
  auto u = Load(no_specials);
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->bos_id(), -1);
  EXPECT_EQ(u->eos_id(), -1);
  EXPECT_THAT(u->Encode("a", true), ElementsAre(1));
}

}  // namespace
}  // namespace splitspec::testing
