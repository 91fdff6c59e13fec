// RouterServingMetrics: handle resolution and per-step / per-request updates.
#include "common/metrics/router_serving_metrics.h"

#include <algorithm>
#include <vector>

#include "common/metrics/assign_or_return.h"

namespace splitspec::metrics {

const char* RequestStatusLabel(RequestStatus status) {
  switch (status) {
    case RequestStatus::kStop:
      return "stop";
    case RequestStatus::kLength:
      return "length";
    case RequestStatus::kCancelled:
      return "cancelled";
    case RequestStatus::kRejected:
      return "rejected";
    case RequestStatus::kError:
      return "error";
  }
  return "error";
}

absl::StatusOr<std::unique_ptr<RouterServingMetrics>> RouterServingMetrics::Create(
    MetricsRegistry& registry) {
  std::unique_ptr<RouterServingMetrics> m(new RouterServingMetrics());

  prometheus::Family<prometheus::Counter>* counters = nullptr;
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      counters,
      registry.CounterFamily("splitspec_requests_total", "Finished requests by final status."));
  for (int s = 0; s < kNumRequestStatuses; ++s) {
    SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
        m->requests_[s],
        registry.AddCounter(*counters,
                            {{"status", RequestStatusLabel(static_cast<RequestStatus>(s))}}));
  }
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(counters,
                                     registry.CounterFamily("splitspec_prompt_tokens_total",
                                                            "Prompt tokens of admitted requests."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->prompt_tokens_, registry.AddCounter(*counters, {}));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(counters,
                                     registry.CounterFamily("splitspec_generation_tokens_total",
                                                            "Output tokens emitted to clients."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->generation_tokens_, registry.AddCounter(*counters, {}));

  prometheus::Family<prometheus::Histogram>* h = nullptr;
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      h, registry.HistogramFamily("splitspec_time_to_first_token_seconds",
                                  "Time from a request's arrival to its first output token."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->ttft_,
                                     registry.AddHistogram(*h, {}, TimeToFirstTokenBuckets()));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      h, registry.HistogramFamily("splitspec_inter_token_latency_seconds",
                                  "Gap between consecutive output tokens of a request; a step "
                                  "that delivers n tokens counts n gaps of interval / n."));
  m->itl_.bounds = &InterTokenBuckets();
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->itl_.histogram,
                                     registry.AddHistogram(*h, {}, InterTokenBuckets()));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      h, registry.HistogramFamily("splitspec_e2e_request_latency_seconds",
                                  "Time from a request's arrival to its final token."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->e2e_,
                                     registry.AddHistogram(*h, {}, RequestLatencyBuckets()));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      h, registry.HistogramFamily("splitspec_request_queue_time_seconds",
                                  "Time a request waited before admission."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->queue_time_,
                                     registry.AddHistogram(*h, {}, RequestLatencyBuckets()));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      h, registry.HistogramFamily("splitspec_step_stage_duration_seconds",
                                  "Router step wall time by stage."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      m->stage_schedule_, registry.AddHistogram(*h, {{"stage", "schedule"}}, StepStageBuckets()));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      m->stage_draft_, registry.AddHistogram(*h, {{"stage", "draft"}}, StepStageBuckets()));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      m->stage_verify_, registry.AddHistogram(*h, {{"stage", "verify"}}, StepStageBuckets()));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      m->stage_rpc_overhead_,
      registry.AddHistogram(*h, {{"stage", "rpc_overhead"}}, StepStageBuckets()));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      m->stage_router_, registry.AddHistogram(*h, {{"stage", "router"}}, StepStageBuckets()));

  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      h, registry.HistogramFamily("splitspec_step_overhead_seconds",
                                  "A decode step's wall time less the compute it waited for: its serial "
                                  "drafts, then the slower of the verify call and the drafts made ahead."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->step_overhead_, registry.AddHistogram(*h, {}, StepOverheadBuckets()));

  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      counters, registry.CounterFamily("splitspec_draft_ahead_total",
                                       "Drafts made ahead while the target verified, by outcome: the "
                                       "hypothesis held, another outcome drafted for held, or neither."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->ahead_hypothesis_,
                                     registry.AddCounter(*counters, {{"outcome", "hypothesis"}}));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->ahead_alternative_,
                                     registry.AddCounter(*counters, {{"outcome", "alternative"}}));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->ahead_dropped_, registry.AddCounter(*counters, {{"outcome", "dropped"}}));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      counters, registry.CounterFamily("splitspec_draft_compute_seconds_total",
                                       "Drafters' reported compute in decode steps, serial and ahead."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->draft_seconds_, registry.AddCounter(*counters, {}));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      counters, registry.CounterFamily("splitspec_draft_hidden_seconds_total",
                                       "Of the drafters' compute, what ran while the target verified."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->hidden_draft_seconds_, registry.AddCounter(*counters, {}));

  prometheus::Family<prometheus::Gauge>* g = nullptr;
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      g, registry.GaugeFamily("splitspec_requests_waiting", "Requests queued for admission."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->waiting_, registry.AddGauge(*g, {}));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      g, registry.GaugeFamily("splitspec_requests_running", "Requests in the running batch."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->running_, registry.AddGauge(*g, {}));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      g, registry.GaugeFamily("splitspec_draft_ahead_verify_slowdown",
                              "How much longer a verify call takes while drafts are made ahead beside it, as "
                              "last learnt (0.5: half as long again; 0 until known). Priced from 0.3 up."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->verify_slowdown_, registry.AddGauge(*g, {}));
  return m;
}

