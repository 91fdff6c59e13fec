// RouterSpecMetrics: handle resolution and the batched step update.
#include "common/metrics/router_spec_metrics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/metrics/assign_or_return.h"

namespace splitspec::metrics {

absl::StatusOr<std::unique_ptr<RouterSpecMetrics>> RouterSpecMetrics::Create(
    MetricsRegistry& registry, const RouterSpecMetricsOptions& options) {
  if (options.max_k < 1 || options.max_k > kMaxK) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_k must be in [1, ", kMaxK, "], got ", options.max_k));
  }
  if (options.pool.empty() || options.policy.empty()) {
    return absl::InvalidArgumentError("pool and policy labels must not be empty");
  }
  std::unique_ptr<RouterSpecMetrics> m(new RouterSpecMetrics());
  m->pool_ = options.pool;
  m->policy_ = options.policy;
  m->max_k_ = options.max_k;
  m->accept_bounds_ = LinearIntegerBuckets(1, options.max_k + 1);
  m->proposal_bounds_ = LinearIntegerBuckets(0, options.max_k);
  const prometheus::Labels labels = {{"pool", options.pool}, {"policy", options.policy}};

  prometheus::Family<prometheus::Counter>* family = nullptr;
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      family,
      registry.CounterFamily("splitspec_spec_decode_num_drafts_total",
                             "Speculative drafts: requests that proposed k > 0 in a step."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->num_drafts_, registry.AddCounter(*family, labels));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      family, registry.CounterFamily("splitspec_spec_decode_num_draft_tokens_total",
                                     "Draft tokens proposed to the verifier."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->num_draft_tokens_, registry.AddCounter(*family, labels));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      family, registry.CounterFamily("splitspec_spec_decode_num_accepted_tokens_total",
                                     "Draft tokens accepted by the verifier."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->num_accepted_tokens_, registry.AddCounter(*family, labels));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      family,
      registry.CounterFamily("splitspec_spec_decode_num_accepted_tokens_per_pos_total",
                             "Drafts whose token at draft position `position` was accepted."));
  for (int p = 0; p < options.max_k; ++p) {
    prometheus::Labels pos_labels = labels;
    pos_labels["position"] = absl::StrCat(p);
    prometheus::Counter* counter = nullptr;
    SPLITSPEC_METRICS_ASSIGN_OR_RETURN(counter, registry.AddCounter(*family, pos_labels));
    m->accepted_per_pos_.push_back(counter);
  }

  prometheus::Family<prometheus::Histogram>* histograms = nullptr;
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      histograms,
      registry.HistogramFamily("splitspec_spec_decode_accept_length",
                               "Tokens a draft yielded in one step: accepted draft tokens plus "
                               "the target's own token."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->accept_length_,
                                     registry.AddHistogram(*histograms, labels, m->accept_bounds_));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      histograms, registry.HistogramFamily("splitspec_spec_decode_proposal_length",
                                           "Draft tokens proposed per request per step (0 = "
                                           "plain decode)."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      m->proposal_length_, registry.AddHistogram(*histograms, labels, m->proposal_bounds_));

  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      family, registry.CounterFamily("splitspec_spec_decode_num_tree_drafts_total",
                                     "Speculative drafts that were trees (branching somewhere), "
                                     "not chains."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->num_tree_drafts_, registry.AddCounter(*family, labels));
  m->step_token_bounds_ = {0};
  for (double b = 1; b <= 1024; b *= 2) m->step_token_bounds_.push_back(b);
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      histograms, registry.HistogramFamily("splitspec_spec_decode_step_draft_tokens",
                                           "Draft tokens (tree nodes) verified in one step, summed "
                                           "over the step's requests."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      m->step_draft_tokens_, registry.AddHistogram(*histograms, labels, m->step_token_bounds_));

  prometheus::Family<prometheus::Gauge>* gauges = nullptr;
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      gauges, registry.GaugeFamily("splitspec_spec_active_tier",
                                   "Speculation level of the last step: the tier for tiered "
                                   "policies, otherwise the mean proposal length."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->active_tier_, registry.AddGauge(*gauges, labels));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      gauges, registry.GaugeFamily("splitspec_spec_mean_proposal_length",
                                   "Mean draft tokens proposed per running request in the last "
                                   "step."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->mean_proposal_length_, registry.AddGauge(*gauges, labels));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      gauges, registry.GaugeFamily("splitspec_spec_goodput_estimated_tokens_per_second",
                                   "Goodput the policy expected for its last decision."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->goodput_estimated_, registry.AddGauge(*gauges, labels));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      gauges, registry.GaugeFamily("splitspec_spec_goodput_observed_tokens_per_second",
                                   "Goodput measured over the last step: tokens emitted over the "
                                   "step's wall time."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->goodput_observed_, registry.AddGauge(*gauges, labels));
  return m;
}

