// GPT-2's byte-level alphabet: every byte gets a printable code point (printable Latin-1
// bytes keep their own, the rest take U+0100 upwards in byte order), so that byte-level BPE
// vocabularies are text.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_BYTE_LEVEL_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_BYTE_LEVEL_H_

#include <string>
#include <string_view>

namespace splitspec::engine::hf {

// Appends the byte-level spelling of `bytes` (one code point per byte, UTF-8 encoded).
void AppendByteLevel(std::string_view bytes, std::string* out);
// Appends the bytes a byte-level string spells; code points outside the alphabet are copied
// unchanged (added tokens such as "<|im_start|>" are plain text).
void AppendBytesOfByteLevel(std::string_view byte_level, std::string* out);

}  // namespace splitspec::engine::hf

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_BYTE_LEVEL_H_