void RouterServingMetrics::RecordStep(const StepStageSeconds& stages,
                                      absl::Span<const TokenEmission> emissions) {
  stage_schedule_->Observe(stages.schedule);
  stage_draft_->Observe(stages.draft);
  stage_verify_->Observe(stages.verify);
  stage_rpc_overhead_->Observe(stages.rpc_overhead);
  stage_router_->Observe(stages.router);
  if (emissions.empty()) return;
  // One lock on the inter-token histogram for the whole batch: the gaps of one emission land in
  // the bucket of interval / n_gaps together.
  thread_local std::vector<double> counts;
  counts.assign(itl_.bounds->size() + 1, 0.0);
  double gap_sum = 0;
  double n_gaps_total = 0;
  double n_tokens = 0;
  for (const TokenEmission& e : emissions) {
    if (e.n_tokens <= 0) continue;
    n_tokens += e.n_tokens;
    const int n_gaps = e.n_tokens - (e.first ? 1 : 0);
    if (n_gaps == 0) continue;
    const double interval = std::max(0.0, e.interval_seconds);
    counts[BucketIndex(*itl_.bounds, interval / n_gaps)] += n_gaps;
    gap_sum += interval;
    n_gaps_total += n_gaps;
  }
  if (n_tokens > 0) generation_tokens_->Increment(n_tokens);
  if (n_gaps_total > 0) itl_.histogram->ObserveMultiple(counts, gap_sum);
}

void RouterServingMetrics::RecordPipeline(const StepPipelineOutcome& step) {
  step_overhead_->Observe(std::max(0.0, step.overhead_seconds));
  if (step.hypothesis_held > 0) ahead_hypothesis_->Increment(step.hypothesis_held);
  if (step.alternative_held > 0) ahead_alternative_->Increment(step.alternative_held);
  if (step.dropped > 0) ahead_dropped_->Increment(step.dropped);
  if (step.draft_seconds > 0) draft_seconds_->Increment(step.draft_seconds);
  if (step.hidden_draft_seconds > 0) hidden_draft_seconds_->Increment(step.hidden_draft_seconds);
  verify_slowdown_->Set(step.verify_slowdown);
}

void RouterServingMetrics::SetLoad(int64_t waiting, int64_t running) {
  waiting_->Set(static_cast<double>(waiting));
  running_->Set(static_cast<double>(running));
}

void RouterServingMetrics::RecordAdmitted(double queue_seconds, int64_t prompt_tokens) {
  queue_time_->Observe(queue_seconds);
  if (prompt_tokens > 0) prompt_tokens_->Increment(static_cast<double>(prompt_tokens));
}

void RouterServingMetrics::RecordFirstToken(double time_to_first_token_seconds) {
  ttft_->Observe(time_to_first_token_seconds);
}

void RouterServingMetrics::RecordFinished(RequestStatus status, double e2e_seconds) {
  const int index = static_cast<int>(status);
  requests_[(index >= 0 && index < kNumRequestStatuses) ? index
                                                        : static_cast<int>(RequestStatus::kError)]
      ->Increment();
  // A request rejected at admission never ran: its latency would skew the e2e distribution.
  if (status != RequestStatus::kRejected) e2e_->Observe(e2e_seconds);
}

}  // namespace splitspec::metrics
