// Tokenizer format selection (see load_tokenizer.h).
#include "common/engine/tokenizer/load_tokenizer.h"

#include <filesystem>

#include "common/engine/tokenizer/hf/hf_tokenizer.h"

namespace splitspec::engine {

std::string TokenizerPathInModelDir(const std::string& dir) {
  const std::filesystem::path json = std::filesystem::path(dir) / "tokenizer.json";
  if (std::filesystem::exists(json)) return json.string();
  return (std::filesystem::path(dir) / "tokenizer.model").string();
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return LoadTokenizer(TokenizerPathInModelDir(path));
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) return LoadHfTokenizer(path);
  return Tokenizer::LoadFromFile(path);
}

}  // namespace splitspec::engine
