// tokenizer.json decoders: Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip and
// Metaspace, applied to the token strings of a decode. They produce bytes: text cut in the
// middle of a character stays cut, so the caller decides between holding back (streaming)
// and U+FFFD (final text). Any other type is a load-time error naming it.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_DECODERS_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_DECODERS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace splitspec::engine::hf {

// One token's text on its way through the decoders. Added tokens ("<|im_start|>") are plain
// text and pass the byte-level step unchanged.
struct DecodePiece {
  std::string text;
  bool added = false;
};

// Immutable after FromJson(); thread-safe.
class Decoders {
 public:
  // `config` is tokenizer.json's "decoder" value (null: token strings are concatenated).
  static absl::StatusOr<Decoders> FromJson(const nlohmann::json& config);
  std::string Apply(std::vector<DecodePiece> pieces) const;
  // True when a token's text can depend on tokens far before it: a Strip that removes leading or
  // trailing characters of text already merged across tokens (by Fuse, ByteLevel or
  // ByteFallback) strips at the start and end of the whole text, not of a window of it.
  bool DependsOnWholeText() const { return depends_on_whole_text_; }

 private:
  struct Step {
    enum Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind = kFuse;
    std::string pattern, content;  // kReplace; kStrip: content; kMetaspace: replacement
    int start = 0, stop = 0;       // kStrip
    bool prepend = true;           // kMetaspace: whether a leading marker was added
  };
  absl::Status Add(const nlohmann::json& config);
  static void ApplyStep(const Step& step, std::vector<DecodePiece>* pieces);
  bool ComputeDependsOnWholeText() const;

  std::vector<Step> steps_;
  bool depends_on_whole_text_ = false;  // computed once by FromJson: asked at every streamed token
};

}  // namespace splitspec::engine::hf

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_DECODERS_H_
