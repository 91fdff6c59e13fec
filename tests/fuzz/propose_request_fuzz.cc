// Fuzz target: a ProposeRequest (ProposeItems: request id, known length, new tokens, proposal
// shape, sampling params, assumed tokens and alternatives). Conversion round-trips, and a real
// DrafterCore with the n-gram proposer (no model needed) answers it twice in a row, as a
// router's consecutive steps would: an error, or one draft per item that fits the asked shape
// and the vocabulary.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/rpc/convert.h"
#include "drafter/drafter_core.h"
#include "drafter/ngram_proposer.h"
#include "tests/fuzz/rpc_fuzz_util.h"

namespace {

using splitspec::spec::ProposeItem;

void CheckResponse(const std::vector<ProposeItem>& items, const splitspec::spec::ProposeResponse& response) {
  FUZZ_CHECK(response.results.size() == items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const splitspec::spec::DraftProposal& draft = response.results[i].draft;
    FUZZ_CHECK(response.results[i].id == items[i].id);
    FUZZ_CHECK(draft.tokens.size() == draft.parents.size());
    FUZZ_CHECK(static_cast<int32_t>(draft.tokens.size()) <= 16);
    for (size_t n = 0; n < draft.parents.size(); ++n) {
      FUZZ_CHECK(draft.parents[n] >= -1 && draft.parents[n] < static_cast<int32_t>(n));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  splitspec::v1::ProposeRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  const std::vector<ProposeItem> items = splitspec::rpc::FromProto(proto);
  FUZZ_CHECK(items.size() == static_cast<size_t>(proto.items_size()));
  splitspec::v1::ProposeRequest written;
  splitspec::rpc::ToProto(items, &written);
  const std::vector<ProposeItem> again = splitspec::rpc::FromProto(written);
  FUZZ_CHECK(again.size() == items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    FUZZ_CHECK(again[i].id == items[i].id && again[i].known_length == items[i].known_length);
    FUZZ_CHECK(again[i].new_tokens == items[i].new_tokens);
    FUZZ_CHECK(again[i].shape.depth == items[i].shape.depth && again[i].shape.branching == items[i].shape.branching &&
               again[i].shape.max_nodes == items[i].shape.max_nodes);
    FUZZ_CHECK(splitspec::fuzz::SameSampling(again[i].sampling, items[i].sampling));
    FUZZ_CHECK(again[i].assumed_tokens == items[i].assumed_tokens && again[i].alternatives == items[i].alternatives);
  }

  auto proposer = splitspec::drafter::NgramProposer::Create(splitspec::spec::NgramMatcherOptions{});
  FUZZ_CHECK(proposer.ok());
  splitspec::drafter::DrafterOptions options;
  options.max_draft_tokens = 16;
  splitspec::drafter::DrafterCore core(std::move(*proposer), options);
  absl::StatusOr<splitspec::spec::ProposeResponse> first = core.Propose(items);
  if (first.ok()) CheckResponse(items, *first);
  absl::StatusOr<splitspec::spec::ProposeResponse> second = core.Propose(items);
  if (second.ok()) CheckResponse(items, *second);
  return 0;
}
