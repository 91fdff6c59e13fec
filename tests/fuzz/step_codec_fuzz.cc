// Fuzz target: the step socket's compact encoding (common/rpc/step_codec.h), every message of
// it read from the same bytes. Whatever decodes re-encodes to bytes that decode to the same
// values: to the very bytes where the layout has one spelling of each value (a Verify
// request), to a fixed point otherwise (an out-of-range status code reads as UNKNOWN, an OK
// status drops its message, branching and top_p 0 read as 1). Each draft that a verifier
// would receive goes through its checks.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/rpc/step_codec.h"
#include "tests/fuzz/rpc_fuzz_util.h"

namespace {

// decode(encode(decode(bytes))) re-encodes to encode(decode(bytes)).
template <typename Decode, typename Encode>
void CheckFixedPoint(absl::string_view bytes, Decode decode, Encode encode) {
  auto first = decode(bytes);
  if (!first.ok()) return;
  const std::string once = encode(*first);
  auto second = decode(once);
  FUZZ_CHECK(second.ok());
  FUZZ_CHECK(encode(*second) == once);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace rpc = splitspec::rpc;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto items = rpc::DecodeVerifyItems(bytes); items.ok()) {
    FUZZ_CHECK(rpc::EncodeVerifyItems(*items) == bytes);
    for (const splitspec::spec::VerifyItem& item : *items)
      splitspec::fuzz::CheckDraftLikeAVerifier(item.draft);
  }
  CheckFixedPoint(bytes, rpc::DecodeVerifyResponse, rpc::EncodeVerifyResponse);
  CheckFixedPoint(bytes, rpc::DecodeProposeItems, rpc::EncodeProposeItems);
  CheckFixedPoint(bytes, rpc::DecodeProposeResponse, rpc::EncodeProposeResponse);
  return 0;
}
