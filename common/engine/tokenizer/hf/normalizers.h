// tokenizer.json normalizers: Sequence, NFC, NFD, NFKC, NFKD, Prepend, Replace (string or
// regex), Lowercase and Strip. Any other type is a load-time error naming it.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_NORMALIZERS_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_NORMALIZERS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/tokenizer/hf/regex.h"
#include "common/engine/tokenizer/hf/unicode_props.h"
#include "nlohmann/json_fwd.hpp"

namespace splitspec::engine::hf {

// Immutable after FromJson(); thread-safe.
class Normalizers {
 public:
  // `config` is tokenizer.json's "normalizer" value (null means none).
  static absl::StatusOr<Normalizers> FromJson(const nlohmann::json& config);
  std::string Apply(std::string text) const;

 private:
  struct Step {
    enum Kind { kForm, kPrepend, kReplace, kLowercase, kStrip } kind = kForm;
    NormalForm form = NormalForm::kNfc;
    std::string pattern;  // kReplace with a string pattern; kPrepend: the prefix
    std::string content;  // kReplace: the replacement
    std::shared_ptr<const Regex> regex;  // kReplace with a regex pattern
    bool strip_left = false, strip_right = false;
  };
  absl::Status Add(const nlohmann::json& config);
  std::vector<Step> steps_;
};

// A tokenizer.json string-or-regex pattern ({"String": s} or {"Regex": r}).
struct Pattern {
  std::string literal;
  std::shared_ptr<const Regex> regex;  // set for {"Regex": ...}
};
absl::StatusOr<Pattern> ParsePattern(const nlohmann::json& pattern, const char* where);
// Non-overlapping matches of `pattern` in `text` as [begin, end) byte offsets.
std::vector<std::pair<size_t, size_t>> FindPattern(const Pattern& pattern, std::string_view text);

}  // namespace splitspec::engine::hf

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_NORMALIZERS_H_
