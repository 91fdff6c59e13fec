// The per-step calls' messages in the step socket's compact encoding (StepMethod::kVerifyCompact,
// kProposeCompact).
//
// Why not protobuf here: a plain decode step's orchestration is a few tens of microseconds, and
// after the target's forward has streamed its weights through the caches, the code that
// serialises and parses a message runs cold. Measured on the 2-core VM of docs/benchmarks.md,
// protobuf's conversions, serialisations and parses of one Verify round trip took about 25 us
// of an 80 us plain step overhead; these flat copies of the core structs touch a few cache
// lines of code instead.
//
// Layout, host byte order (a step socket is a Unix socket: both ends share a host):
//   array          = u32 count, then count 4-byte values (int32 or float)
//   status         = i32 code, u32 message bytes, message
//   draft          = tokens, parents, probs, scores (four arrays)
//   verify request = u32 items, then per item: u64 id, draft
//   verify answer  = u32 results, then per result: u64 id, i32 accept_length, status, tokens;
//                    then f64 compute_seconds, i32 free_blocks, i32 total_blocks
//   propose request = u32 items, then per item: u64 id, i32 known_length, new_tokens,
//                     i32 depth, i32 branching, i32 max_nodes,
//                     f32 temperature, i32 top_k, f32 top_p, u64 seed
//   propose answer  = u32 results, then per result: u64 id, status, draft; then f64 compute_seconds
// Decoding checks every count against the bytes left before allocating and refuses trailing
// bytes. Values are copied as they are, except the two defaults the protobuf messages have
// (branching 0 reads as 1, top_p 0 as 1), so both encodings mean the same; the workers check
// what they receive as they do gRPC's.
#ifndef SPLITSPEC_COMMON_RPC_VERIFY_FRAME_H_
#define SPLITSPEC_COMMON_RPC_VERIFY_FRAME_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/spec/worker_api.h"

namespace splitspec::rpc {

std::string EncodeVerifyItems(const std::vector<spec::VerifyItem>& items);
// INVALID_ARGUMENT for bytes that are not a whole request.
absl::StatusOr<std::vector<spec::VerifyItem>> DecodeVerifyItems(absl::string_view bytes);

std::string EncodeVerifyResponse(const spec::VerifyResponse& response);
// INVALID_ARGUMENT for bytes that are not a whole answer. A status code outside absl's range
// reads as UNKNOWN, its message kept.
absl::StatusOr<spec::VerifyResponse> DecodeVerifyResponse(absl::string_view bytes);

std::string EncodeProposeItems(const std::vector<spec::ProposeItem>& items);
absl::StatusOr<std::vector<spec::ProposeItem>> DecodeProposeItems(absl::string_view bytes);

std::string EncodeProposeResponse(const spec::ProposeResponse& response);
absl::StatusOr<spec::ProposeResponse> DecodeProposeResponse(absl::string_view bytes);

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_VERIFY_FRAME_H_
