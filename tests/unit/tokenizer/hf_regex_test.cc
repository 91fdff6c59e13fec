// The pre-tokenizer regex engine: the GPT-2 / Llama-3 patterns split as Oniguruma does, and
// constructs outside the supported set are compile errors, never a silent mismatch.
#include <string>
#include <vector>

#include "common/engine/tokenizer/hf/regex.h"
#include "gtest/gtest.h"

namespace splitspec::engine::hf {
namespace {

std::vector<std::string> Matches(const std::string& pattern, const std::string& text) {
  absl::StatusOr<Regex> regex = Regex::Compile(pattern);
  EXPECT_TRUE(regex.ok()) << regex.status();
  std::vector<std::string> out;
  if (!regex.ok()) return out;
  for (const auto& [begin, end] : regex->FindAll(text)) out.push_back(text.substr(begin, end - begin));
  return out;
}

constexpr char kGpt2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr char kLlama3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

TEST(HfRegexTest, Gpt2PatternKeepsOneSpaceBeforeAWord) {
  EXPECT_EQ(Matches(kGpt2, "Hello world's   end!!"),
            (std::vector<std::string>{"Hello", " world", "'s", "  ", " end", "!!"}));
}

TEST(HfRegexTest, Llama3PatternGroupsDigitsByThreeAndFoldsCase) {
  EXPECT_EQ(Matches(kLlama3, "1234567 IT'S"), (std::vector<std::string>{"123", "456", "7", " IT", "'S"}));
  EXPECT_EQ(Matches(kLlama3, "a\n\n  b"), (std::vector<std::string>{"a", "\n\n", " ", " b"}));
}

TEST(HfRegexTest, UnicodeCategoriesCoverOtherScripts) {
  EXPECT_EQ(Matches("\\p{L}+|\\p{N}+", "日本語٣٤x"), (std::vector<std::string>{"日本語", "٣٤", "x"}));
  EXPECT_EQ(Matches("\\s+", "a\u00a0\u3000b"), (std::vector<std::string>{"\u00a0\u3000"}));
}

TEST(HfRegexTest, QuantifiersAndLookaheads) {
  EXPECT_EQ(Matches("a{2,3}", "aaaaaaa"), (std::vector<std::string>{"aaa", "aaa"}));
  EXPECT_EQ(Matches("a+?b", "aaab"), (std::vector<std::string>{"aaab"}));
  EXPECT_EQ(Matches("x(?=y)", "xz xy"), (std::vector<std::string>{"x"}));
  EXPECT_EQ(Matches("[a-c]+|[^a-c ]", "abcd e"), (std::vector<std::string>{"abc", "d", "e"}));
}

TEST(HfRegexTest, UnsupportedConstructsAreErrorsNamingThem) {
  for (const char* pattern : {"^a", "a$", "(?<=a)b", "a++", "\\p{Xx}", "(a", "a)", "[a", "*a", "(?:a*)*", "\\k"}) {
    absl::StatusOr<Regex> regex = Regex::Compile(pattern);
    EXPECT_FALSE(regex.ok()) << pattern;
    if (!regex.ok()) {
      EXPECT_NE(regex.status().message().find(pattern), std::string::npos) << regex.status();
    }
  }
}

}  // namespace
}  // namespace splitspec::engine::hf
