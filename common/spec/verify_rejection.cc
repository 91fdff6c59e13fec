// Rejection-sampling verification of chains and trees (recursive over siblings).
//
// Why it is exact: at a node with residual r (initially the target's p), a child x drawn
// from q is emitted with probability min(q(x), r(x)) summed over how x can arise, and on
// rejection the next sibling faces normalize(max(r - q, 0)); the chance of emitting y at
// this stage is min(q(y), r(y)) + (1 - sum min(q, r)) * max(r(y) - q(y), 0) / sum max(r - q, 0)
// = r(y), because sum max(r - q, 0) = 1 - sum min(q, r). By induction over siblings the first
// token emitted below a node is distributed as p at that node, and the same argument applies
// again after each accepted child.
#include <vector>

#include "common/spec/verify.h"

namespace splitspec::spec {
namespace {

// Normalises `r` to sum 1 and returns the sum before normalising (0 leaves it untouched).
double Normalize(std::vector<double>& r) {
  double sum = 0.0;
  for (double v : r) sum += v;
  if (sum > 0.0) {
    const double inv = 1.0 / sum;
    for (double& v : r) v *= inv;
  }
  return sum;
}

}  // namespace

absl::StatusOr<VerifyOutcome> VerifyRejection(const DraftTree& tree,
                                              absl::Span<const float> target_logits,
                                              int32_t vocab_size,
                                              const engine::SamplingParams& params,
                                              engine::Rng& rng) {
  if (absl::Status s = engine::ValidateSamplingParams(params); !s.ok()) return s;
  if (absl::Status s = ValidateTargetLogits(tree, target_logits, vocab_size); !s.ok()) return s;

  VerifyOutcome result;
  std::vector<double> residual(vocab_size);  // r over the vocab, sums to 1
  std::vector<double> q(vocab_size, 0.0);    // dense draft distribution, zeroed after use
  int32_t node = -1;
  while (true) {
    const std::vector<float> p = engine::ComputeProbabilities(
        target_logits.subspan(static_cast<size_t>(node + 1) * vocab_size, vocab_size), params);
    int32_t accepted = -1;
    bool residual_changed = false;
    for (int32_t child = tree.first_child(node); child >= 0; child = tree.next_sibling(child)) {
      if (!residual_changed) {
        for (int32_t i = 0; i < vocab_size; ++i) residual[i] = p[i];
        Normalize(residual);
        residual_changed = true;
      }
      const int32_t x = tree.token(child);
      const double u = rng.NextUniform();
      if (!tree.has_draft_probs(child)) {
        // q one-hot at x: accept with probability r(x); the residual is r without x.
        if (u < residual[x]) {
          accepted = child;
          break;
        }
        residual[x] = 0.0;
      } else {
        const DraftDistribution& draft = tree.draft_probs(child);
        double q_total = 0.0;
        for (float v : draft.probs) q_total += v;
        for (size_t j = 0; j < draft.token_ids.size(); ++j) {
          q[draft.token_ids[j]] += static_cast<double>(draft.probs[j]) / q_total;
        }
        // u < r(x) / q(x), written without a division (q(x) > 0 by tree validation).
        const bool accept = u * q[x] < residual[x];
        if (!accept) {
          for (int32_t id : draft.token_ids) {
            residual[id] = residual[id] > q[id] ? residual[id] - q[id] : 0.0;
          }
        }
        for (int32_t id : draft.token_ids) q[id] = 0.0;
        if (accept) {
          accepted = child;
          break;
        }
      }
      // Zero mass left means r == q up to rounding, where rejection has probability 0 in
      // exact arithmetic; fall back to p rather than divide by zero.
      if (!(Normalize(residual) > 0.0)) {
        for (int32_t i = 0; i < vocab_size; ++i) residual[i] = p[i];
        Normalize(residual);
      }
    }
    if (accepted >= 0) {
      result.accepted_nodes.push_back(accepted);
      result.tokens.push_back(tree.token(accepted));
      node = accepted;
      continue;
    }
    // Stop: the correction token from the residual, or the bonus token from p at a leaf.
    int32_t token;
    if (residual_changed) {
      std::vector<float> r(residual.begin(), residual.end());
      token = engine::SampleFromProbabilities(r, rng);
    } else {
      token = engine::SampleFromProbabilities(p, rng);
    }
    result.tokens.push_back(token);
    return result;
  }
}

}  // namespace splitspec::spec
