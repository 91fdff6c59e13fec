// tokenizer.json pre-tokenizers: Sequence, Split (string or regex; Removed, Isolated,
// MergedWithPrevious, MergedWithNext, Contiguous; invert), ByteLevel (GPT-2 regex and byte
// alphabet), Metaspace and Digits. Any other type is a load-time error naming it.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_PRE_TOKENIZERS_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_PRE_TOKENIZERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/tokenizer/hf/normalizers.h"
#include "nlohmann/json_fwd.hpp"

namespace splitspec::engine::hf {

// A word for the model, and whether it begins the whole input (Metaspace's "first" scheme
// prepends its marker only there).
struct PreToken {
  std::string text;
  bool at_input_start = false;
};

// Immutable after FromJson(); thread-safe.
class PreTokenizers {
 public:
  // `config` is tokenizer.json's "pre_tokenizer" value (null means the whole text is one word).
  static absl::StatusOr<PreTokenizers> FromJson(const nlohmann::json& config);
  std::vector<PreToken> Apply(PreToken text) const;

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    enum Kind { kSplit, kByteLevel, kMetaspace, kDigits } kind = kSplit;
    Pattern pattern;
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;
    bool use_regex = false;
    std::string replacement;
    enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
    bool split = true;
    bool individual_digits = false;
  };
  absl::Status Add(const nlohmann::json& config);
  static void Split(const PreToken& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                    bool invert, Behavior behavior, std::vector<PreToken>* out);
  void ApplyStep(const Step& step, PreToken piece, std::vector<PreToken>* out) const;

  std::vector<Step> steps_;
  std::shared_ptr<const Regex> gpt2_regex_;
};

}  // namespace splitspec::engine::hf

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_PRE_TOKENIZERS_H_
