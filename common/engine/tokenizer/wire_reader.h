// A bounds-checked reader of the protobuf wire format (varints, fixed32/64, length-delimited
// fields), enough to walk a serialized SentencePiece ModelProto without libprotobuf.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_WIRE_READER_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_WIRE_READER_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace splitspec::engine::tokenizer_internal {

// Wire types of the protobuf encoding.
enum class WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// One decoded field. Only the member matching `wire_type` is meaningful.
struct WireField {
  uint32_t number = 0;
  WireType wire_type = WireType::kVarint;
  uint64_t varint = 0;      // kVarint, kFixed64 (raw bits)
  uint32_t fixed32 = 0;     // kFixed32 (raw bits)
  std::string_view bytes;   // kLengthDelimited: points into the reader's buffer
};

// Reads fields one after another from a message's bytes. Not thread-safe; cheap to copy.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}

  bool done() const { return pos_ >= data_.size(); }

  // Decodes the next field. Groups are rejected (SentencePiece never writes them), so a
  // random byte string fails here rather than being half-understood.
  absl::Status Next(WireField* field);

 private:
  absl::Status ReadVarint(uint64_t* value);

  std::string_view data_;
  size_t pos_ = 0;
};

// Reinterprets the raw bits of a fixed32 field as a float (the encoding of `float` fields).
float Fixed32ToFloat(uint32_t bits);

}  // namespace splitspec::engine::tokenizer_internal

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_WIRE_READER_H_
