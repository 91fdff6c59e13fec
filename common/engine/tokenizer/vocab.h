// The piece table of a SentencePiece model with the lookups segmentation needs, built and
// validated the way SentencePiece's ModelInterface does it (one <unk>, no duplicate pieces,
// 256 byte pieces exactly when byte_fallback is on).
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_VOCAB_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_VOCAB_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/engine/tokenizer/model_proto.h"
#include "common/engine/tokenizer/normalizer.h"

namespace splitspec::engine::tokenizer_internal {

// A piece of normalized text and the id it maps to (possibly the unknown id).
using Segment = std::pair<std::string_view, int32_t>;

// Immutable after Build(); thread-safe.
class Vocab {
 public:
  static absl::StatusOr<std::unique_ptr<Vocab>> Build(SpmModelProto model);

  const SpmModelProto& model() const { return model_; }
  int32_t size() const { return static_cast<int32_t>(model_.pieces.size()); }
  const SpmPiece& piece(int32_t id) const { return model_.pieces[id]; }
  bool IsType(int32_t id, PieceType type) const {
    return id >= 0 && id < size() && model_.pieces[id].type == type;
  }

  // Id of a NORMAL, USER_DEFINED or UNUSED piece equal to `text`, or -1: the pieces that
  // segmentation may produce.
  int32_t FindSegmentable(std::string_view text) const;
  // SentencePiece's PieceToId: control/unknown/byte pieces first, then the others, else unk.
  int32_t PieceToId(std::string_view text) const;

  int32_t unk_id() const { return unk_id_; }
  int32_t byte_id(uint8_t byte) const { return byte_ids_[byte]; }
  // Byte value of a BYTE piece id, or -1.
  int ByteOf(int32_t id) const;
  const PrefixMatcher& user_defined() const { return user_defined_; }
  // Largest piece length in bytes, bounding segmentation lookups.
  size_t max_piece_bytes() const { return max_piece_bytes_; }
  // Score range of NORMAL pieces (0 when there are none), for unigram scoring.
  float min_score() const { return min_score_; }
  float max_score() const { return max_score_; }

 private:
  explicit Vocab(SpmModelProto model) : model_(std::move(model)) {}
  absl::Status Index();

  SpmModelProto model_;
  // Keys are views into model_.pieces, which never changes after Build().
  absl::flat_hash_map<std::string_view, int32_t> segmentable_;
  absl::flat_hash_map<std::string_view, int32_t> reserved_;
  std::array<int32_t, 256> byte_ids_{};
  std::vector<int16_t> byte_of_id_;  // -1 for non-byte pieces
  PrefixMatcher user_defined_;
  int32_t unk_id_ = -1;
  size_t max_piece_bytes_ = 0;
  float min_score_ = 0.0f;
  float max_score_ = 0.0f;
};

}  // namespace splitspec::engine::tokenizer_internal

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_VOCAB_H_
