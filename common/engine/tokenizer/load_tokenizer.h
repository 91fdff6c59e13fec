// Picks the tokenizer of a model: a Hugging Face tokenizer.json when the directory has one,
// else SentencePiece's tokenizer.model.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_LOAD_TOKENIZER_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_LOAD_TOKENIZER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/engine/tokenizer/tokenizer.h"

namespace splitspec::engine {

// `path` is a tokenizer.json (read as Hugging Face format: any name ending in ".json"), a
// SentencePiece model file, or a model directory (see TokenizerPathInModelDir).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

// `dir`/tokenizer.json if it exists, else `dir`/tokenizer.model.
std::string TokenizerPathInModelDir(const std::string& dir);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_LOAD_TOKENIZER_H_
