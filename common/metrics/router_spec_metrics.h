// RouterSpecMetrics: the router's speculation metrics for one (drafter pool, policy) pair, with
// the same meaning as vLLM's spec_decode_* so existing dashboards map over. The handles are
// resolved once in Create(), so recording a step does no label lookup and, for a whole batch,
// takes each histogram's lock once.
//
//   splitspec_spec_decode_num_drafts_total                      requests that proposed k > 0
//   splitspec_spec_decode_num_draft_tokens_total                draft tokens proposed
//   splitspec_spec_decode_num_accepted_tokens_total             draft tokens accepted
//   splitspec_spec_decode_num_accepted_tokens_per_pos_total     accepted at draft position p
//                                                               (a tree: at depth p + 1)
//   splitspec_spec_decode_num_tree_drafts_total                 of the drafts, trees (not chains)
//   splitspec_spec_decode_step_draft_tokens                     histogram: draft tokens (tree
//                                                               nodes) verified per step
//   splitspec_spec_decode_accept_length                         histogram: accepted + 1 per draft
//   splitspec_spec_decode_proposal_length                       histogram: k per request per step
//   splitspec_spec_active_tier                                  tier (or mean k) of the last step
//   splitspec_spec_mean_proposal_length                         mean k of the last step
//   splitspec_spec_goodput_{estimated,observed}_tokens_per_second
// All carry the labels pool and policy; per-position also position = 0..max_k-1.
//
// Thread safety: every method may be called concurrently (the handles are atomic or internally
// locked); a step's updates are not applied atomically as a group.
#ifndef SPLITSPEC_COMMON_METRICS_ROUTER_SPEC_METRICS_H_
#define SPLITSPEC_COMMON_METRICS_ROUTER_SPEC_METRICS_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/metrics/buckets.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/spec_snapshot.h"

namespace splitspec::metrics {

// What one request did in one speculative step.
struct ProposalOutcome {
  // Draft tokens proposed (k for a chain, node count for a tree); 0 means plain decode.
  int proposed = 0;
  // Draft tokens accepted (the path length for a tree), not counting the target's own extra
  // token. Clamped to [0, proposed].
  int accepted = 0;
  bool tree = false;  // the draft was a tree, not a chain
};

struct RouterSpecMetricsOptions {
  std::string pool = "default";  // drafter pool label
  std::string policy = "none";   // speculation policy label
  // Largest proposal length (or tree depth) the policy can choose: sets the per-position series
  // (0..max_k-1, pre-created so rate() works from the start) and the histograms' buckets.
  int max_k = 8;
};

class RouterSpecMetrics {
 public:
  // Largest supported max_k (bounds the number of pre-created per-position series).
  static constexpr int kMaxK = 64;

  // Errors: max_k outside [1, kMaxK], an empty pool or policy, or a registry clash.
  static absl::StatusOr<std::unique_ptr<RouterSpecMetrics>> Create(
      MetricsRegistry& registry, const RouterSpecMetricsOptions& options);

  // Records one step's batch: every counter, both histograms and the mean-k gauge (and the
  // active-tier gauge unless SetActiveTier was ever called). Empty batches are ignored.
  void RecordStep(absl::Span<const ProposalOutcome> outcomes);
  // Same as RecordStep with one outcome; leaves the gauges alone (a single request's k is not
  // the step's mean).
  void RecordProposal(int proposed, int accepted);

  // For tiered policies (sglang_tiers, fsm): the tier chosen for the next step. After the first
  // call RecordStep no longer overwrites the gauge with the mean k.
  void SetActiveTier(double tier);
  void SetGoodput(double estimated_tokens_per_second, double observed_tokens_per_second);

  // Current totals, read from the handles (for /server_info and GetServerInfo).
  SpecSnapshot Snapshot() const;

  int max_k() const { return max_k_; }

 private:
  RouterSpecMetrics() = default;
  // Adds one step's accepted-length counts (index = min(accepted, max_k + 1)) and the matching
  // sums to the counters and histograms.
  void Apply(const std::vector<double>& accept_counts, const std::vector<double>& proposal_counts,
             double n_drafts, double n_draft_tokens, double n_accepted, double accept_length_sum);

  std::string pool_;
  std::string policy_;
  int max_k_ = 0;
  std::vector<double> accept_bounds_;    // 1 .. max_k + 1
  std::vector<double> proposal_bounds_;  // 0 .. max_k
  prometheus::Counter* num_drafts_ = nullptr;
  prometheus::Counter* num_draft_tokens_ = nullptr;
  prometheus::Counter* num_accepted_tokens_ = nullptr;
  std::vector<prometheus::Counter*> accepted_per_pos_;  // [max_k]
  prometheus::Histogram* accept_length_ = nullptr;
  prometheus::Histogram* proposal_length_ = nullptr;
  prometheus::Counter* num_tree_drafts_ = nullptr;
  prometheus::Histogram* step_draft_tokens_ = nullptr;
  std::vector<double> step_token_bounds_;  // 0, 1, 2, 4, ..., 1024
  prometheus::Gauge* active_tier_ = nullptr;
  prometheus::Gauge* mean_proposal_length_ = nullptr;
  prometheus::Gauge* goodput_estimated_ = nullptr;
  prometheus::Gauge* goodput_observed_ = nullptr;
  std::atomic<bool> tiered_{false};
};

}  // namespace splitspec::metrics

#endif  // SPLITSPEC_COMMON_METRICS_ROUTER_SPEC_METRICS_H_
