// TextStream: what a client is shown as tokens arrive. The streamed text must equal what the
// tokenizer decodes for the whole output (first token's leading space included), characters
// split over byte pieces must never be shown half, and stop strings end the text right before
// their first occurrence without ever showing a part of them.
#include "router/service/text_stream.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/unit/tokenizer/model_builder.h"

namespace splitspec::testing {
namespace {

using engine::Tokenizer;
using router::TextStream;

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's word boundary

std::string Spaces(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += kSpace;
  return out;
}

// A vocabulary with words that carry a leading space, whitespace-only pieces, punctuation
// and the 256 byte pieces (for characters outside the vocabulary).
struct Vocab {
  int bos, eos, hello, world, eight_spaces, space, bang, a, b, c;
  std::unique_ptr<Tokenizer> tokenizer;

  Vocab() {
    TestModel m = TestModel::WithSpecials(/*with_bytes=*/true);
    bos = 1;
    eos = 2;
    hello = m.Add(kSpace + "hello", -1);
    world = m.Add(kSpace + "world", -1);
    eight_spaces = m.Add(Spaces(8), -1);
    space = m.Add(kSpace, -1);
    bang = m.Add("!", -1);
    a = m.Add("a", -1);
    b = m.Add("b", -1);
    c = m.Add("c", -1);
    auto loaded = Tokenizer::LoadFromBytes(m.Serialize());
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (loaded.ok()) tokenizer = std::move(*loaded);
  }
  // Id of the byte piece <0xNN> (WithSpecials lays them out after <unk>, <s>, </s>).
  static int Byte(unsigned char value) { return 3 + value; }
};

// Everything a client sees: each Add's delta, then Flush.
std::string StreamAll(TextStream& stream, const std::vector<std::vector<int32_t>>& messages) {
  std::string shown;
  for (const auto& tokens : messages) shown += stream.Add(tokens);
  return shown + stream.Flush();
}

TEST(TextStreamTest, FirstTokenAfterThePromptKeepsItsLeadingSpace) {
  Vocab v;
  ASSERT_NE(v.tokenizer, nullptr);
  TextStream stream(v.tokenizer.get(), {v.bos, v.hello}, {});
  // Eight spaces stay eight: the prompt, not the start of the text, precedes this piece.
  EXPECT_EQ(stream.Add({v.eight_spaces}), std::string(8, ' '));
  EXPECT_EQ(stream.Add({v.world}), " world");
  EXPECT_EQ(stream.Flush(), "");
}

TEST(TextStreamTest, StreamedTextEqualsTheDecodedOutputAfterThePrompt) {
  Vocab v;
  ASSERT_NE(v.tokenizer, nullptr);
  const std::vector<int32_t> prompt = {v.bos, v.hello, v.world};
  const std::string prompt_text = v.tokenizer->Decode(prompt);
  const std::vector<int32_t> pieces = {v.hello, v.world, v.eight_spaces, v.space, v.bang, v.a, v.b, v.c,
                                       Vocab::Byte('\n')};
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::vector<int32_t>> messages;
    std::vector<int32_t> all = prompt;
    const int n_messages = 1 + static_cast<int>(rng() % 5);
    for (int m = 0; m < n_messages; ++m) {
      std::vector<int32_t> tokens;
      const int n = static_cast<int>(rng() % 4);  // empty messages happen too
      for (int i = 0; i < n; ++i) tokens.push_back(pieces[rng() % pieces.size()]);
      all.insert(all.end(), tokens.begin(), tokens.end());
      messages.push_back(tokens);
    }
    TextStream stream(v.tokenizer.get(), prompt, {});
    const std::string whole = v.tokenizer->Decode(all);
    ASSERT_EQ(whole.compare(0, prompt_text.size(), prompt_text), 0);
    EXPECT_EQ(StreamAll(stream, messages), whole.substr(prompt_text.size())) << "trial " << trial;
  }
}

TEST(TextStreamTest, CharacterSplitOverBytePiecesIsShownWhole) {
  Vocab v;
  ASSERT_NE(v.tokenizer, nullptr);
  TextStream stream(v.tokenizer.get(), {v.bos, v.hello}, {});
  // U+00E9 (é) is 0xC3 0xA9: nothing is shown until the second byte completes it.
  EXPECT_EQ(stream.Add({Vocab::Byte(0xC3)}), "");
  EXPECT_EQ(stream.Add({Vocab::Byte(0xA9)}), "\xC3\xA9");
  // U+20AC (€) in one message of three bytes.
  EXPECT_EQ(stream.Add({Vocab::Byte(0xE2), Vocab::Byte(0x82), Vocab::Byte(0xAC)}), "\xE2\x82\xAC");
}

TEST(TextStreamTest, StopStringEndsTheTextBeforeIt) {
  Vocab v;
  ASSERT_NE(v.tokenizer, nullptr);
  TextStream stream(v.tokenizer.get(), {v.bos}, {"!"});
  EXPECT_EQ(stream.Add({v.a}), "a");
  EXPECT_FALSE(stream.stopped());
  EXPECT_EQ(stream.Add({v.b, v.bang, v.c}), "b");
  EXPECT_TRUE(stream.stopped());
  // Nothing after a stop string, not even held-back text.
  EXPECT_EQ(stream.Add({v.a}), "");
  EXPECT_EQ(stream.Flush(), "");
}

TEST(TextStreamTest, PossibleStartOfAStopStringIsHeldBackUntilDecided) {
  Vocab v;
  ASSERT_NE(v.tokenizer, nullptr);
  TextStream stream(v.tokenizer.get(), {v.bos}, {"abc"});
  EXPECT_EQ(stream.Add({v.c}), "c");
  EXPECT_EQ(stream.Add({v.a}), "");   // "a" may start "abc"
  EXPECT_EQ(stream.Add({v.b}), "");   // "ab" still may
  EXPECT_EQ(stream.Add({v.a}), "ab");  // "aba": only the last "a" may still start it
  EXPECT_EQ(stream.Add({v.b}), "");
  EXPECT_EQ(stream.Add({v.bang}), "ab!");
  EXPECT_FALSE(stream.stopped());
  EXPECT_EQ(stream.Add({v.a, v.b}), "");
  // At the end of the stream the held-back text is shown.
  EXPECT_EQ(stream.Flush(), "ab");
}

TEST(TextStreamTest, StopStringSplitOverTokensMatches) {
  Vocab v;
  ASSERT_NE(v.tokenizer, nullptr);
  TextStream stream(v.tokenizer.get(), {v.bos}, {"b world"});
  EXPECT_EQ(stream.Add({v.a}), "a");
  EXPECT_EQ(stream.Add({v.b}), "");
  EXPECT_EQ(stream.Add({v.world}), "");
  EXPECT_TRUE(stream.stopped());
  EXPECT_EQ(stream.Flush(), "");
}

TEST(TextStreamTest, EarliestOfSeveralStopStringsWins) {
  Vocab v;
  ASSERT_NE(v.tokenizer, nullptr);
  TextStream stream(v.tokenizer.get(), {v.bos}, {"c", "b"});
  EXPECT_EQ(stream.Add({v.a, v.b, v.c}), "a");
  EXPECT_TRUE(stream.stopped());
}

TEST(TextStreamTest, EmptyStopStringIsIgnored) {
  Vocab v;
  ASSERT_NE(v.tokenizer, nullptr);
  TextStream stream(v.tokenizer.get(), {v.bos}, {""});
  EXPECT_EQ(stream.Add({v.a, v.b}), "ab");
  EXPECT_FALSE(stream.stopped());
  EXPECT_EQ(stream.Flush(), "");
}

TEST(TextStreamTest, WithoutStopStringsNothingIsHeldBack) {
  Vocab v;
  ASSERT_NE(v.tokenizer, nullptr);
  TextStream stream(v.tokenizer.get(), {v.bos, v.hello}, {});
  EXPECT_EQ(stream.Add({v.world}), " world");
  EXPECT_EQ(stream.Add({v.bang}), "!");
  EXPECT_EQ(stream.Flush(), "");
}

}  // namespace
}  // namespace splitspec::testing
