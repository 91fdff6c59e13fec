// Expected tokens one speculative step yields (accepted drafts plus the target's own token),
// for a chain of k drafts and for a full top-k tree, under independent per-token acceptance.
#ifndef SPLITSPEC_ROUTER_EXPECTED_LENGTH_H_
#define SPLITSPEC_ROUTER_EXPECTED_LENGTH_H_

#include <cstdint>

#include "absl/types/span.h"

namespace splitspec::router {

// l(a, k) = 1 + a + a^2 + ... + a^k = (1 - a^(k+1)) / (1 - a), and k + 1 as a -> 1.
// a is clamped into [0, 1]; k < 0 counts as 0.
//
// Concavity in k (the per-request optimiser relies on it to stop scanning early):
// l(a, k+1) - l(a, k) = a^(k+1), which is non-increasing in k for a in [0, 1], so the
// marginal gain of one more draft token never grows: l is concave and non-decreasing in k.
double ExpectedChainLength(double a, int32_t k);

// Marginal gain of the (k+1)-th draft token: a^(k+1).
double ChainMarginalGain(double a, int32_t k);

// Full tree with h = a.size() depths: depth j (1-based) has k[j-1] candidates under every
// accepted node of depth j-1, each accepted independently with probability a[j-1].
// Let p_j = 1 - (1 - a_j)^(k_j), the chance that some candidate at depth j is accepted.
// The accepted path reaches depth i with probability P_i = p_1 * ... * p_i, so with m the
// number of accepted depths, E[m] = sum_i P(m >= i) = sum_i P_i and the step yields
//   l = 1 + sum_{i=1..h} prod_{j<=i} p_j
// tokens (bonus included). Regrouping by m = i gives the README's form
//   sum_{i=0..h} (i+1) * (1 - p_{i+1}) * prod_{j<=i} p_j,  with p_{h+1} = 0,
// which ExpectedTreeLengthByOutcome evaluates (tests check both against Monte Carlo).
double ExpectedTreeLength(absl::Span<const double> a, absl::Span<const int32_t> k);
double ExpectedTreeLengthByOutcome(absl::Span<const double> a, absl::Span<const int32_t> k);

// Tokens a full tree sends for verification (root excluded): sum_i prod_{j<=i} k_j.
int64_t TreeVerifiedTokens(absl::Span<const int32_t> k);

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_EXPECTED_LENGTH_H_
