// Greedy tree verification, the shared target-logits check, and the greedy/sampling dispatch.
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec/verify.h"

namespace splitspec::spec {

absl::Status ValidateTargetLogits(const DraftTree& tree, absl::Span<const float> target_logits,
                                  int32_t vocab_size) {
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab size must be positive, got ", vocab_size));
  }
  // A default-constructed (empty) tree carries no vocab size; any other must match.
  if (!tree.empty() && tree.vocab_size() != vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("draft tree was built for vocab size ",
                                                   tree.vocab_size(), ", target has ", vocab_size));
  }
  const size_t expected = (static_cast<size_t>(tree.size()) + 1) * static_cast<size_t>(vocab_size);
  if (target_logits.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target logits have ", target_logits.size(), " values; a tree of ", tree.size(),
        " nodes needs (1 + ", tree.size(), ") rows of ", vocab_size, " = ", expected));
  }
  return absl::OkStatus();
}

absl::StatusOr<VerifyOutcome> VerifyGreedy(const DraftTree& tree,
                                           absl::Span<const float> target_logits,
                                           int32_t vocab_size) {
  if (absl::Status s = ValidateTargetLogits(tree, target_logits, vocab_size); !s.ok()) return s;
  auto target_choice = [&](int32_t node) {
    return engine::Argmax(
        target_logits.subspan(static_cast<size_t>(node + 1) * vocab_size, vocab_size));
  };
  // Every matching node lies on the target's one greedy continuation, so the walk is a search
  // over matching children only. Duplicate sibling tokens can make several branches match;
  // taking the deepest (lowest index among equals) accepts the most, and any choice emits
  // the same tokens.
  int32_t best = -1;
  std::vector<int32_t> stack = {-1};
  while (!stack.empty()) {
    const int32_t node = stack.back();
    stack.pop_back();
    const int32_t choice = target_choice(node);
    for (int32_t child = tree.first_child(node); child >= 0; child = tree.next_sibling(child)) {
      if (tree.token(child) != choice) continue;
      stack.push_back(child);
      const int32_t best_depth = best < 0 ? 0 : tree.depth(best);
      if (tree.depth(child) > best_depth || (tree.depth(child) == best_depth && child < best)) {
        best = child;
      }
    }
  }
  VerifyOutcome result;
  result.accepted_nodes = tree.PathTo(best);
  for (int32_t node : result.accepted_nodes) result.tokens.push_back(tree.token(node));
  result.tokens.push_back(target_choice(best));
  return result;
}

absl::StatusOr<VerifyOutcome> Verify(const DraftTree& tree, absl::Span<const float> target_logits,
                                     int32_t vocab_size, const engine::SamplingParams& params,
                                     engine::Rng& rng) {
  if (absl::Status s = engine::ValidateSamplingParams(params); !s.ok()) return s;
  if (params.greedy()) return VerifyGreedy(tree, target_logits, vocab_size);
  return VerifyRejection(tree, target_logits, vocab_size, params, rng);
}

}  // namespace splitspec::spec
