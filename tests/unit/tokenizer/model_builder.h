// Writes small SentencePiece ModelProto files by hand (protobuf wire format), so tests can
// pin down segmentation rules on tiny vocabularies and build deliberately broken models.
// Independent of the tokenizer's own parser.
#ifndef SPLITSPEC_TESTS_UNIT_TOKENIZER_MODEL_BUILDER_H_
#define SPLITSPEC_TESTS_UNIT_TOKENIZER_MODEL_BUILDER_H_

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace splitspec::testing {

inline void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

inline void AppendVarintField(uint32_t field, uint64_t v, std::string* out) {
  AppendVarint(static_cast<uint64_t>(field) << 3 | 0, out);
  AppendVarint(v, out);
}

inline void AppendBytesField(uint32_t field, const std::string& bytes, std::string* out) {
  AppendVarint(static_cast<uint64_t>(field) << 3 | 2, out);
  AppendVarint(bytes.size(), out);
  out->append(bytes);
}

inline void AppendFloatField(uint32_t field, float v, std::string* out) {
  AppendVarint(static_cast<uint64_t>(field) << 3 | 5, out);
  char raw[4];
  std::memcpy(raw, &v, 4);
  out->append(raw, 4);
}

// Piece types of sentencepiece_model.proto.
enum : int { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct TestPiece {
  std::string piece;
  float score = 0.0f;
  int type = kNormal;
};

struct TestModel {
  std::vector<TestPiece> pieces;
  int model_type = 2;  // BPE
  bool byte_fallback = false;
  bool add_dummy_prefix = false;
  bool remove_extra_whitespaces = false;
  std::string precompiled_charsmap;

  // <unk>, <s>, </s> and, with `with_bytes`, the 256 byte pieces, as spm_train lays them out.
  static TestModel WithSpecials(bool with_bytes) {
    TestModel m;
    m.pieces = {{"<unk>", 0, kUnknown}, {"<s>", 0, kControl}, {"</s>", 0, kControl}};
    if (with_bytes) {
      m.byte_fallback = true;
      for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        m.pieces.push_back({name, 0, kByte});
      }
    }
    return m;
  }

  int Add(const std::string& piece, float score, int type = kNormal) {
    pieces.push_back({piece, score, type});
    return static_cast<int>(pieces.size()) - 1;
  }

  std::string Serialize() const {
    std::string out;
    for (const TestPiece& p : pieces) {
      std::string msg;
      AppendBytesField(1, p.piece, &msg);
      AppendFloatField(2, p.score, &msg);
      AppendVarintField(3, p.type, &msg);
      AppendBytesField(1, msg, &out);
    }
    std::string trainer;
    AppendVarintField(3, model_type, &trainer);
    AppendVarintField(35, byte_fallback, &trainer);
    AppendBytesField(2, trainer, &out);
    std::string normalizer;
    AppendBytesField(1, "test", &normalizer);
    if (!precompiled_charsmap.empty()) AppendBytesField(2, precompiled_charsmap, &normalizer);
    AppendVarintField(3, add_dummy_prefix, &normalizer);
    AppendVarintField(4, remove_extra_whitespaces, &normalizer);
    AppendVarintField(5, 1, &normalizer);
    AppendBytesField(3, normalizer, &out);
    return out;
  }
};

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_UNIT_TOKENIZER_MODEL_BUILDER_H_
