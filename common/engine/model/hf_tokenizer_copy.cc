// Copies a Hugging Face tokenizer into a random model directory (see hf_tokenizer_copy.h).
#include "common/engine/model/hf_tokenizer_copy.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/engine/tokenizer/hf/hf_tokenizer.h"

namespace splitspec::engine {

absl::Status CopyHfTokenizer(const std::string& source_dir, const std::string& out_dir, ModelConfig* config) {
  namespace fs = std::filesystem;
  const fs::path json = fs::path(source_dir) / "tokenizer.json";
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadHfTokenizer(json.string());
  if (!tokenizer.ok()) return tokenizer.status();
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    const fs::path from = fs::path(source_dir) / name;
    if (!fs::exists(from)) continue;
    std::error_code error;
    fs::copy_file(from, fs::path(out_dir) / name, fs::copy_options::overwrite_existing, error);
    if (error) return absl::InternalError(absl::StrCat("copying ", from.string(), ": ", error.message()));
  }
  config->vocab_size = (*tokenizer)->vocab_size();
  if ((*tokenizer)->bos_id() >= 0) config->bos_token_id = (*tokenizer)->bos_id();
  if ((*tokenizer)->eos_id() >= 0) config->eos_token_id = (*tokenizer)->eos_id();
  return absl::OkStatus();
}

}  // namespace splitspec::engine
