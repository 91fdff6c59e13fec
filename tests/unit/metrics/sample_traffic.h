// Test helper: every metric set of the three services registered and fed a little synthetic
// traffic, so tests (promtool, dashboard names) and the fake exporter see populated families.
#ifndef SPLITSPEC_TESTS_UNIT_METRICS_SAMPLE_TRAFFIC_H_
#define SPLITSPEC_TESTS_UNIT_METRICS_SAMPLE_TRAFFIC_H_

#include <cstdint>
#include <memory>
#include <random>

#include "absl/status/statusor.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/router_serving_metrics.h"
#include "common/metrics/router_spec_metrics.h"
#include "common/metrics/step_pickup_metrics.h"
#include "common/metrics/worker_metrics.h"

namespace splitspec::metrics::testing {

// The router's sets (two drafter pools with different policies) in one registry.
struct RouterSets {
  std::unique_ptr<RouterSpecMetrics> spec_draft_model;  // pool draft-model, policy smartspec
  std::unique_ptr<RouterSpecMetrics> spec_ngram;        // pool ngram, policy fsm (tiered)
  std::unique_ptr<RouterServingMetrics> serving;
};

absl::StatusOr<RouterSets> CreateRouterSets(MetricsRegistry& registry);

// Feeds `n_steps` synthetic steps (batches of up to 16 requests) into the router's sets.
void FeedRouterSteps(RouterSets& sets, int n_steps, std::mt19937& rng);
// Feeds `n_steps` synthetic forwards into a worker's set.
void FeedWorkerSteps(WorkerMetrics& worker, WorkerRole role, int n_steps, std::mt19937& rng);

// All three services' sets in one registry, fed a few steps each.
struct AllSets {
  RouterSets router;
  std::unique_ptr<WorkerMetrics> drafter;
  std::unique_ptr<WorkerMetrics> verifier;
  // The router's step socket answers and a worker's requests, a few of each wait.
  std::unique_ptr<StepPickupMetrics> answer_pickups;
  std::unique_ptr<StepPickupMetrics> request_pickups;
};
absl::StatusOr<AllSets> CreateAndFeedAll(MetricsRegistry& registry, int n_steps, uint32_t seed);

}  // namespace splitspec::metrics::testing

#endif  // SPLITSPEC_TESTS_UNIT_METRICS_SAMPLE_TRAFFIC_H_
