// A Tokenizer read from a Hugging Face tokenizer.json (plus the bos/eos tokens of the
// tokenizer_config.json beside it): added tokens, normalizers, pre-tokenizers, a BPE model,
// a TemplateProcessing / ByteLevel post-processor and decoders. Covers byte-level BPE files
// (GPT-2, Llama-3, Qwen) and SentencePiece-style BPE files (Llama-2, Mistral, Gemma);
// a component outside that set fails the load with an error naming it.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_HF_TOKENIZER_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_HF_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/engine/tokenizer/tokenizer.h"

namespace splitspec::engine {

// `tokenizer_config_json` may be empty (no bos/eos then, unless the post-processor adds one).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizerFromJson(std::string_view tokenizer_json,
                                                                   std::string_view tokenizer_config_json);
// Reads `path` (a tokenizer.json) and the tokenizer_config.json in the same directory, if any.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& path);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_HF_TOKENIZER_H_
