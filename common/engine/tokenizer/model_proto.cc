// Hand-written decoding of ModelProto: field numbers follow sentencepiece_model.proto
// (pieces = 1, trainer_spec = 2, normalizer_spec = 3, denormalizer_spec = 5). Unknown fields
// are skipped, as protobuf itself does, so files from newer SentencePiece versions load.
#include "common/engine/tokenizer/model_proto.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/engine/tokenizer/wire_reader.h"

namespace splitspec::engine::tokenizer_internal {
namespace {

// Field numbers of sentencepiece_model.proto.
constexpr uint32_t kModelPieces = 1;
constexpr uint32_t kModelTrainerSpec = 2;
constexpr uint32_t kModelNormalizerSpec = 3;
constexpr uint32_t kModelDenormalizerSpec = 5;

constexpr uint32_t kPiecePiece = 1;
constexpr uint32_t kPieceScore = 2;
constexpr uint32_t kPieceType = 3;

constexpr uint32_t kTrainerModelType = 3;
constexpr uint32_t kTrainerTreatWhitespaceAsSuffix = 24;
constexpr uint32_t kTrainerByteFallback = 35;
constexpr uint32_t kTrainerUnkSurface = 44;
constexpr uint32_t kTrainerUnkPiece = 45;
constexpr uint32_t kTrainerBosPiece = 46;
constexpr uint32_t kTrainerEosPiece = 47;

constexpr uint32_t kNormName = 1;
constexpr uint32_t kNormPrecompiledCharsmap = 2;
constexpr uint32_t kNormAddDummyPrefix = 3;
constexpr uint32_t kNormRemoveExtraWhitespaces = 4;
constexpr uint32_t kNormEscapeWhitespaces = 5;

// Checks that `field` has the wire type its declaration implies.
absl::Status Expect(const WireField& field, WireType type, const char* what) {
  if (field.wire_type == type) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(what, " (field ", field.number, ") has wire type ",
                                          static_cast<int>(field.wire_type), ", expected ",
                                          static_cast<int>(type)));
}

absl::StatusOr<SpmPiece> ParsePiece(std::string_view bytes, size_t index) {
  SpmPiece piece;
  WireReader reader(bytes);
  while (!reader.done()) {
    WireField f;
    if (absl::Status s = reader.Next(&f); !s.ok()) return s;
    if (f.number == kPiecePiece) {
      if (absl::Status s = Expect(f, WireType::kLengthDelimited, "piece"); !s.ok()) return s;
      piece.piece = std::string(f.bytes);
    } else if (f.number == kPieceScore) {
      if (absl::Status s = Expect(f, WireType::kFixed32, "score"); !s.ok()) return s;
      piece.score = Fixed32ToFloat(f.fixed32);
    } else if (f.number == kPieceType) {
      if (absl::Status s = Expect(f, WireType::kVarint, "type"); !s.ok()) return s;
      if (f.varint < 1 || f.varint > 6) {
        return absl::DataLossError(
            absl::StrCat("piece ", index, " has unknown type ", f.varint));
      }
      piece.type = static_cast<PieceType>(f.varint);
    }
  }
  if (piece.piece.empty()) {
    return absl::DataLossError(absl::StrCat("piece ", index, " is empty"));
  }
  return piece;
}

absl::Status ParseTrainerSpec(std::string_view bytes, SpmModelProto* model) {
  WireReader reader(bytes);
  while (!reader.done()) {
    WireField f;
    if (absl::Status s = reader.Next(&f); !s.ok()) return s;
    switch (f.number) {
      case kTrainerModelType:
        if (absl::Status s = Expect(f, WireType::kVarint, "model_type"); !s.ok()) return s;
        if (f.varint < 1 || f.varint > 4) {
          return absl::DataLossError(absl::StrCat("unknown model_type ", f.varint));
        }
        model->model_type = static_cast<ModelType>(f.varint);
        break;
      case kTrainerTreatWhitespaceAsSuffix:
        if (absl::Status s = Expect(f, WireType::kVarint, "treat_whitespace_as_suffix");
            !s.ok()) {
          return s;
        }
        model->treat_whitespace_as_suffix = f.varint != 0;
        break;
      case kTrainerByteFallback:
        if (absl::Status s = Expect(f, WireType::kVarint, "byte_fallback"); !s.ok()) return s;
        model->byte_fallback = f.varint != 0;
        break;
      case kTrainerUnkSurface:
      case kTrainerUnkPiece:
      case kTrainerBosPiece:
      case kTrainerEosPiece: {
        if (absl::Status s = Expect(f, WireType::kLengthDelimited, "trainer string"); !s.ok()) {
          return s;
        }
        std::string value(f.bytes);
        if (f.number == kTrainerUnkSurface) model->unk_surface = std::move(value);
        if (f.number == kTrainerUnkPiece) model->unk_piece = std::move(value);
        if (f.number == kTrainerBosPiece) model->bos_piece = std::move(value);
        if (f.number == kTrainerEosPiece) model->eos_piece = std::move(value);
        break;
      }
      default:
        break;  // training-only parameters
    }
  }
  return absl::OkStatus();
}

absl::Status ParseNormalizerSpec(std::string_view bytes, SpmNormalizerSpec* spec) {
  WireReader reader(bytes);
  while (!reader.done()) {
    WireField f;
    if (absl::Status s = reader.Next(&f); !s.ok()) return s;
    switch (f.number) {
      case kNormName:
      case kNormPrecompiledCharsmap:
        if (absl::Status s = Expect(f, WireType::kLengthDelimited, "normalizer string");
            !s.ok()) {
          return s;
        }
        (f.number == kNormName ? spec->name : spec->precompiled_charsmap) = std::string(f.bytes);
        break;
      case kNormAddDummyPrefix:
      case kNormRemoveExtraWhitespaces:
      case kNormEscapeWhitespaces: {
        if (absl::Status s = Expect(f, WireType::kVarint, "normalizer flag"); !s.ok()) return s;
        const bool value = f.varint != 0;
        if (f.number == kNormAddDummyPrefix) spec->add_dummy_prefix = value;
        if (f.number == kNormRemoveExtraWhitespaces) spec->remove_extra_whitespaces = value;
        if (f.number == kNormEscapeWhitespaces) spec->escape_whitespaces = value;
        break;
      }
      default:
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SpmModelProto> ParseModelProto(std::string_view serialized) {
  SpmModelProto model;
  WireReader reader(serialized);
  while (!reader.done()) {
    WireField f;
    if (absl::Status s = reader.Next(&f); !s.ok()) return s;
    absl::Status s;
    switch (f.number) {
      case kModelPieces: {
        if (s = Expect(f, WireType::kLengthDelimited, "pieces"); !s.ok()) break;
        absl::StatusOr<SpmPiece> piece = ParsePiece(f.bytes, model.pieces.size());
        if (!piece.ok()) return piece.status();
        model.pieces.push_back(*std::move(piece));
        break;
      }
      case kModelTrainerSpec:
        if (s = Expect(f, WireType::kLengthDelimited, "trainer_spec"); !s.ok()) break;
        s = ParseTrainerSpec(f.bytes, &model);
        break;
      case kModelNormalizerSpec:
        if (s = Expect(f, WireType::kLengthDelimited, "normalizer_spec"); !s.ok()) break;
        s = ParseNormalizerSpec(f.bytes, &model.normalizer);
        break;
      case kModelDenormalizerSpec:
        if (s = Expect(f, WireType::kLengthDelimited, "denormalizer_spec"); !s.ok()) break;
        s = ParseNormalizerSpec(f.bytes, &model.denormalizer);
        break;
      default:
        break;  // self_test_data and extensions
    }
    if (!s.ok()) return s;
  }
  if (model.pieces.empty()) return absl::DataLossError("model has no pieces");
  return model;
}

}  // namespace splitspec::engine::tokenizer_internal
