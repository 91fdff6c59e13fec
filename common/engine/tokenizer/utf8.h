// UTF-8 helpers with SentencePiece's exact notion of validity (surrogates, overlong forms and
// code points past U+10FFFF are invalid; an invalid sequence is consumed one byte at a time).
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_UTF8_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_UTF8_H_

#include <cstddef>
#include <string_view>

namespace splitspec::engine::tokenizer_internal {

// U+FFFD REPLACEMENT CHARACTER.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";
// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's whitespace marker.
inline constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";

// Length of the character starting at text[0], judged from the lead byte alone (as
// SentencePiece segments its input), clipped to text.size(). `text` must not be empty.
size_t OneCharLen(std::string_view text);

// Whether `text` starts with a valid UTF-8 character; `*length` gets its length, or 1 when
// invalid. A literal U+FFFD counts as valid. `text` must not be empty.
bool DecodeValidUtf8Prefix(std::string_view text, size_t* length);

// Whether `text` is a proper prefix of some valid UTF-8 character (a character cut short).
bool IsIncompleteUtf8(std::string_view text);

}  // namespace splitspec::engine::tokenizer_internal

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_UTF8_H_
