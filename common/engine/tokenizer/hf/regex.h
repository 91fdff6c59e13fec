// The regular expressions tokenizer.json pre-tokenizers split text with (GPT-2, Llama-3, Qwen
// patterns and the like), matched over code points with Unicode categories.
//
// Supported: literals and escapes (\r \n \t \f \v \xHH \x{H..} \uHHHH, escaped punctuation),
// classes [...] / [^...] with ranges, \p{Cat} / \P{Cat} / \pL (general categories), \s \S \d
// \D \w \W, '.', groups (...) (?:...) (?i:...), lookaheads (?=...) (?!...), alternation,
// quantifiers ? * + {n} {n,} {n,m} and their lazy forms. Semantics are backtracking
// leftmost-first, as in Oniguruma (which Hugging Face tokenizers use). Anything else --
// anchors, backreferences, lookbehind, possessive quantifiers, inline flags -- is a Compile
// error naming the construct, so an unfamiliar tokenizer fails at start-up, not silently.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_REGEX_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_REGEX_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/tokenizer/hf/unicode_props.h"

namespace splitspec::engine::hf {

// Immutable after Compile(); thread-safe.
class Regex {
 public:
  static absl::StatusOr<Regex> Compile(std::string_view pattern);

  // Non-overlapping, non-empty matches scanning left to right, as [begin, end) byte offsets
  // into `text`.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

  // Implementation types, public so the compiler in regex.cc can build them.
  struct SetItem {
    enum Kind { kRange, kCategory, kNotCategory, kSpace, kNotSpace } kind;
    char32_t lo, hi;
    uint32_t mask;
    static SetItem Range(char32_t lo, char32_t hi) { return {kRange, lo, hi, 0}; }
    static SetItem Of(Kind kind, uint32_t mask = 0) { return {kind, 0, 0, mask}; }
  };
  struct CharSet {
    bool negated = false;
    bool icase = false;
    std::vector<SetItem> items;
  };
  enum class Op : uint8_t { kChar, kSet, kSplit, kJmp, kLookahead, kNegLookahead, kMatch };
  struct Inst {
    Op op;
    bool icase;
    char32_t c;
    int32_t x;  // kSplit: preferred branch; kJmp: target; kSet: set index
    int32_t y;  // kSplit: other branch; lookaheads: where to continue after the check
    static Inst Make(Op op, bool icase = false, char32_t c = 0, int32_t x = 0) { return {op, icase, c, x, 0}; }
  };

 private:
  struct Char {
    char32_t c;
    uint32_t category_mask;
    bool space;
  };
  using Stack = std::vector<std::pair<int32_t, uint32_t>>;
  bool MatchAt(int32_t pc, uint32_t pos, const std::vector<Char>& text, Stack* stack,
               uint32_t* end) const;
  bool InSet(const CharSet& set, const Char& ch) const;

  std::vector<Inst> program_;
  std::vector<CharSet> sets_;
};

}  // namespace splitspec::engine::hf

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_REGEX_H_
