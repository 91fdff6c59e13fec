// Gives a random model a real Hugging Face tokenizer: copies tokenizer.json (and
// tokenizer_config.json, with its chat template) into the model directory and sizes the
// model's vocabulary and bos/eos ids to match.
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_HF_TOKENIZER_COPY_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_HF_TOKENIZER_COPY_H_

#include <string>

#include "absl/status/status.h"
#include "common/engine/model/model_config.h"

namespace splitspec::engine {

// `source_dir` must hold tokenizer.json (loadable by our tokenizer); tokenizer_config.json is
// copied when present. Sets config->vocab_size, and bos/eos ids where the tokenizer has them.
absl::Status CopyHfTokenizer(const std::string& source_dir, const std::string& out_dir, ModelConfig* config);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_HF_TOKENIZER_COPY_H_
