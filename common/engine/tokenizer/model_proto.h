// The parts of a serialized SentencePiece ModelProto (sentencepiece_model.proto) that encoding
// and decoding depend on, decoded by hand from the protobuf wire format.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_MODEL_PROTO_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_MODEL_PROTO_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace splitspec::engine::tokenizer_internal {

// ModelProto.SentencePiece.Type.
enum class PieceType : int {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// TrainerSpec.ModelType.
enum class ModelType : int {
  kUnigram = 1,
  kBpe = 2,
  kWord = 3,
  kChar = 4,
};

struct SpmPiece {
  std::string piece;
  float score = 0.0f;
  PieceType type = PieceType::kNormal;
};

// NormalizerSpec (also used for the optional denormalizer_spec). Defaults are the proto's.
struct SpmNormalizerSpec {
  std::string name;
  std::string precompiled_charsmap;  // empty: identity mapping
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

struct SpmModelProto {
  std::vector<SpmPiece> pieces;  // index == token id
  // TrainerSpec fields.
  ModelType model_type = ModelType::kUnigram;
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  std::string unk_piece = "<unk>";
  std::string bos_piece = "<s>";
  std::string eos_piece = "</s>";
  std::string unk_surface = " \xE2\x81\x87 ";  // " ⁇ ", what <unk> decodes to
  SpmNormalizerSpec normalizer;
  SpmNormalizerSpec denormalizer;
};

// Decodes `serialized`. Fails with a status naming the problem on malformed protobuf, unknown
// enum values and empty pieces; semantic checks (one <unk>, 256 byte pieces, ...) are the
// tokenizer's job.
absl::StatusOr<SpmModelProto> ParseModelProto(std::string_view serialized);

}  // namespace splitspec::engine::tokenizer_internal

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_MODEL_PROTO_H_
