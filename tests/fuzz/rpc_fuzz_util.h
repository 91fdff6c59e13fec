// Shared checks of the RPC fuzz targets: proto -> core -> proto -> core must give the same core
// values (the conversions only copy and apply defaults), compared bit for bit so that NaNs
// from the wire count as equal to themselves; and the draft-tree checks a verifier applies.
#ifndef SPLITSPEC_TESTS_FUZZ_RPC_FUZZ_UTIL_H_
#define SPLITSPEC_TESTS_FUZZ_RPC_FUZZ_UTIL_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/engine/sampling/sampler.h"
#include "common/spec/proposal_tree.h"
#include "common/spec/verify.h"
#include "common/spec/worker_api.h"
#include "tests/fuzz/fuzz_check.h"

namespace splitspec::fuzz {

inline bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

inline bool SameFloats(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SameBits(a[i], b[i])) return false;
  }
  return true;
}

inline bool SameSampling(const engine::SamplingParams& a, const engine::SamplingParams& b) {
  return SameBits(a.temperature, b.temperature) && a.top_k == b.top_k && SameBits(a.top_p, b.top_p) &&
         a.seed == b.seed;
}

inline bool SameDraft(const spec::DraftProposal& a, const spec::DraftProposal& b) {
  return a.tokens == b.tokens && a.parents == b.parents && SameFloats(a.probs, b.probs);
}

// The vocabulary and node budget the draft-tree checks run with (a small model's).
inline constexpr int32_t kFuzzVocab = 64;
inline constexpr int32_t kFuzzMaxNodes = 64;

// Deterministic target logits for every row of a verify step over `tree`.
inline std::vector<float> SyntheticLogits(const spec::DraftTree& tree) {
  std::vector<float> logits(static_cast<size_t>(tree.size() + 1) * kFuzzVocab);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 7919) % 97) / 10.0f;
  return logits;
}

// What a verifier does with a proposal from the wire: build the tree (or refuse it), then
// verify it greedily and by rejection sampling; the outcome is always a path of the tree
// followed by one in-vocabulary token.
inline void CheckDraftLikeAVerifier(const spec::DraftProposal& proposal) {
  absl::StatusOr<spec::DraftTree> tree =
      spec::DraftTreeFromProposal(proposal, spec::DraftTreeLimits{kFuzzVocab, kFuzzMaxNodes});
  if (!tree.ok()) return;
  FUZZ_CHECK(tree->size() == static_cast<int32_t>(proposal.tokens.size()));
  FUZZ_CHECK(tree->size() <= kFuzzMaxNodes);
  const std::vector<uint8_t> mask = tree->AncestorMask();
  FUZZ_CHECK(mask.size() == static_cast<size_t>(tree->size()) * tree->size());
  for (int32_t node = 0; node < tree->size(); ++node) {
    FUZZ_CHECK(tree->parent(node) >= -1 && tree->parent(node) < node);
    FUZZ_CHECK(static_cast<int32_t>(tree->PathTo(node).size()) == tree->depth(node));
  }
  const std::vector<float> logits = SyntheticLogits(*tree);
  engine::SamplingParams sampled;
  sampled.temperature = 1.0f;
  engine::Rng rng(1);
  for (const bool greedy : {true, false}) {
    absl::StatusOr<spec::VerifyOutcome> outcome =
        greedy ? spec::VerifyGreedy(*tree, logits, kFuzzVocab)
               : spec::VerifyRejection(*tree, logits, kFuzzVocab, sampled, rng);
    FUZZ_CHECK_OK(outcome);
    FUZZ_CHECK(outcome->tokens.size() == outcome->accepted_nodes.size() + 1);
    FUZZ_CHECK(outcome->accept_length() <= tree->max_depth());
    int32_t parent = -1;
    for (int32_t node : outcome->accepted_nodes) {
      FUZZ_CHECK(node >= 0 && node < tree->size() && tree->parent(node) == parent);
      parent = node;
    }
    for (int32_t token : outcome->tokens) FUZZ_CHECK(token >= 0 && token < kFuzzVocab);
  }
  // A tree turned back into a proposal builds the same tree again.
  absl::StatusOr<spec::DraftTree> again = spec::DraftTreeFromProposal(
      spec::ProposalFromDraftTree(*tree), spec::DraftTreeLimits{kFuzzVocab, kFuzzMaxNodes});
  FUZZ_CHECK_OK(again);
  FUZZ_CHECK(std::vector<int32_t>(again->tokens().begin(), again->tokens().end()) == proposal.tokens);
  FUZZ_CHECK(std::vector<int32_t>(again->parents().begin(), again->parents().end()) == proposal.parents);
}

}  // namespace splitspec::fuzz

#endif  // SPLITSPEC_TESTS_FUZZ_RPC_FUZZ_UTIL_H_