void RouterSpecMetrics::RecordStep(absl::Span<const ProposalOutcome> outcomes) {
  if (outcomes.empty()) return;
  // Counting sort of the batch into thread-local bucket counts, so that each histogram is
  // locked once per step and each counter touched once, whatever the batch size.
  thread_local std::vector<double> accept_counts;
  thread_local std::vector<double> proposal_counts;
  accept_counts.assign(max_k_ + 2, 0.0);
  proposal_counts.assign(max_k_ + 2, 0.0);
  double n_drafts = 0;
  double n_draft_tokens = 0;
  double n_accepted = 0;
  double accept_length_sum = 0;
  double n_trees = 0;
  for (const ProposalOutcome& o : outcomes) {
    const int k = std::max(0, o.proposed);
    proposal_counts[std::min(k, max_k_ + 1)] += 1.0;
    if (k == 0) continue;
    if (o.tree) n_trees += 1.0;
    const int a = std::clamp(o.accepted, 0, k);
    accept_counts[std::min(a, max_k_ + 1)] += 1.0;
    n_drafts += 1.0;
    n_draft_tokens += k;
    n_accepted += a;
    accept_length_sum += a + 1;
  }
  Apply(accept_counts, proposal_counts, n_drafts, n_draft_tokens, n_accepted, accept_length_sum);
  if (n_trees > 0) num_tree_drafts_->Increment(n_trees);
  step_draft_tokens_->Observe(n_draft_tokens);
  const double mean_k = n_draft_tokens / static_cast<double>(outcomes.size());
  mean_proposal_length_->Set(mean_k);
  if (!tiered_.load(std::memory_order_relaxed)) active_tier_->Set(mean_k);
}

void RouterSpecMetrics::RecordProposal(int proposed, int accepted) {
  const int k = std::max(0, proposed);
  proposal_length_->Observe(k);
  if (k == 0) return;
  const int a = std::clamp(accepted, 0, k);
  num_drafts_->Increment();
  num_draft_tokens_->Increment(k);
  num_accepted_tokens_->Increment(a);
  accept_length_->Observe(a + 1);
  for (int p = 0; p < std::min(a, max_k_); ++p) accepted_per_pos_[p]->Increment();
}

void RouterSpecMetrics::Apply(const std::vector<double>& accept_counts,
                              const std::vector<double>& proposal_counts, double n_drafts,
                              double n_draft_tokens, double n_accepted, double accept_length_sum) {
  proposal_length_->ObserveMultiple(proposal_counts, n_draft_tokens);
  if (n_drafts == 0) return;
  num_drafts_->Increment(n_drafts);
  num_draft_tokens_->Increment(n_draft_tokens);
  num_accepted_tokens_->Increment(n_accepted);
  // accept_counts is indexed by accepted draft tokens a, which is also the accept-length
  // bucket of a + 1 (bounds 1..max_k+1), so it feeds the histogram as is.
  accept_length_->ObserveMultiple(accept_counts, accept_length_sum);
  // Position p was accepted by every draft with a > p: a suffix sum over the counts.
  double accepted_beyond = accept_counts[max_k_ + 1] + accept_counts[max_k_];
  for (int p = max_k_ - 1; p >= 0; --p) {
    if (accepted_beyond > 0) accepted_per_pos_[p]->Increment(accepted_beyond);
    accepted_beyond += accept_counts[p];
  }
}

void RouterSpecMetrics::SetActiveTier(double tier) {
  tiered_.store(true, std::memory_order_relaxed);
  active_tier_->Set(tier);
}

void RouterSpecMetrics::SetGoodput(double estimated_tokens_per_second,
                                   double observed_tokens_per_second) {
  goodput_estimated_->Set(estimated_tokens_per_second);
  goodput_observed_->Set(observed_tokens_per_second);
}

SpecSnapshot RouterSpecMetrics::Snapshot() const {
  SpecSnapshot s;
  s.pool = pool_;
  s.policy = policy_;
  s.num_drafts = num_drafts_->Value();
  s.num_draft_tokens = num_draft_tokens_->Value();
  s.num_accepted_tokens = num_accepted_tokens_->Value();
  s.num_tree_drafts = num_tree_drafts_->Value();
  for (const prometheus::Counter* c : accepted_per_pos_) {
    s.accepted_per_position.push_back(c->Value());
  }
  s.active_tier = active_tier_->Value();
  s.mean_proposal_length = mean_proposal_length_->Value();
  s.goodput_estimated_tokens_per_second = goodput_estimated_->Value();
  s.goodput_observed_tokens_per_second = goodput_observed_->Value();
  return s;
}

}  // namespace splitspec::metrics
