// Rendezvous frames (see tp_rendezvous_wire.h).
#include "verifier/tp_rendezvous_wire.h"

#include "absl/strings/str_cat.h"

namespace splitspec::verifier::rendezvous {
namespace {

void PutU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v & 0xff));
}
void PutU32(std::string* out, uint32_t v) {
  PutU16(out, static_cast<uint16_t>(v >> 16));
  PutU16(out, static_cast<uint16_t>(v & 0xffff));
}
uint16_t GetU16(absl::string_view in, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(in[at]) << 8) |
                               static_cast<uint8_t>(in[at + 1]));
}
uint32_t GetU32(absl::string_view in, size_t at) {
  return (uint32_t{GetU16(in, at)} << 16) | GetU16(in, at + 2);
}

// The payload size a frame type allows: [min, max].
bool PayloadSizeFits(FrameType type, size_t bytes) {
  switch (type) {
    case FrameType::kHello:
      return bytes == 8;
    case FrameType::kWelcome:
      return bytes > 8 && bytes <= 8 + kMaxGroupIdBytes;
    case FrameType::kRefuse:
      return bytes <= kMaxReasonBytes;
    case FrameType::kHeartbeat:
    case FrameType::kBye:
      return bytes == 0;
  }
  return false;
}

bool KnownType(uint16_t type) {
  return type >= static_cast<uint16_t>(FrameType::kHello) &&
         type <= static_cast<uint16_t>(FrameType::kBye);
}

}  // namespace

std::string EncodeFrame(const Frame& frame) {
  std::string payload;
  if (frame.type == FrameType::kHello || frame.type == FrameType::kWelcome) {
    PutU32(&payload, frame.group_size);
    PutU32(&payload, frame.rank);
  }
  if (frame.type == FrameType::kWelcome || frame.type == FrameType::kRefuse) payload += frame.bytes;
  std::string out;
  PutU32(&out, kMagic);
  PutU16(&out, kVersion);
  PutU16(&out, static_cast<uint16_t>(frame.type));
  PutU32(&out, static_cast<uint32_t>(payload.size()));
  return out + payload;
}

absl::StatusOr<std::optional<Frame>> FrameReader::Next() {
  if (!error_.ok()) return error_;
  if (buffer_.size() < kHeaderBytes) return std::nullopt;
  const absl::string_view in(buffer_);
  const uint32_t magic = GetU32(in, 0);
  const uint16_t version = GetU16(in, 4);
  const uint16_t type = GetU16(in, 6);
  const uint32_t size = GetU32(in, 8);
  if (magic != kMagic) {
    error_ =
        absl::InvalidArgumentError("not a splitspec tensor-parallel rendezvous peer (bad magic)");
  } else if (version != kVersion) {
    error_ = absl::InvalidArgumentError(absl::StrCat("the peer speaks rendezvous protocol version ",
                                                     version, ", this binary ", kVersion));
  } else if (!KnownType(type)) {
    error_ = absl::InvalidArgumentError(absl::StrCat("unknown rendezvous frame type ", type));
  } else if (!PayloadSizeFits(static_cast<FrameType>(type), size)) {
    error_ = absl::InvalidArgumentError(
        absl::StrCat("rendezvous frame type ", type, " with ", size, " payload bytes"));
  }
  if (!error_.ok()) {
    buffer_.clear();
    return error_;
  }
  if (buffer_.size() < kHeaderBytes + size) return std::nullopt;
  Frame frame;
  frame.type = static_cast<FrameType>(type);
  const absl::string_view payload = in.substr(kHeaderBytes, size);
  size_t text_at = 0;
  if (frame.type == FrameType::kHello || frame.type == FrameType::kWelcome) {
    frame.group_size = GetU32(payload, 0);
    frame.rank = GetU32(payload, 4);
    text_at = 8;
  }
  if (frame.type == FrameType::kWelcome || frame.type == FrameType::kRefuse) {
    frame.bytes = std::string(payload.substr(text_at));
  }
  buffer_.erase(0, kHeaderBytes + size);
  return frame;
}

}  // namespace splitspec::verifier::rendezvous
