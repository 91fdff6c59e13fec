// Fuzz target: a DraftTree message (what a drafter returns and a verifier receives). Parsing,
// the conversion to the core's DraftProposal and back, and everything a verifier does with
// the proposal (tree checks, greedy and rejection verification) hold up whatever the bytes.
#include <cstddef>
#include <cstdint>

#include "common/rpc/convert.h"
#include "tests/fuzz/rpc_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  splitspec::v1::DraftTree proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  const splitspec::spec::DraftProposal draft = splitspec::rpc::FromProto(proto);
  splitspec::v1::DraftTree written;
  splitspec::rpc::ToProto(draft, &written);
  FUZZ_CHECK(splitspec::fuzz::SameDraft(splitspec::rpc::FromProto(written), draft));
  splitspec::fuzz::CheckDraftLikeAVerifier(draft);
  return 0;
}
