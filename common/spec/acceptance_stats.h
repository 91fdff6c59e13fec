// AcceptanceStats: what a stream of verifications accepted, for metrics, GetServerInfo and
// the router's acceptance estimators: proposals, drafted and accepted tokens, acceptance per
// speculative position, and the accept-length histogram.
#ifndef SPLITSPEC_COMMON_SPEC_ACCEPTANCE_STATS_H_
#define SPLITSPEC_COMMON_SPEC_ACCEPTANCE_STATS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/spec/draft_tree.h"
#include "common/spec/verify.h"

namespace splitspec::spec {

// Not thread-safe: one owner records into it (callers that share one guard it with a mutex).
class AcceptanceStats {
 public:
  // One verification of a non-empty proposal: `n_drafted` nodes whose deepest path has
  // `max_depth` tokens, of which the first `accept_length` along one path were accepted.
  // A step with nothing drafted (n_drafted == 0, a plain decode) is not a proposal and is
  // not counted. INVALID_ARGUMENT (and nothing recorded) unless
  // 0 <= accept_length <= max_depth <= n_drafted and max_depth >= 1 when n_drafted > 0.
  absl::Status Record(int32_t n_drafted, int32_t max_depth, int32_t accept_length);
  absl::Status Record(const DraftTree& tree, const VerifyOutcome& result);
  void Merge(const AcceptanceStats& other);

  int64_t proposals() const { return proposals_; }
  int64_t drafted_tokens() const { return drafted_tokens_; }
  int64_t accepted_tokens() const { return accepted_tokens_; }
  // offered_at_position()[i]: proposals whose tree reached depth i + 1;
  // accepted_at_position()[i]: proposals that accepted a token at depth i + 1.
  const std::vector<int64_t>& offered_at_position() const { return offered_at_; }
  const std::vector<int64_t>& accepted_at_position() const { return accepted_at_; }
  // accept_length_histogram()[n]: proposals that accepted exactly n draft tokens.
  const std::vector<int64_t>& accept_length_histogram() const { return histogram_; }

  // Accepted draft tokens per proposal (the target's own token excluded); 0 with no data.
  double MeanAcceptLength() const;
  // Tokens emitted per speculative step: MeanAcceptLength() + 1; 0 with no data.
  double MeanTokensPerStep() const;
  // accepted_tokens / drafted_tokens; 0 with no data.
  double AcceptanceRate() const;
  // accepted_at[i] / offered_at[i]: how often depth i + 1 is accepted when drafted.
  double PositionAcceptanceRate(int32_t position) const;

 private:
  int64_t proposals_ = 0;
  int64_t drafted_tokens_ = 0;
  int64_t accepted_tokens_ = 0;
  std::vector<int64_t> offered_at_;
  std::vector<int64_t> accepted_at_;
  std::vector<int64_t> histogram_;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_COMMON_SPEC_ACCEPTANCE_STATS_H_
