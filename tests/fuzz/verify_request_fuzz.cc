// Fuzz target: a VerifyRequest (VerifyItems: request id + draft tree). Conversion to core
// VerifyItems round-trips, and each item's draft goes through the verifier's checks.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/rpc/convert.h"
#include "tests/fuzz/rpc_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  splitspec::v1::VerifyRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  const std::vector<splitspec::spec::VerifyItem> items = splitspec::rpc::FromProto(proto);
  FUZZ_CHECK(items.size() == static_cast<size_t>(proto.items_size()));
  splitspec::v1::VerifyRequest written;
  splitspec::rpc::ToProto(items, &written);
  const std::vector<splitspec::spec::VerifyItem> again = splitspec::rpc::FromProto(written);
  FUZZ_CHECK(again.size() == items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    FUZZ_CHECK(again[i].id == items[i].id);
    FUZZ_CHECK(splitspec::fuzz::SameDraft(again[i].draft, items[i].draft));
    splitspec::fuzz::CheckDraftLikeAVerifier(items[i].draft);
  }
  return 0;
}
