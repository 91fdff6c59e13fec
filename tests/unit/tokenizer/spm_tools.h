// Test helpers that drive the SentencePiece command-line tools (spm_train, spm_encode,
// spm_decode) through files in a temporary directory, and the text lines the tests use.
#ifndef SPLITSPEC_TESTS_UNIT_TOKENIZER_SPM_TOOLS_H_
#define SPLITSPEC_TESTS_UNIT_TOKENIZER_SPM_TOOLS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/scoped_temp_dir.h"

namespace splitspec::testing {

// A fresh directory under the test temp dir, removed by the destructor.
class ScratchDir : public ScopedTempDir {
 public:
  ScratchDir() : ScopedTempDir("splitspec_tok_") {}
};

absl::StatusOr<std::string> ReadFile(const std::string& path);
absl::Status WriteFile(const std::string& path, const std::string& contents);

// Runs `spm_train` on `input` with `options` ("--model_type=bpe --vocab_size=512 ...") and
// returns the path of the .model file written under `dir` as `name`.model.
absl::StatusOr<std::string> TrainModel(const std::string& dir, const std::string& name,
                                       const std::string& input, const std::string& options);

// `spm_encode --output_format=id` on all `lines` in one call; one id list per line.
absl::StatusOr<std::vector<std::vector<int32_t>>> SpmEncodeIds(
    const std::string& dir, const std::string& model, const std::vector<std::string>& lines,
    const std::string& extra_flags = "");

// `spm_decode --input_format=id` on all `id_lines` in one call; one text per list.
absl::StatusOr<std::vector<std::string>> SpmDecodeIds(
    const std::string& dir, const std::string& model,
    const std::vector<std::vector<int32_t>>& id_lines);

// The training corpus shipped in data/text.
std::string CorpusPath();
// Lines of `path` (without the newline).
absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& path);
// Text the tokenizers were not trained on: the license texts every Debian system ships.
std::vector<std::string> LicenseLines();
// Hand-written lines aimed at byte fallback, normalization and whitespace handling.
std::vector<std::string> TrickyLines();

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_UNIT_TOKENIZER_SPM_TOOLS_H_
