// Piece table construction and validation (see vocab.h).
#include "common/engine/tokenizer/vocab.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace splitspec::engine::tokenizer_internal {
namespace {

// Byte value of a "<0xNN>" piece, or -1 when `piece` is not of that form.
int ParseBytePiece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (const char c : piece.substr(3, 2)) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Vocab>> Vocab::Build(SpmModelProto model) {
  if (model.pieces.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError("too many pieces");
  }
  std::unique_ptr<Vocab> vocab(new Vocab(std::move(model)));
  if (absl::Status s = vocab->Index(); !s.ok()) return s;
  return vocab;
}

absl::Status Vocab::Index() {
  byte_ids_.fill(-1);
  byte_of_id_.assign(model_.pieces.size(), -1);
  std::vector<std::string> user_defined;
  float min_score = std::numeric_limits<float>::max();
  float max_score = std::numeric_limits<float>::lowest();
  for (size_t i = 0; i < model_.pieces.size(); ++i) {
    const SpmPiece& p = model_.pieces[i];
    const int32_t id = static_cast<int32_t>(i);
    const bool segmentable = p.type == PieceType::kNormal || p.type == PieceType::kUserDefined ||
                             p.type == PieceType::kUnused;
    auto& map = segmentable ? segmentable_ : reserved_;
    if (!map.emplace(p.piece, id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("piece \"", p.piece, "\" (id ", id, ") is defined twice"));
    }
    max_piece_bytes_ = std::max(max_piece_bytes_, p.piece.size());
    switch (p.type) {
      case PieceType::kNormal:
        min_score = std::min(min_score, p.score);
        max_score = std::max(max_score, p.score);
        break;
      case PieceType::kUserDefined:
        user_defined.push_back(p.piece);
        break;
      case PieceType::kUnknown:
        if (unk_id_ >= 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("two unknown pieces: ids ", unk_id_, " and ", id));
        }
        unk_id_ = id;
        break;
      case PieceType::kByte: {
        if (!model_.byte_fallback) {
          return absl::InvalidArgumentError(
              absl::StrCat("byte piece \"", p.piece, "\" in a model without byte_fallback"));
        }
        const int byte = ParseBytePiece(p.piece);
        if (byte < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("byte piece \"", p.piece, "\" (id ", id, ") is not <0xNN>"));
        }
        byte_ids_[byte] = id;
        byte_of_id_[i] = static_cast<int16_t>(byte);
        break;
      }
      default:
        break;
    }
  }
  if (unk_id_ < 0) return absl::InvalidArgumentError("model defines no unknown piece");
  if (model_.byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      if (byte_ids_[b] < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("byte_fallback is on but piece <0x%02X> is missing", b));
      }
    }
  }
  if (min_score <= max_score) {
    min_score_ = min_score;
    max_score_ = max_score;
  }
  user_defined_ = PrefixMatcher(user_defined);
  return absl::OkStatus();
}

int32_t Vocab::FindSegmentable(std::string_view text) const {
  const auto it = segmentable_.find(text);
  return it == segmentable_.end() ? -1 : it->second;
}

int32_t Vocab::PieceToId(std::string_view text) const {
  if (const auto it = reserved_.find(text); it != reserved_.end()) return it->second;
  if (const auto it = segmentable_.find(text); it != segmentable_.end()) return it->second;
  return unk_id_;
}

int Vocab::ByteOf(int32_t id) const {
  if (id < 0 || id >= size()) return -1;
  return byte_of_id_[id];
}

}  // namespace splitspec::engine::tokenizer_internal
