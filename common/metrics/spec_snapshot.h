// SpecSnapshot: a plain copy of one drafter pool's speculation totals, read from the metric
// handles, for /server_info and the router's GetServerInfo RPC.
#ifndef SPLITSPEC_COMMON_METRICS_SPEC_SNAPSHOT_H_
#define SPLITSPEC_COMMON_METRICS_SPEC_SNAPSHOT_H_

#include <string>
#include <vector>

namespace splitspec::metrics {

struct SpecSnapshot {
  std::string pool;
  std::string policy;
  double num_drafts = 0;
  double num_draft_tokens = 0;
  double num_accepted_tokens = 0;
  double num_tree_drafts = 0;  // of num_drafts, trees
  std::vector<double> accepted_per_position;  // [max_k]
  double active_tier = 0;
  double mean_proposal_length = 0;
  double goodput_estimated_tokens_per_second = 0;
  double goodput_observed_tokens_per_second = 0;

  // Tokens a speculating request gains per step: 1 + accepted / drafts (SGLang's
  // avg_spec_accept_length, vLLM's mean acceptance length); 0 before the first draft.
  double AvgAcceptLength() const {
    return num_drafts > 0 ? 1.0 + num_accepted_tokens / num_drafts : 0.0;
  }
  // Fraction of draft tokens accepted; 0 before the first draft.
  double AcceptanceRate() const {
    return num_draft_tokens > 0 ? num_accepted_tokens / num_draft_tokens : 0.0;
  }
};

}  // namespace splitspec::metrics

#endif  // SPLITSPEC_COMMON_METRICS_SPEC_SNAPSHOT_H_
