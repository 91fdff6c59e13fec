// The frames of the tensor-parallel rendezvous (verifier/tp_rendezvous.h) on a TCP connection,
// and an incremental parser that refuses anything that is not exactly one of them.
//
// A frame is a 12-byte header, big-endian (the ranks may run on different hosts):
//   u32 magic "SSRV", u16 version, u16 type, u32 payload bytes
// then the payload:
//   kHello      follower -> leader   u32 group size, u32 rank
//   kWelcome    leader -> follower   u32 group size, u32 rank, the group id (1..kMaxGroupIdBytes)
//   kRefuse     leader -> follower   why, as text (at most kMaxReasonBytes)
//   kHeartbeat  both ways            empty
//   kBye        both ways            empty: the sender leaves the group in order
#ifndef SPLITSPEC_VERIFIER_TP_RENDEZVOUS_WIRE_H_
#define SPLITSPEC_VERIFIER_TP_RENDEZVOUS_WIRE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace splitspec::verifier::rendezvous {

inline constexpr uint32_t kMagic = 0x53535256;  // "SSRV"
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 12;
// NCCL's unique id is 128 bytes; the limit only keeps a stranger from making us allocate.
inline constexpr size_t kMaxGroupIdBytes = 1024;
inline constexpr size_t kMaxReasonBytes = 512;

enum class FrameType : uint16_t {
  kHello = 1,
  kWelcome = 2,
  kRefuse = 3,
  kHeartbeat = 4,
  kBye = 5,
};

struct Frame {
  FrameType type = FrameType::kHeartbeat;
  uint32_t group_size = 0;  // kHello, kWelcome
  uint32_t rank = 0;        // kHello, kWelcome
  std::string bytes;        // kWelcome: the group id; kRefuse: the reason
};

std::string EncodeFrame(const Frame& frame);

// Feed it what a socket delivered; Next() yields whole frames in order. The first malformed
// header or payload (wrong magic, version, type or size) is an INVALID_ARGUMENT that stays:
// the connection cannot be resynchronised and must be closed. Holds at most one frame's bytes
// beyond what Next() has consumed.
class FrameReader {
 public:
  void Feed(absl::string_view bytes) { buffer_.append(bytes.data(), bytes.size()); }
  // A frame, nullopt when more bytes are needed, or the error.
  absl::StatusOr<std::optional<Frame>> Next();

 private:
  std::string buffer_;
  absl::Status error_;
};

}  // namespace splitspec::verifier::rendezvous

#endif  // SPLITSPEC_VERIFIER_TP_RENDEZVOUS_WIRE_H_
