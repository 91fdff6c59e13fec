// RouterMetrics: the router's Prometheus metrics (common/metrics) fed from RouterCore's
// loop-thread hooks: one RouterSpecMetrics per drafter pool and one RouterServingMetrics.
//
//  - OnStep (RouterOptions::step_observer), once per decode step: groups the step's verified
//    requests by pool and records each pool's batch with one RecordStep, the stage times and the
//    tokens delivered since the previous step, the load gauges, goodput and the active tier.
//  - OnAdmitted (RouterOptions::admission_observer): queue time and prompt tokens.
//  - WrapSink: wraps a request's event sink to time its first token, its token bursts (for the
//    inter-token latency) and its end (final status, end-to-end latency).
//  - OnIdle: flushes token bursts that no decode step followed (requests that ended at prefill).
// Every metric handle is resolved in Create(); the hooks do no label lookup.
//
// Thread-safety: OnStep, OnAdmitted, OnIdle and the wrapped sinks run on the router's loop
// thread only (RouterCore guarantees that for its hooks). RecordSubmitted, RecordRejected,
// Snapshots and ServerInfoJson may be called from any thread.
#ifndef SPLITSPEC_ROUTER_SERVICE_ROUTER_METRICS_H_
#define SPLITSPEC_ROUTER_SERVICE_ROUTER_METRICS_H_

#include <atomic>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/router_serving_metrics.h"
#include "common/metrics/router_spec_metrics.h"
#include "common/metrics/spec_snapshot.h"
#include "nlohmann/json.hpp"
#include "router/clock.h"
#include "router/router_core.h"

namespace splitspec::router {

struct RouterMetricsOptions {
  std::vector<std::string> pools;  // drafter pool names; none = one "none" pool
  std::string policy = "none";     // the policy label
  int max_k = 8;                   // largest k the router may choose (per-position series)
  // How often OnStep re-reads a tiered policy's active tier from RouterCore::Snapshot (which
  // copies the whole snapshot, too much to do every step).
  double tier_refresh_seconds = 0.25;
};

class RouterMetrics {
 public:
  // `clock` (not owned, must outlive this) times tokens and requests.
  static absl::StatusOr<std::unique_ptr<RouterMetrics>> Create(metrics::MetricsRegistry& registry,
                                                               const RouterMetricsOptions& options,
                                                               const Clock* clock);

  // Sets options->step_observer and options->admission_observer to this object's hooks.
  void Install(RouterOptions* options);
  // The core whose policy state gives the active tier (policies whose Describe() carries
  // "speculative_num_steps", e.g. sglang-tiers); others report the mean k. Call after
  // RouterCore::Init and before the loop starts; `core` must outlive this object's hooks.
  void SetCore(const RouterCore* core);

  // Loop-thread hooks (see the file comment).
  void OnStep(const StepStats& stats);
  void OnAdmitted(RequestId id, double queue_seconds, int32_t prompt_tokens);
  void OnIdle();
  // Wraps `sink` of a request that arrived at `arrival_seconds` (clock time). Call
  // RecordSubmitted() before handing the wrapped sink to RouterCore::Submit.
  EventSink WrapSink(EventSink sink, double arrival_seconds);

  // A request is about to be submitted (counts as waiting until admitted or finished).
  void RecordSubmitted();
  // A request refused before it ran (bad input, full queue, draining). `was_submitted`: undo
  // RecordSubmitted for a Submit that failed.
  void RecordRejected(bool was_submitted);

  std::vector<metrics::SpecSnapshot> Snapshots() const;
  // The /server_info document: metrics::ServerInfoJson over the pools plus the core's own
  // figures (policy, policy state, queue, running, steps, ...).
  nlohmann::json ServerInfoJson(const ServerInfo& core_info) const;

  const Clock* clock() const { return clock_; }

 private:
  struct Pool {
    std::string name;
    std::unique_ptr<metrics::RouterSpecMetrics> spec;
    std::vector<metrics::ProposalOutcome> step;  // this step's outcomes (loop thread)
  };
  struct RequestClock;

  RouterMetrics() = default;
  size_t PoolIndex(const std::string& name) const;
  void UpdateLoad();
  void OnEvent(RequestClock& request, const StreamEvent& event);

  const Clock* clock_ = nullptr;
  double tier_refresh_seconds_ = 0.25;
  std::vector<Pool> pools_;
  std::unique_ptr<metrics::RouterServingMetrics> serving_;

  // Loop-thread state.
  const RouterCore* core_ = nullptr;
  bool tiered_policy_ = false;
  double tier_read_at_ = -1e300;
  std::vector<metrics::TokenEmission> pending_emissions_;
  std::unordered_set<RequestId> admitted_;  // admitted and not finished

  std::atomic<int64_t> waiting_{0};
  std::atomic<int64_t> running_{0};
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_SERVICE_ROUTER_METRICS_H_
