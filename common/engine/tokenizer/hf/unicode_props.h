// Unicode character properties and normalization forms that Hugging Face tokenizer.json
// components name (\p{L}, \s, NFC, ...), answered by ICU so they follow the Unicode tables.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_UNICODE_PROPS_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_UNICODE_PROPS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace splitspec::engine::hf {

// Bit mask of a general category (ICU's U_GC_*_MASK values), e.g. GeneralCategoryMask('L').
uint32_t GeneralCategoryMaskOf(char32_t c);
// Mask for a category name as regexes write it ("L", "Lu", "N", "Nd", "P", ...); 0 if unknown.
uint32_t GeneralCategoryMaskByName(std::string_view name);
// Unicode White_Space (what \s means in the Oniguruma patterns tokenizer.json files carry).
bool IsWhiteSpace(char32_t c);
// Simple case folding, for (?i:...) groups.
char32_t FoldCase(char32_t c);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
// `text` in the given form; invalid UTF-8 is an error.
absl::StatusOr<std::string> Normalize(NormalForm form, std::string_view text);

// A decoded code point and where it sits in the UTF-8 text.
struct CodePoint {
  char32_t value;
  uint32_t byte_offset;
};
// Decodes `text`; an invalid byte becomes U+FFFD covering that one byte, so offsets still
// partition the input.
std::vector<CodePoint> DecodeUtf8(std::string_view text);
void AppendUtf8(char32_t c, std::string* out);

}  // namespace splitspec::engine::hf

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_UNICODE_PROPS_H_
