// Trains a Llama-style SentencePiece tokenizer.model by running Debian's `spm_train` command
// (a subprocess: libsentencepiece must stay out of our processes, see BUILD_NOTES).
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_TOKENIZER_TRAINER_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_TOKENIZER_TRAINER_H_

#include <string>

#include "absl/status/status.h"

namespace splitspec::engine {

// The corpus shipped in the repository (data/text/tokenizer_corpus.txt of the source tree).
std::string DefaultTokenizerCorpus();

// Writes `out_dir`/tokenizer.model: BPE with byte fallback and Llama's trainer settings
// (identity normalisation, digits split, whitespace kept), exactly `vocab_size` pieces with
// <unk>=0, <s>=1, </s>=2. NOT_FOUND when the corpus is missing; FAILED_PRECONDITION with the
// tail of spm_train's log when it fails (e.g. a vocabulary too large for the corpus).
// Thread-compatible: concurrent calls must use different `out_dir`s.
absl::Status TrainTokenizer(const std::string& corpus, int vocab_size, const std::string& out_dir);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_TOKENIZER_TRAINER_H_
