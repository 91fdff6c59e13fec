// Protobuf wire-format decoding with every length checked against the buffer.
#include "common/engine/tokenizer/wire_reader.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace splitspec::engine::tokenizer_internal {

absl::Status WireReader::ReadVarint(uint64_t* value) {
  uint64_t result = 0;
  // A 64-bit varint takes at most 10 bytes.
  for (int shift = 0; shift < 70; shift += 7) {
    if (pos_ >= data_.size()) {
      return absl::DataLossError(absl::StrCat("truncated varint at byte ", pos_));
    }
    const uint8_t byte = static_cast<uint8_t>(data_[pos_++]);
    if (shift < 64) result |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) {
      *value = result;
      return absl::OkStatus();
    }
  }
  return absl::DataLossError(absl::StrCat("varint longer than 10 bytes before byte ", pos_));
}

absl::Status WireReader::Next(WireField* field) {
  const size_t field_start = pos_;
  uint64_t key = 0;
  if (absl::Status s = ReadVarint(&key); !s.ok()) return s;
  const uint64_t number = key >> 3;
  if (number == 0 || number > (1u << 29) - 1) {
    return absl::DataLossError(absl::StrCat("invalid field number ", number, " at byte ",
                                            field_start));
  }
  field->number = static_cast<uint32_t>(number);
  field->wire_type = static_cast<WireType>(key & 7);
  switch (field->wire_type) {
    case WireType::kVarint:
      return ReadVarint(&field->varint);
    case WireType::kFixed64:
      if (data_.size() - pos_ < 8) {
        return absl::DataLossError(absl::StrCat("truncated fixed64 at byte ", pos_));
      }
      std::memcpy(&field->varint, data_.data() + pos_, 8);  // little-endian host assumed
      pos_ += 8;
      return absl::OkStatus();
    case WireType::kFixed32:
      if (data_.size() - pos_ < 4) {
        return absl::DataLossError(absl::StrCat("truncated fixed32 at byte ", pos_));
      }
      std::memcpy(&field->fixed32, data_.data() + pos_, 4);
      pos_ += 4;
      return absl::OkStatus();
    case WireType::kLengthDelimited: {
      uint64_t length = 0;
      if (absl::Status s = ReadVarint(&length); !s.ok()) return s;
      if (length > data_.size() - pos_) {
        return absl::DataLossError(absl::StrCat("field ", number, " at byte ", field_start,
                                                " claims ", length, " bytes but only ",
                                                data_.size() - pos_, " remain"));
      }
      field->bytes = data_.substr(pos_, static_cast<size_t>(length));
      pos_ += static_cast<size_t>(length);
      return absl::OkStatus();
    }
    default:
      return absl::DataLossError(absl::StrCat("unsupported wire type ",
                                              static_cast<uint32_t>(field->wire_type),
                                              " at byte ", field_start));
  }
}

float Fixed32ToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace splitspec::engine::tokenizer_internal
