// RouterServingMetrics: the router's request-level and step-level serving metrics.
//
//   splitspec_requests_total{status}                  finished requests by final status
//   splitspec_prompt_tokens_total                     prompt tokens of admitted requests
//   splitspec_generation_tokens_total                 output tokens emitted
//   splitspec_time_to_first_token_seconds             histogram
//   splitspec_inter_token_latency_seconds             histogram, one observation per token
//   splitspec_e2e_request_latency_seconds             histogram, arrival to final token
//   splitspec_request_queue_time_seconds              histogram, arrival to admission
//   splitspec_requests_waiting / _running             gauges (queue depth, running batch)
//   splitspec_step_stage_duration_seconds{stage}      histogram, stage = schedule | draft |
//                                                     verify | rpc_overhead | router
//   splitspec_step_overhead_seconds                   histogram, a decode step's wall time less
//                                                     the compute it waited for
//   splitspec_draft_ahead_total{outcome}              drafts made ahead (pipeline) by outcome:
//                                                     hypothesis | alternative | dropped
//   splitspec_draft_compute_seconds_total             drafters' reported compute
//   splitspec_draft_hidden_seconds_total              of it, what ran while the target verified
//
// Thread safety: every method may be called concurrently.
#ifndef SPLITSPEC_COMMON_METRICS_ROUTER_SERVING_METRICS_H_
#define SPLITSPEC_COMMON_METRICS_ROUTER_SERVING_METRICS_H_

#include <array>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/metrics/buckets.h"
#include "common/metrics/metrics_registry.h"

namespace splitspec::metrics {

// Final status of a request (label values in parentheses).
enum class RequestStatus {
  kStop = 0,   // (stop) hit a stop token or stop string
  kLength,     // (length) hit max_tokens or the context limit
  kCancelled,  // (cancelled) the client went away or cancelled
  kRejected,   // (rejected) refused at admission (bad input, too long, overloaded)
  kError,      // (error) failed while running
};
inline constexpr int kNumRequestStatuses = 5;
const char* RequestStatusLabel(RequestStatus status);

// Wall time of one router step by stage, in seconds. rpc_overhead is the RPC time beyond the
// workers' own measured compute (round trips, serialisation); router is the step's time outside
// its worker calls (planning, applying answers, bookkeeping; schedule is part of it).
struct StepStageSeconds {
  double schedule = 0;
  double draft = 0;
  double verify = 0;
  double rpc_overhead = 0;
  double router = 0;
};

// One decode step's orchestration overhead and drafting beside verification (the router's
// pipeline): the step's wall time less the compute it waited for; how the drafts made ahead
// during it turned out (the hypothesis held, another outcome drafted for held, or neither); the
// drafters' compute in the step and the part of it that ran while the target verified.
struct StepPipelineOutcome {
  double overhead_seconds = 0;
  int hypothesis_held = 0;
  int alternative_held = 0;
  int dropped = 0;
  double draft_seconds = 0;
  double hidden_draft_seconds = 0;
  // How much longer a verify call takes beside drafts made ahead, as last learnt (0.5: half as
  // long again; router/verify_slowdown.h).
  double verify_slowdown = 0;
};

// Tokens one request received in one step. Speculation delivers tokens in bursts, so the
// interval since the request's previous token is spread evenly over the burst: each token is one
// inter-token gap of interval_seconds / n_gaps. When the burst holds the request's first token
// (first = true) that token is counted as output but not as a gap (its latency is the TTFT), and
// interval_seconds is the time from the first token to the rest of the burst (usually 0).
struct TokenEmission {
  double interval_seconds = 0;
  int n_tokens = 0;
  bool first = false;
};

class RouterServingMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<RouterServingMetrics>> Create(MetricsRegistry& registry);

  // Once per router step: the stage times, and the tokens each request received (generation
  // counter and inter-token latencies). Each histogram is locked once per call.
  void RecordStep(const StepStageSeconds& stages, absl::Span<const TokenEmission> emissions);
  // Once per decode step, beside RecordStep.
  void RecordPipeline(const StepPipelineOutcome& step);
  // Queue depth and running batch size, typically after scheduling.
  void SetLoad(int64_t waiting, int64_t running);

  // Per-request events.
  void RecordAdmitted(double queue_seconds, int64_t prompt_tokens);
  void RecordFirstToken(double time_to_first_token_seconds);
  void RecordFinished(RequestStatus status, double e2e_seconds);

 private:
  RouterServingMetrics() = default;

  std::array<prometheus::Counter*, kNumRequestStatuses> requests_{};
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generation_tokens_ = nullptr;
  prometheus::Histogram* ttft_ = nullptr;
  HistogramRef itl_;
  prometheus::Histogram* e2e_ = nullptr;
  prometheus::Histogram* queue_time_ = nullptr;
  prometheus::Gauge* waiting_ = nullptr;
  prometheus::Gauge* running_ = nullptr;
  prometheus::Histogram* stage_schedule_ = nullptr;
  prometheus::Histogram* stage_draft_ = nullptr;
  prometheus::Histogram* stage_verify_ = nullptr;
  prometheus::Histogram* stage_rpc_overhead_ = nullptr;
  prometheus::Histogram* stage_router_ = nullptr;
  prometheus::Histogram* step_overhead_ = nullptr;
  prometheus::Counter* ahead_hypothesis_ = nullptr;
  prometheus::Counter* ahead_alternative_ = nullptr;
  prometheus::Counter* ahead_dropped_ = nullptr;
  prometheus::Counter* draft_seconds_ = nullptr;
  prometheus::Counter* hidden_draft_seconds_ = nullptr;
  prometheus::Gauge* verify_slowdown_ = nullptr;
};

}  // namespace splitspec::metrics

#endif  // SPLITSPEC_COMMON_METRICS_ROUTER_SERVING_METRICS_H_
